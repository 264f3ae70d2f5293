"""How every door connects to NATS: the server, NATS's own auth, TLS.

One implementation for the queue coordinator and the worker (``queue/streams.connect``),
``pytest-agentgym fleet`` and the event publisher (``publish/connection.NatsSender``).
A NATS URL names the server and, in its query, where the credentials are, never the
secrets themselves, so the URL can be stored and shown as it is::

    nats://10.0.0.5:4222?creds=/etc/agentgym/worker.creds           a .creds file (JWT + nkey seed)
    nats://10.0.0.5:4222?nkey=/etc/agentgym/worker.nk               an nkey seed file
    nats://10.0.0.5:4222?user=worker&password_env=WORKER_PASSWORD   user and password (variable)
    nats://10.0.0.5:4222?user=worker&password_file=/run/secrets/pw  user and password (file)
    nats://10.0.0.5:4222?token_env=NATS_TOKEN                      token (or token_file=PATH)
    tls://10.0.0.5:4222?tls_ca=/etc/agentgym/ca.pem                TLS, the server checked against a CA
    ...&tls_cert=/etc/agentgym/w.pem&tls_key=/etc/agentgym/w.key   mutual TLS (the client's certificate)
    ...&inbox=_INBOX_lab_worker                                    the connection's inbox prefix

A URL without any of the auth keys takes them from the standard variables, as the
``nats`` CLI does: ``NATS_CREDS``, ``NATS_NKEY``, ``NATS_USER`` with ``NATS_PASSWORD``,
``NATS_TOKEN``; likewise ``NATS_CA``, ``NATS_CERT`` and ``NATS_KEY`` for TLS when the
URL names no ``tls_*`` key. User info in the URL (``nats://user:pass@host``) is refused:
it would put a secret wherever the URL is stored. ``tls://`` (or any ``tls_*`` key)
means TLS; the server must require it (``tls { ... }`` in its config), as nats-py only
upgrades when the server asks. Files and variables are checked when the URL is read
(:func:`split_nats_url`), so a bad value is a usage error naming the key; the secrets
are read when a connection is made (:meth:`NatsAuth.connect_kwargs`), so a rotated
file is picked up by the next connection. nats-py is not imported here.

Each door has its own inbox prefix (the subjects its requests' answers come to):
``_INBOX_agentgym_<door>`` (:func:`inbox_prefix`), or ``inbox=PREFIX`` in the URL, so a
server can let a worker's user subscribe to its own door's inboxes only, not to
``_INBOX.>``, where it would read the coordinator's answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

#: The query keys of NATS's own auth, and of TLS.
AUTH_KEYS = ("creds", "nkey", "user", "password_env", "password_file", "token_env", "token_file")
TLS_KEYS = ("tls_ca", "tls_cert", "tls_key")
#: ``inbox=PREFIX``: the connection's inbox prefix (default: :func:`inbox_prefix` of its door)
KEYS = AUTH_KEYS + TLS_KEYS + ("inbox",)
#: The doors, each with its inbox prefix ``_INBOX_agentgym_<door>`` unless the URL names one.
DOORS = ("coordinator", "worker", "fleet", "events")
_SUBJECT = re.compile(r"[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*")
#: The standard variables a URL without auth (or TLS) keys falls back to.
STANDARD_VARIABLES = {"creds": "NATS_CREDS", "nkey": "NATS_NKEY", "user": "NATS_USER",
                      "password": "NATS_PASSWORD", "token": "NATS_TOKEN", "tls_ca": "NATS_CA",
                      "tls_cert": "NATS_CERT", "tls_key": "NATS_KEY"}
_FILES = ("creds", "nkey", "password_file", "token_file", "tls_ca", "tls_cert", "tls_key")


class NatsOptionsError(ValueError):
    """A NATS URL's auth or TLS that cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class NatsAuth:
    """Where a connection's credentials and TLS material are (paths and variable names only)."""

    creds: str | None = None
    nkey: str | None = None
    user: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    token_env: str | None = None
    token_file: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    #: the inbox prefix the URL names (``inbox=``); None: the door's own
    inbox: str | None = None
    #: the URL asked for TLS (``tls://``)
    tls_scheme: bool = False

    @property
    def tls(self) -> bool:
        return self.tls_scheme or any((self.tls_ca, self.tls_cert, self.tls_key))

    @property
    def method(self) -> str:
        """'creds', 'nkey', 'user', 'token' or 'none'."""
        for name, given in (("creds", self.creds), ("nkey", self.nkey), ("user", self.user),
                            ("token", self.token_env or self.token_file)):
            if given:
                return name
        return "none"

    def describe(self) -> str:
        """What a person may read: the method and where its secret comes from, never the secret."""
        words = {"creds": f"credentials file {self.creds}", "nkey": f"nkey seed file {self.nkey}",
                 "user": f"user {self.user} (password from "
                         f"{'$' + self.password_env if self.password_env else self.password_file})",
                 "token": f"token from {'$' + self.token_env if self.token_env else self.token_file}",
                 "none": "no auth"}[self.method]
        if self.tls:
            words += ", TLS" + (f" (CA {self.tls_ca})" if self.tls_ca else "") + (
                " with a client certificate" if self.tls_cert else "")
        return words

    def connect_kwargs(self, environ: Mapping[str, str] | None = None, *, door: str | None = None
                       ) -> dict[str, Any]:
        """Keyword arguments for ``nats.connect``: the secrets read now, and the inbox prefix
        (the URL's ``inbox=``, else ``door``'s own; neither: nats-py's ``_INBOX``). Raises
        NatsOptionsError."""
        environ = os.environ if environ is None else environ
        out: dict[str, Any] = {}
        if self.inbox or door:
            out["inbox_prefix"] = self.inbox or inbox_prefix(door or "")
        if self.creds:
            out["user_credentials"] = _readable(self.creds, "creds")
        elif self.nkey:
            out["nkeys_seed"] = _readable(self.nkey, "nkey")
        elif self.user:
            out["user"] = self.user
            out["password"] = _secret("password", self.password_env, self.password_file, environ)
        elif self.token_env or self.token_file:
            out["token"] = _secret("token", self.token_env, self.token_file, environ)
        if self.method in ("creds", "nkey"):
            _needs_nkeys(self.method)
        if self.tls:
            out["tls"] = self.ssl_context()
            _quiet_ssl_eof_warning()
        return out

    def ssl_context(self) -> Any:
        import ssl

        try:
            context = ssl.create_default_context(cafile=_readable(self.tls_ca, "tls_ca") if self.tls_ca else None)
            if self.tls_cert:
                context.load_cert_chain(_readable(self.tls_cert, "tls_cert"), _readable(self.tls_key, "tls_key"))
        except ssl.SSLError as exc:
            raise NatsOptionsError(f"tls_ca={self.tls_ca}, tls_cert={self.tls_cert}, tls_key={self.tls_key}: "
                                   f"not usable PEM files ({exc}); give a PEM CA bundle and a PEM certificate "
                                   f"with its unencrypted key") from None
        return context


def inbox_prefix(door: str) -> str:
    """The inbox prefix of a door when its URL names none: ``_INBOX_agentgym_<door>``."""
    if door not in DOORS:
        raise ValueError(f"door {door!r}: one of {', '.join(DOORS)}")
    return f"_INBOX_agentgym_{door}"


def split_nats_url(url: str, *, where: str = "", form: str = "", environ: Mapping[str, str] | None = None,
                   ) -> tuple[str, dict[str, str], NatsAuth]:
    """``(server, other query keys, auth)`` of a NATS URL; raises NatsOptionsError naming
    ``where`` (the option that gave it) and the key at fault. ``form``: the caller's own
    keys, for the message of a URL that is not one."""
    from pytest_agentgym.results.redact import redact_url

    environ = os.environ if environ is None else environ
    at = f"{where}={redact_url(str(url))}" if where else redact_url(str(url))
    parts = urlsplit(str(url).strip())
    if parts.scheme not in ("nats", "tls") or not parts.hostname:
        raise NatsOptionsError(f"{at}: expected nats://HOST:PORT or tls://HOST:PORT"
                               + (f" {form}" if form else ""))
    if "@" in parts.netloc:
        raise NatsOptionsError(f"{at}: no user or secret in the URL (it is stored and shown); give "
                               f"?user=NAME&password_env=VARIABLE, ?token_env=VARIABLE, ?creds=PATH or "
                               f"?nkey=PATH instead (docs/scale-out.md, Running beyond one trusted machine)")
    try:
        parts.port
    except ValueError as exc:
        raise NatsOptionsError(f"{at}: {exc}; write nats://HOST:PORT") from None
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    given = {key: query.pop(key) for key in KEYS if key in query}
    for key, value in given.items():
        if not value.strip():
            raise NatsOptionsError(f"{at}: {key}= is empty; give a value or leave the key out")
    if "inbox" in given and not _SUBJECT.fullmatch(given["inbox"]):
        raise NatsOptionsError(f"{at}: inbox={given['inbox']} is no inbox prefix: give subject tokens (letters, "
                               f"digits, _ - $) joined by dots, without wildcards or spaces, e.g. "
                               f"inbox=_INBOX_lab_worker")
    auth = _auth(given, at, environ, tls_scheme=parts.scheme == "tls")
    server = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return server, query, auth


def nats_server(url: str, *, where: str = "", door: str = "events") -> tuple[str, NatsAuth]:
    """``(server, auth)`` of a URL that has no keys of its own (the event publisher's);
    raises NatsOptionsError naming ``where`` and the key at fault. The auth's inbox prefix
    is the URL's ``inbox=``, else ``door``'s own (``_INBOX_agentgym_events``)."""
    server, rest, auth = split_nats_url(url, where=where)
    if rest:
        raise NatsOptionsError(f"{where + '=' if where else ''}{server}: unknown key(s) {', '.join(sorted(rest))}; "
                               f"known: {', '.join(KEYS)}")
    return server, auth if auth.inbox else replace(auth, inbox=inbox_prefix(door))


def _auth(given: dict[str, str], at: str, environ: Mapping[str, str], *, tls_scheme: bool) -> NatsAuth:
    values: dict[str, str] = {}
    if not any(key in given for key in AUTH_KEYS):  # the standard variables, as the nats CLI reads them
        for key in ("creds", "nkey", "user"):
            if environ.get(STANDARD_VARIABLES[key]):
                values[key] = environ[STANDARD_VARIABLES[key]]
        if "user" in values:
            values["password_env"] = STANDARD_VARIABLES["password"]
        elif environ.get(STANDARD_VARIABLES["token"]):
            values["token_env"] = STANDARD_VARIABLES["token"]
    if not any(key in given for key in TLS_KEYS):
        values.update({key: environ[STANDARD_VARIABLES[key]] for key in TLS_KEYS
                       if environ.get(STANDARD_VARIABLES[key])})
    values.update(given)
    methods = [key for key in ("creds", "nkey", "user") if key in values]
    if "token_env" in values or "token_file" in values:
        methods.append("token_env/token_file")
    if len(methods) > 1:
        raise NatsOptionsError(f"{at}: {' and '.join(methods)} are two ways to authenticate; give one")
    if "user" in values and not ("password_env" in values or "password_file" in values):
        raise NatsOptionsError(f"{at}: user={values['user']} needs its password: add password_env=VARIABLE "
                               f"(a variable holding it) or password_file=PATH")
    for pair in (("password_env", "password_file"), ("token_env", "token_file")):
        if all(key in values for key in pair):
            raise NatsOptionsError(f"{at}: {pair[0]} and {pair[1]}: give one")
    if ("password_env" in values or "password_file" in values) and "user" not in values:
        raise NatsOptionsError(f"{at}: a password without user=NAME; add user=NAME")
    if ("tls_cert" in values) != ("tls_key" in values):
        raise NatsOptionsError(f"{at}: tls_cert and tls_key go together (the client's certificate and its key)")
    auth = NatsAuth(tls_scheme=tls_scheme, **values)
    for key in _FILES:
        path = getattr(auth, key)
        if path:
            _readable(path, key, at)
    for key in ("password_env", "token_env"):
        name = getattr(auth, key)
        if name and not environ.get(name):
            raise NatsOptionsError(f"{at}: {key}={name}, but the variable {name} is not set (or empty); "
                                   f"export {name}=... in the environment of this process")
    return auth


def _readable(path: str, key: str, at: str = "") -> str:
    where = f"{at}: " if at else ""
    file = Path(path).expanduser()
    if not file.is_file():
        raise NatsOptionsError(f"{where}{key}={path}: no such file; give the path of an existing file")
    if not os.access(file, os.R_OK):
        raise NatsOptionsError(f"{where}{key}={path}: the file is not readable by this process; "
                               f"fix its permissions")
    return str(file)


def _secret(what: str, variable: str | None, path: str | None, environ: Mapping[str, str]) -> str:
    if variable:
        value = environ.get(variable, "")
        if not value:
            raise NatsOptionsError(f"{what}_env={variable}: the variable {variable} is not set (or empty); "
                                   f"export {variable}=... in the environment of this process")
        return value
    value = Path(_readable(path or "", f"{what}_file")).read_text().strip()
    if not value:
        raise NatsOptionsError(f"{what}_file={path}: the file is empty; write the {what} in it")
    return value


def _needs_nkeys(method: str) -> None:
    try:
        import nkeys  # noqa: F401 - nats-py signs the server's nonce with it
    except ImportError:
        raise NatsOptionsError(f"{method}=...: signing in with an nkey needs the nkeys package; "
                               f"pip install nkeys") from None



def refusal(exc: BaseException, auth: NatsAuth) -> str | None:
    """What a failed connect says when the server was there but refused us: the sign-in
    (wrong or missing credentials) or TLS; None for anything else (unreachable)."""
    import ssl

    said = f"{type(exc).__name__}: {exc}".rstrip(": ")
    text = said.lower()
    if "authorization" in text or "authentication" in text:
        return (f"refused the sign-in ({auth.describe()}; {said}); give the credentials its config accepts "
                f"(docs/scale-out.md, Running beyond one trusted machine)")
    if isinstance(exc, ssl.SSLError) or "ssl" in text or "certificate" in text or "tls" in text:
        return (f"refused TLS ({auth.describe()}; {said}); check tls_ca (the CA that signed the server's "
                f"certificate), tls_cert and tls_key, and that the server has tls {{ ... }} in its config")
    return None


def first_refusal(errors: list[BaseException], auth: NatsAuth) -> BaseException | None:
    """The first of the errors a failed connect reported that says the server refused us: after
    an ``Authorization Violation`` the server hangs up, and what follows (a broken pipe, a
    reconnect's errors) would hide why."""
    return next((exc for exc in errors if refusal(exc, auth)), None)


class _SslEofNoise(logging.Filter):
    """asyncio's "returning true from eof_received() has no effect when using ssl", which nats-py's
    protocol makes it log at every TLS connection's end: noise on a worker's terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received()" not in record.getMessage()


def _quiet_ssl_eof_warning() -> None:
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _SslEofNoise) for f in logger.filters):
        logger.addFilter(_SslEofNoise())


async def refuse_plain_text(server: str, auth: NatsAuth, timeout: float) -> None:
    """When TLS is asked for, read the server's INFO line first and raise NatsOptionsError if it
    does not require TLS: nats-py would then connect in the clear (a ``tls://`` URL included)
    and send the credentials unencrypted. Anything else (no answer, refused) is left to the
    connect that follows, which says it in its own words."""
    if not auth.tls:
        return
    parts = urlsplit(server)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 4222),
                                                timeout)
    except (OSError, asyncio.TimeoutError):
        return
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (OSError, asyncio.TimeoutError):  # e.g. a server that wants the TLS handshake first
        return
    finally:
        writer.close()
    try:
        info = json.loads(line[5:]) if line.startswith(b"INFO ") else None
    except ValueError:
        return
    if isinstance(info, dict) and not info.get("tls_required"):
        raise NatsOptionsError(f"{server} does not require TLS, and this URL asks for it ({auth.describe()}): "
                               f"nothing was sent; give the server a tls {{ ... }} block, or use nats:// "
                               f"without tls_* keys on a network you trust")

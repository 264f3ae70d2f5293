"""Secrets in URLs, hidden wherever a URL is shown or stored.

A base URL may carry credentials: ``http://alice:secret@host/v1`` (user info)
or ``https://host/v1?api_key=...`` (a key in the query). They are needed for
the requests, never for what a person reads. :func:`redact_url` hides them in
one URL, :func:`redact_text` in every URL inside free text (command lines,
notes, error messages, log lines), :func:`redact_data` in every string of a
JSON-like value (records, run.json, event payloads).

    >>> redact_url("http://alice:secret@127.0.0.1:8000/v1?api_key=s3cret&x=1")
    'http://***@127.0.0.1:8000/v1?api_key=***&x=1'

What is hidden: the whole user info (``user:password@`` and a bare ``user@``
become ``***@``), and the value of every query or fragment parameter whose
name says it is a secret: the names in :data:`SECRET_NAMES` and any name that
ends in ``_key``, ``_token``, ``_secret`` or ``_password`` (case does not
matter, ``-`` counts as ``_``), and every path segment that is a secret
(:func:`secret_segments`): the segments after a webhook's marker segment
(``hooks``, ``webhooks``, ``webhookb2``, and on ``hooks.slack.com`` everything
after the first segment), and any segment that looks like a token (a run of 16
or more letters and digits holding at least two of each). Everything else of the
URL is kept exactly as written, so a redacted URL still says where the server is.

    >>> redact_url("https://hooks.slack.com/services/T0001/B0002/aBcD1234eFgH5678iJkL9012")
    'https://hooks.slack.com/services/***/***/***'
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_plus

#: Query parameter names whose values are hidden (compared lower-cased, ``-`` as ``_``).
SECRET_NAMES = frozenset({
    "key", "api_key", "apikey", "x_api_key", "token", "access_token", "refresh_token", "id_token",
    "auth", "authorization", "auth_token", "secret", "client_secret", "password", "passwd", "pwd",
    "signature", "sig", "x_amz_signature", "x_amz_credential", "x_amz_security_token", "credential",
})
_SECRET_SUFFIXES = ("_key", "_token", "_secret", "_password", "_passwd", "_signature")

#: Path segments after which every segment is a webhook's id or token (compared lower-cased):
#: Discord's ``/api/webhooks/ID/TOKEN``, Mattermost's ``/hooks/ID``, Teams' ``/webhookb2/...``.
WEBHOOK_MARKERS = frozenset({"hooks", "webhooks", "webhookb2"})
#: Hosts whose whole path after its first segment is secret: Slack's
#: ``/services/T.../B.../SECRET`` and ``/workflows/...``, ``/triggers/...``.
WEBHOOK_HOSTS = frozenset({"hooks.slack.com"})
#: A token inside a segment: 16 or more letters and digits in a row (``-``, ``_``, ``.``,
#: ``:``, ``%`` and every other mark end a run), at least two of them digits and two letters.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9]{16,}")

MASK = "***"

# A URL inside text: a scheme, "://", then everything up to a space, a quote, a
# bracket, a backslash or a backtick. Stopping at quotes and backslashes keeps
# the result valid when the text is JSON or a shell-quoted command line.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>\\`]+")


def is_secret_name(name: str) -> bool:
    """Does a query parameter of this name hold a secret? (``api_key``, ``X-API-Key``, ``my_token``)"""
    normal = unquote_plus(name).strip().lower().replace("-", "_")
    return normal in SECRET_NAMES or normal.endswith(_SECRET_SUFFIXES)


def _redact_params(params: str) -> str:
    """``a=1&api_key=s&token=t`` -> ``a=1&api_key=***&token=***`` (order and spelling kept)."""
    parts = params.split("&")
    for number, part in enumerate(parts):
        name, equals, value = part.partition("=")
        if equals and value and is_secret_name(name):
            parts[number] = f"{name}={MASK}"
    return "&".join(parts)


def _looks_like_token(segment: str) -> bool:
    for run in _TOKEN_RUN.findall(segment):
        digits = sum(char.isdigit() for char in run)
        if digits >= 2 and len(run) - digits >= 2:
            return True
    return False


def secret_segments(host: str, segments: list[str]) -> list[bool]:
    """Which of a URL path's ``segments`` (the path split at ``/``, the empty one before
    its leading ``/`` included) are secrets: those after a marker of
    :data:`WEBHOOK_MARKERS`, those after the first on a host of :data:`WEBHOOK_HOSTS`,
    and those that look like a token (:data:`_TOKEN_RUN`)."""
    secret = [False] * len(segments)
    named = [number for number, segment in enumerate(segments) if segment]
    after = len(segments)
    if host.lower() in WEBHOOK_HOSTS and named:
        after = named[0] + 1
    for number in named:
        if number >= after:
            break
        if unquote_plus(segments[number]).lower() in WEBHOOK_MARKERS:
            after = number + 1
    for number in named:
        secret[number] = number >= after or _looks_like_token(segments[number])
    return secret


def _redact_path(host: str, path: str) -> str:
    if not path:
        return path
    segments = path.split("/")
    hidden = secret_segments(host, segments)
    return "/".join(MASK if secret else segment for segment, secret in zip(segments, hidden))


def redact_url(url: str) -> str:
    """``url`` with its user info, secret path segments and secret query values replaced by ``***``.

    Works on text that is not a well-formed URL too (nothing raises): without
    ``://`` only the query is looked at.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if separator and "@" in authority:
        authority = f"{MASK}@{authority.rpartition('@')[2]}"
    before_fragment, hash_mark, fragment = tail.partition("#")
    path, question, query = before_fragment.partition("?")
    host = authority.rpartition("@")[2]
    host = host[:host.rfind(":")] if host.rfind(":") > host.rfind("]") else host  # no port
    path = _redact_path(host if separator else "", path)
    if question:
        query = _redact_params(query)
    if hash_mark and "=" in fragment:
        fragment = _redact_params(fragment)  # e.g. OAuth's #access_token=...
    return f"{scheme}{separator}{authority}{path}{question}{query}{hash_mark}{fragment}"


# A comma inside a matched URL that another URL follows (``tensorzero=http://a@h,ollama=http://b@g``,
# as --agentgym-endpoint takes them): the match is cut there, so the second URL's user info
# is not read as the first one's path.
_NEXT_URL = re.compile(r",(?=[^,]*://)")


def _redact_match(match: re.Match[str]) -> str:
    first, *more = _NEXT_URL.split(match.group(0))
    return ",".join([redact_url(first), *(redact_text(piece) for piece in more)])


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted by :func:`redact_url`."""
    if "://" not in text:  # the common case, and cheap: most text holds no URL
        return text
    return _URL_IN_TEXT.sub(_redact_match, text)


def redact_data(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, tuples, strings, numbers) with
    every string redacted by :func:`redact_text`; dict keys are kept."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {key: redact_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_data(item) for item in value)
    return value

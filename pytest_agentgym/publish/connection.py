"""One NATS connection that gets events stored: JetStream where a stream captures
the subject, core NATS otherwise.

:class:`NatsSender` is used by :class:`~pytest_agentgym.publish.publisher.EventPublisher`
(on its own thread and event loop) and by
:func:`~pytest_agentgym.publish.outbox.publish_outbox`. Every event goes out
with the header ``Nats-Msg-Id: <event.msg_id>``, so a JetStream stream stores a
retried event once. nats-py is imported when a connection is made, never at
plugin import. The URL signs in and uses TLS as every NATS door of the plugin does
(:mod:`pytest_agentgym.transport.nats_options`: ``?creds=PATH``,
``?user=NAME&password_env=VARIABLE``, ``?token_env=VARIABLE``, ``tls://``, ``?tls_ca=PATH``, ...).
"""

from __future__ import annotations

import asyncio
import logging

from pytest_agentgym.results.events import SUBJECTS, Event
from pytest_agentgym.publish.notices import Notice
from pytest_agentgym.transport.nats_options import (NatsAuth, NatsOptionsError, first_refusal, nats_server, refusal,
                                                    refuse_plain_text)

log = logging.getLogger("pytest_agentgym.publish")

MSG_ID_HEADER = "Nats-Msg-Id"
STREAM_SUBJECTS = ("agentgym.>",)
#: JetStream's duplicate window for a stream this package creates (the server's
#: default is 2 minutes; a longer one covers retries after a long outage).
DUPLICATE_WINDOW_S = 3600.0
#: A connection that misses two pings in a row is dropped and made again
#: (nats-py's default interval is 120 s).
PING_INTERVAL_S = 15


class NatsUnavailable(ConnectionError):
    """NATS at ``url`` cannot take events; ``reason`` says why, in a few words."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"NATS at {url} unreachable ({reason})")
        self.url = url
        self.reason = reason


def describe_failure(exc: BaseException, timeout: float | None = None, auth: NatsAuth | None = None) -> str:
    """A few words for a connection failure: 'connection refused', 'no answer within 1 s', ..."""
    if auth is not None and (why := refusal(exc, auth)):
        return why
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or "Timeout" in type(exc).__name__:
        return f"no answer within {timeout:g} s" if timeout else "timed out"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class NatsSender:
    """One NATS connection that knows how to get an event stored (async, one event loop).

    ``jetstream``: "auto" publishes through JetStream the subjects a stream
    captures and the others on core NATS; True requires JetStream (connect
    fails without it, and an event no stream captures fails to send); False
    always uses core NATS. ``create_stream`` creates ``stream`` on
    ``agentgym.>`` when it does not exist. Used by :class:`EventPublisher` and
    by :func:`~pytest_agentgym.publish.outbox.publish_outbox`.
    """

    def __init__(self, url: str, *, jetstream: bool | str = "auto", create_stream: bool = False,
                 stream: str = "AGENTGYM", connect_timeout: float = 1.0, ack_timeout: float = 2.0) -> None:
        if jetstream not in ("auto", True, False):
            raise ValueError(f"jetstream={jetstream!r}: use 'auto', True or False")
        self.url = url
        try:
            self._server, self._auth = nats_server(url)
            self._unusable: str | None = None
        except NatsOptionsError as exc:  # checked at the option already; a profile's nats.url lands here
            self._server, self._auth, self._unusable = url, NatsAuth(), str(exc)
        self.jetstream = jetstream
        self.create_stream = create_stream
        self.stream = stream
        self.connect_timeout = connect_timeout
        self.ack_timeout = ack_timeout
        self._nc = None
        self._js = None
        self._routes: dict[str, str | None] = {}
        self._had_jetstream = False
        #: what the last connect found, as notices (advisory ones describe the setup)
        self.notices: list[Notice] = []

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    @property
    def mode(self) -> str:
        """'jetstream' when a stream captures any known subject (or it is required), else 'core'."""
        if self._js is not None and (self.jetstream is True or any(self._routes.values())):
            return "jetstream"
        return "core"

    async def connect(self, timeout: float | None = None) -> list[str]:
        """Connect once, bounded by ``timeout`` (default ``connect_timeout``), and find
        out how each subject is published. Returns notes (the texts of :attr:`notices`);
        raises :class:`NatsUnavailable`."""
        from nats.aio.client import Client

        timeout = self.connect_timeout if timeout is None else timeout
        await self.close()
        try:
            if self._unusable:
                raise NatsOptionsError(self._unusable)
            signed_in = self._auth.connect_kwargs()
            await refuse_plain_text(self._server, self._auth, max(0.1, timeout))
        except NatsOptionsError as exc:  # or a variable unset, a file gone since the URL was read
            raise NatsUnavailable(self.url, str(exc)) from None
        nc = Client()
        seen: list[BaseException] = []

        async def on_error(exc: BaseException) -> None:
            seen.append(exc)
            log.debug("NATS %s: %s", self.url, exc)

        try:
            # nats-py retries a refused connect max_reconnect_attempts+1 times,
            # reconnect_time_wait apart, even with allow_reconnect=False (its
            # defaults: 60 x 2 s). Bound both, and the whole call. Reconnecting
            # after a loss is ours to do, so that retries keep their msg ids.
            await asyncio.wait_for(nc.connect(
                servers=[self._server], name="pytest-agentgym", allow_reconnect=False,
                max_reconnect_attempts=1, reconnect_time_wait=0.01,
                connect_timeout=max(0.1, timeout), error_cb=on_error,
                ping_interval=PING_INTERVAL_S, max_outstanding_pings=2, **signed_in,
            ), timeout=max(0.1, timeout))
        except Exception as exc:  # noqa: BLE001 - any failure means unreachable
            await _close_quietly(nc)
            cause = first_refusal(seen, self._auth) or (seen[-1] if seen else exc)
            raise NatsUnavailable(self.url, describe_failure(cause, timeout, self._auth)) from None
        self._nc = nc
        try:
            return await self._find_routes()
        except NatsUnavailable:
            await self.close()
            raise

    async def _find_routes(self) -> list[str]:
        self._routes = {}
        self._js = None
        self.notices = await self._notices()
        return [notice.text for notice in self.notices]

    async def _notices(self) -> list[Notice]:
        url = self.url
        if self.jetstream is False:
            return [Notice(f"nats.core-only {url}", f"NATS at {url}: core NATS (JetStream not used)")]
        js = self._nc.jetstream(timeout=max(self.connect_timeout, 0.5))
        try:
            await js.account_info()
        except Exception as exc:  # noqa: BLE001 - no responders, disabled for the account, ...
            if self.jetstream is True or self._had_jetstream:
                # Required, or there before: a server still recovering, not a reason
                # to send the rest of the run unstored on core NATS.
                why = "is required but" if self.jetstream is True else "was there before but is"
                raise NatsUnavailable(url, f"JetStream {why} not available there: "
                                      f"{describe_failure(exc)}") from None
            return [Notice(f"nats.no-jetstream {url}", f"NATS at {url}: core NATS, no JetStream; events "
                           f"reach current subscribers only and are not stored")]
        self._js = js
        self._had_jetstream = True
        notices = []
        if self.create_stream:
            notices.append(await self._ensure_stream())
        for subject in SUBJECTS:
            await self._route(subject)
        captured = sorted({s for s in self._routes.values() if s})
        missing = [subject for subject, stream in self._routes.items() if stream is None]
        if captured:
            notices.append(Notice(f"nats.stream {url}", f"NATS at {url}: JetStream, stream "
                                  f"{', '.join(captured)} (retries deduplicated by msg id)"))
        if missing:
            fate = ("fail and go to the outbox" if self.jetstream is True
                    else "go out on core NATS and are not stored")
            notices.append(Notice(f"nats.no-stream {url}", f"NATS at {url}: JetStream has no stream for "
                                  f"{', '.join(missing)}; those events {fate} (create a stream on "
                                  f"agentgym.> or enable stream creation)"))
        return [n for n in notices if n is not None]

    async def _ensure_stream(self) -> Notice | None:
        """Create the stream when it is missing; a notice of this run when anything was done."""
        from nats.js.errors import NotFoundError

        try:
            await self._js.stream_info(self.stream)
            return None
        except NotFoundError:
            pass
        key = f"nats.create-stream {self.url}"
        try:
            await self._js.add_stream(name=self.stream, subjects=list(STREAM_SUBJECTS),
                                      duplicate_window=DUPLICATE_WINDOW_S)
        except Exception as exc:  # noqa: BLE001 - e.g. subjects overlap another stream
            return Notice(key, f"NATS at {self.url}: could not create stream {self.stream} on agentgym.> "
                          f"({exc})", advisory=False)
        return Notice(key, f"NATS at {self.url}: created stream {self.stream} on agentgym.>", advisory=False)

    async def _route(self, subject: str) -> str | None:
        """The stream that captures ``subject`` (None: core NATS), looked up once per connection."""
        if subject not in self._routes:
            stream = None
            if self._js is not None:
                from nats.js.errors import NotFoundError

                try:
                    stream = await self._js.find_stream_name_by_subject(subject)
                except NotFoundError:
                    stream = None
            self._routes[subject] = stream
        return self._routes[subject]

    async def send(self, event: Event) -> bool:
        """Deliver one event; True when JetStream already had its msg id. Raises on failure."""
        if not self.connected:
            from nats.errors import ConnectionClosedError

            raise ConnectionClosedError
        headers = {MSG_ID_HEADER: event.msg_id}
        try:
            stream = await self._route(event.subject)
            if stream is not None or (self._js is not None and self.jetstream is True):
                ack = await self._js.publish(event.subject, event.data(), timeout=self.ack_timeout,
                                             headers=headers)
                return bool(ack.duplicate)
            await self._nc.publish(event.subject, event.data(), headers=headers)
            await self._nc.flush(timeout=self.ack_timeout)
            return False
        except Exception:
            self._routes.pop(event.subject, None)  # the stream may have gone or moved
            raise

    async def close(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            await _close_quietly(nc)


async def _close_quietly(nc) -> None:
    try:
        await asyncio.wait_for(nc.close(), 1.0)
    except Exception:  # noqa: BLE001 - closing a dead or half-open connection
        pass

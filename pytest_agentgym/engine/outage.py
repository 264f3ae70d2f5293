"""What the engine does when the model endpoint stops answering mid-run: the node
profile's ``model.outage`` (config/profile.py ``OutagePolicy``; docs/outages.md).

Without a policy (``fail``) an episode whose model call finds the endpoint down
errors like any other (retried once, then an error record): a gateway restarted
mid-run cost every episode in flight, and a long run hours. With one:

- ``wait``: the first episode that finds the endpoint unreachable pauses the run:
  no new episode starts, and the endpoint's health probe is repeated every
  ``probe_every_s`` seconds for up to ``wait_s``. When it answers, the run goes on
  and every episode the outage cut short is tried again: a retry kept in the
  record's ``retried`` like any other, not taken from ``--agentgym-retries``.
  When the wait runs out, those episodes error as before, their message saying
  how long was waited; later ones probe once and error at once while it is down.
- ``failover``: the endpoints after the current one in ``model.endpoints`` are
  probed in order and the first that answers serves the rest of the run. Only an
  attempt started after the switch goes to the new endpoint, so each record names
  the model that played it, and gates refuse to judge a mix (run/plans.py).

Only a call that made no exchange at all counts (refused, reset, closed without
an answer: ``ModelError.unreachable``): a 4xx, a 5xx or a slow answer says the
endpoint is there. The guard lives on the engine's loop, so the pytest run, the
queue worker and anything else built on :class:`~pytest_agentgym.engine.runner.Engine`
get the same behaviour; the run layer hands it the endpoints and their probes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pytest_agentgym.config.profile import OutagePolicy

log = logging.getLogger("pytest_agentgym.engine.outage")


@dataclass(frozen=True)
class Endpoint:
    """One endpoint the guard may use: ``describe`` names it (the URL redacted),
    ``probe`` (blocking, run on a thread) says whether it answers and why not,
    ``make_model`` builds its ChatModel on the engine's loop."""

    describe: str
    probe: Callable[[], tuple[bool, str]]
    make_model: Callable[[], Any]


class OutageGuard:
    """The outage policy of one engine. ``endpoints``: the one in use first, then (for
    ``failover``) the rest of the chain in order. ``notify`` gets each line meant for
    the person running it (the terminal, run.json's notes); every line also goes to the
    log (harness.log)."""

    def __init__(self, policy: OutagePolicy, endpoints: Sequence[Endpoint],
                 notify: Callable[[str], None] = lambda line: None, *, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        if not endpoints:
            raise ValueError("an outage guard needs the endpoint in use")
        self.policy = policy
        self._endpoints = list(endpoints)
        self._notify = notify
        self._clock = clock
        self._current = 0
        self._models: list[Any] = []
        #: seconds waited in vain for the endpoint in use (None: not given up on it)
        self._gave_up: float | None = None

    async def setup(self, model: Any) -> None:
        """On the engine's loop: ``model`` plays against the first endpoint."""
        self._models = [model]
        self._open = asyncio.Event()  # set: new episodes may start
        self._open.set()
        self._lock = asyncio.Lock()  # one wait (or switch) at a time; the others see its result

    @property
    def model(self) -> Any:
        """The ChatModel an attempt starting now plays against."""
        return self._models[-1]

    def models(self) -> list[Any]:
        """Every model made (to close with the engine)."""
        return list(self._models)

    def covers(self, exc: BaseException) -> bool:
        """Whether ``exc`` is an outage of the model endpoint the policy acts on."""
        return self.policy.policy != "fail" and bool(getattr(exc, "unreachable", False))

    async def admitted(self) -> None:
        """Wait while the run is paused (a new episode starts only when the endpoint answers)."""
        await self._open.wait()

    async def recover(self, served: Any) -> str | None:
        """After an attempt against ``served`` found the endpoint unreachable: None when
        the episode may be tried again (the endpoint answers again, or another one
        serves now), else what to add to its error (how long was waited, to no avail)."""
        async with self._lock:
            if served is not self.model:
                return None  # switched while this attempt ran: it goes to the new endpoint
            if self.policy.policy == "failover":
                return await self._fail_over()
            return await self._wait()

    async def _probe(self, index: int) -> tuple[bool, str]:
        return await asyncio.to_thread(self._endpoints[index].probe)

    async def _wait(self) -> str | None:
        endpoint = self._endpoints[self._current]
        ok, reason = await self._probe(self._current)
        if ok:  # back already (an episode that failed while the pause ran, or a flap)
            self._gave_up = None
            return None
        if self._gave_up is not None:
            return (f"the endpoint did not come back within the {self._gave_up:.0f} s waited for it earlier in "
                    f"this run (model.outage.wait_s), and is still down ({reason})")
        wait_s, started = self.policy.wait_s, self._clock()
        self._say(f"model endpoint {endpoint.describe} unreachable ({reason}): new episodes paused; probing it "
                  f"every {self.policy.probe_every_s:g} s for up to {wait_s:g} s (model.outage.wait_s)")
        self._open.clear()
        try:
            while True:
                left = started + wait_s - self._clock()
                if left <= 0:
                    waited = self._clock() - started
                    self._gave_up = waited
                    self._say(f"model endpoint {endpoint.describe} still unreachable after waiting {waited:.0f} s "
                              f"({reason}): episodes resumed, and those that meet the outage error")
                    return (f"waited {waited:.0f} s for the endpoint to come back (model.outage.wait_s: "
                            f"{wait_s:g}); it did not ({reason})")
                await asyncio.sleep(min(self.policy.probe_every_s, left))
                ok, reason = await self._probe(self._current)
                if ok:
                    self._say(f"model endpoint {endpoint.describe} answers again after {self._clock() - started:.1f} s "
                              "unreachable: episodes resumed; those it cut short are played again")
                    return None
        finally:
            self._open.set()

    async def _fail_over(self) -> str | None:
        here = self._endpoints[self._current]
        ok, reason = await self._probe(self._current)
        if ok:
            return None
        passed = [f"{here.describe} ({reason})"]
        self._open.clear()
        try:
            for index in range(self._current + 1, len(self._endpoints)):
                ok, why = await self._probe(index)
                if not ok:
                    passed.append(f"{self._endpoints[index].describe} ({why})")
                    continue
                self._models.append(self._endpoints[index].make_model())
                self._current = index
                self._say(f"model endpoint {here.describe} unreachable ({reason}): failed over to "
                          f"{self._endpoints[index].describe} (model.outage.policy: failover); each record names "
                          "the model that played it, and gates are not judged on episodes of two models")
                return None
        finally:
            self._open.set()
        return ("no endpoint to fail over to answers (model.outage.policy: failover): "
                + "; ".join(passed))

    def _say(self, line: str) -> None:
        log.warning("%s", line)
        try:
            self._notify(line)
        except Exception:  # noqa: BLE001 - a listener's fault must not stop the engine
            log.exception("an outage line could not be shown")

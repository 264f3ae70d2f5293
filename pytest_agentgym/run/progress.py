"""How far a run has got, and how long the rest should take: a pure model of the
run's progress, fed one finished episode at a time (plugin/progress.py prints it).

A long run (the lightweight battery is 240 episodes of up to 300 s each) shows
pytest one character per episode and nothing else; this model gives what a person
watching wants to know: episodes done of those planned, per environment the
running success rate and mean reward, the infrastructure errors, the time spent
and an estimate of the time left.

**The estimate.** Each played episode's ``duration_s`` is its own wall time; the
run's wall time is the clock's. From them:

- *per-episode time* ``d`` = the mean ``duration_s`` of the episodes this run played;
- *effective parallelism* ``p`` = (sum of those durations) / (wall time since the
  episodes began), capped by the concurrency (episodes in flight at once, all
  processes together): how many episodes really ran side by side, with whatever the
  run spends between episodes (reports, restarts, a slow environment reset) counted
  against it, so a run one episode at a time with overhead has ``p`` a little under
  1. The episodes began when the model was made, or when the first played episode
  began if that was later (xdist's workers start after the controller's clock);
- ETA = (remaining episodes) x ``d`` / ``p``.

The estimate is made at each finished episode (the wall time taken then); asked
later, the time since that episode is taken off, but never below the time of the
episodes not yet begun (all but the ``p`` in flight), so an episode that runs long
does not make the ETA reach zero while the rest of the run is still to come.
Episodes that a resumed run keeps from an earlier generation count as done, and
in the rates, but not in ``d`` or ``p``: they took no time in this run. An
environment stopped early (--agentgym-stop-when-decided) has nothing left to play.
Before the first played episode there is no estimate (None).

Pytest-free and clock-injected: tests feed a fake clock and get exact numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass
class EnvProgress:
    """One environment's tallies."""

    planned: int
    done: int = 0
    errors: int = 0
    kept: int = 0
    successes: int = 0
    #: episodes scored (done, not an error): the denominator of the success rate
    scored: int = 0
    reward_sum: float = 0.0
    rewarded: int = 0
    #: stopped early (--agentgym-stop-when-decided): the rest of it will not be played
    stopped: bool = False

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.scored if self.scored else None

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.rewarded if self.rewarded else None


@dataclass(frozen=True)
class Snapshot:
    """Where the run stands at one moment (what a progress line shows)."""

    done: int
    planned: int
    errors: int
    kept: int
    elapsed_s: float
    #: seconds still to go, None before the first played episode
    eta_s: float | None
    envs: Mapping[str, EnvProgress] = field(default_factory=dict)


class Progress:
    """The run's progress: :meth:`finished` for each finished episode, :meth:`snapshot`
    when it is to be shown. ``planned`` is env -> episodes planned; ``concurrency`` the
    most episodes in flight at once (None: no known cap, e.g. a fleet of queue workers);
    the clock starts when the model is made (``clock``: seconds, monotonic)."""

    def __init__(self, planned: Mapping[str, int], concurrency: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.envs = {env: EnvProgress(planned=int(n)) for env, n in planned.items()}
        self.concurrency = concurrency
        self._clock = clock
        self.started = clock()
        self._played = 0
        self._played_s = 0.0
        self._work_started = self.started  # when the episodes began (see the module's docstring)
        #: when the last played episode ended: the estimate is made as of then
        self._last_played_at: float | None = None

    @property
    def planned(self) -> int:
        return sum(e.planned for e in self.envs.values())

    @property
    def done(self) -> int:
        return sum(e.done for e in self.envs.values())

    def finished(self, env: str, *, success: bool, reward: float | None, duration_s: float,
                 error: bool = False, kept: bool = False) -> None:
        """One episode ended (or was kept from an earlier generation, ``kept``). An
        environment not planned (a record the plan did not foresee) is added with what
        it has done, so the totals never show more done than planned."""
        tally = self.envs.get(env)
        if tally is None:
            tally = self.envs[env] = EnvProgress(planned=0)
        tally.done += 1
        tally.planned = max(tally.planned, tally.done)
        if error:
            tally.errors += 1
        else:
            tally.scored += 1
            tally.successes += bool(success)
            if reward is not None and math.isfinite(reward):
                tally.reward_sum += reward
                tally.rewarded += 1
        if kept:
            tally.kept += 1
            return
        now = self._clock()
        if not self._played:
            self._work_started = max(self.started, now - max(0.0, float(duration_s)))
        self._played += 1
        self._played_s += max(0.0, float(duration_s))
        self._last_played_at = now

    def stopped(self, env: str) -> None:
        """``env`` stopped early (--agentgym-stop-when-decided): what it has not played
        will not be, so it is planned no more than it has done (an episode still in
        flight that ends later is added by :meth:`finished`)."""
        tally = self.envs.get(env)
        if tally is not None and not tally.stopped:
            tally.stopped = True
            tally.planned = tally.done

    def _parallelism(self, elapsed: float) -> float:
        """Episodes really side by side: played time over wall time, capped by the concurrency."""
        if elapsed <= 0:
            return float(self.concurrency or 1)
        p = self._played_s / elapsed
        if self.concurrency is not None:
            p = min(p, float(self.concurrency))
        return max(p, 1e-9)

    def _per_episode(self) -> float:
        return self._played_s / self._played

    def eta(self) -> float | None:
        """Seconds still to go (the rule is the module's docstring), None before the first
        played episode; 0 when every planned episode is done."""
        remaining = self.planned - self.done
        if remaining <= 0:
            return 0.0
        made = self._last_played_at
        if made is None:
            return None
        p = self._parallelism(made - self._work_started)
        estimate = remaining * self._per_episode() / p
        in_flight = min(remaining, max(1, round(p)))
        not_begun = (remaining - in_flight) * self._per_episode() / p
        return max(estimate - (self._clock() - made), not_begun)

    def snapshot(self) -> Snapshot:
        envs = self.envs.values()
        return Snapshot(done=self.done, planned=self.planned, errors=sum(e.errors for e in envs),
                        kept=sum(e.kept for e in envs), elapsed_s=self._clock() - self.started,
                        eta_s=self.eta(), envs=dict(self.envs))


def duration_text(seconds: float) -> str:
    """``8.3s``, ``10m12s``, ``2h05m``: short, and read back by :func:`parse_duration`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(round(seconds))
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    minutes = whole // 60
    return f"{minutes // 60}h{minutes % 60:02d}m"


def parse_duration(text: str) -> float:
    """Seconds from what :func:`duration_text` wrote (for readers of the log)."""
    import re

    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"not a duration like 8.3s, 10m12s or 2h05m: {text!r}")
    hours, minutes, seconds = match.groups()
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


def progress_line(snapshot: Snapshot) -> str:
    """One line: ``agentgym: 37/240 done (BabyAI 12/40 58% r=0.61, Maze 25/200 40% r=0.40),
    3 errors, elapsed 10m12s, ETA 52m03s``. An environment's rate and mean reward are over
    its scored episodes and left out before it has one; ``ETA ?`` before an estimate."""
    parts = []
    for env, tally in snapshot.envs.items():
        part = f"{env} {tally.done}/{tally.planned}"
        if tally.success_rate is not None:
            part += f" {tally.success_rate:.0%}"
        if tally.mean_reward is not None:
            part += f" r={tally.mean_reward:.2f}"
        if tally.stopped:
            part += " stopped"
        parts.append(part)
    line = f"agentgym: {snapshot.done}/{snapshot.planned} done"
    if parts:
        line += f" ({', '.join(parts)})"
    line += f", {snapshot.errors} error{'' if snapshot.errors == 1 else 's'}"
    if snapshot.kept:
        line += f", {snapshot.kept} kept"
    line += f", elapsed {duration_text(snapshot.elapsed_s)}"
    line += f", ETA {'?' if snapshot.eta_s is None else duration_text(snapshot.eta_s)}"
    return line

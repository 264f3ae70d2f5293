"""Progress lines in the terminal during a long run, and each item's figures under ``-v``.

A run of hundreds of episodes of minutes each shows pytest one character per episode
and nothing in between. :class:`ProgressPrinter` (registered by the controller's
session before the first item, fed with each reported record) prints a line of the
run's progress (run/progress.py: done per environment, success rate and mean reward,
errors, elapsed, ETA) between pytest's own characters, on a line of its own:

- ``--agentgym-progress=SECONDS``: at most one line every SECONDS, after an episode
  finished (default 30 on a terminal, 60 when the output is not one, e.g. a CI log).
  On a terminal, a run without xdist also gets a line when SECONDS pass while an
  episode is being waited for (a heartbeat: a model slow enough to take minutes an
  episode still shows the run is alive). Not on a terminal, a line comes only after
  an episode finished, so a log never gets more lines than the run has episodes;
- ``each``: a line after every finished episode; ``off``: none. ``-qq`` turns the
  default off (an explicit ``--agentgym-progress`` still prints).

Nothing is printed by an xdist worker (under ``-n`` the controller receives every
report and counts them) or with ``--collect-only`` (no item runs).

**Not garbling pytest's output.** The main thread writes only where pytest itself
writes, after its report (``pytest_runtest_logfinish``), through the terminal
reporter's ``write_line``, which first ends pytest's line of characters. The
heartbeat's thread writes only while the main thread is inside an item's setup or
call (where the item waits for its episode and the terminal reporter writes
nothing), holding a lock that the main thread takes before it leaves that phase; it
lifts pytest's output capture for the moment of the write (as pytest's live logging
does) and then writes the current item's prefix again (the file name, or under
``-v`` the item's id), so the item's character or word lands where pytest meant it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

import pytest

from pytest_agentgym.run.progress import Progress, progress_line

#: The interval when none is given: a person watching a terminal, or a log read later.
TERMINAL_INTERVAL_S = 30.0
LOG_INTERVAL_S = 60.0


class ProgressPrinter:
    """Prints the run's progress (see the module's docstring); ``mode`` is ``each`` or
    ``interval`` (every ``interval_s`` seconds at most); ``heartbeat`` also prints while
    an item waits for its episode."""

    def __init__(self, config: pytest.Config, reporter: Any, progress: Progress, *, mode: str,
                 interval_s: float, heartbeat: bool, clock: Any = time.monotonic,
                 stopped: Callable[[], Iterable[str]] = tuple,
                 notices: Callable[[], list[str]] = list) -> None:
        self.config = config
        self._notices = notices  # lines to show as they come (a model endpoint's outage: engine/outage.py)
        self._stopped = stopped  # the environments stopped early so far
        self.reporter = reporter
        self.progress = progress
        self.mode = mode
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_line = clock()
        self._fresh = 0  # episodes reported since the last line
        self._current: tuple[str, Any] | None = None  # the item being run: (nodeid, location)
        self._in_phase = False  # the main thread is in an item's setup or call
        self._bare_width: int | None = None  # the line's width while it holds only the item's prefix
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat, name="agentgym-progress", daemon=True)
            self._thread.start()

    # -- fed by the controller's session -------------------------------------------------------

    def episode(self, data: dict[str, Any], *, kept: bool) -> None:
        """A report carried this episode's record (``data``: EpisodeRecord.to_dict())."""
        error = data.get("outcome") == "error" or data.get("error") is not None
        with self._lock:
            self.progress.finished(str(data.get("env")), success=bool(data.get("success")),
                                   reward=data.get("reward"), duration_s=float(data.get("duration_s") or 0.0),
                                   error=error, kept=kept)
            self._fresh += 1

    # -- the main thread ------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)  # after pytest wrote the item's prefix
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._current = (nodeid, location)
        # under -v the line now holds the item's id alone: a heartbeat may replace it
        self._bare_width = self._line_width() if self.reporter.showlongtestinfo else None

    def _line_width(self) -> int | None:
        return getattr(getattr(self.reporter, "_tw", None), "width_of_current_line", None)

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside pytest's capture: the phase proper
    def pytest_runtest_setup(self, item: pytest.Item):  # type: ignore[no-untyped-def]
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item):  # type: ignore[no-untyped-def]
        return (yield from self._phase())

    def _phase(self):  # type: ignore[no-untyped-def]
        self._in_phase = True
        try:
            return (yield)
        finally:
            with self._lock:  # a heartbeat being written ends first
                self._in_phase = False

    @pytest.hookimpl(trylast=True)  # after pytest wrote the item's character or word
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        with self._lock:
            for notice in self._notices():
                self._write(f"agentgym: {notice}")
            if self._fresh and (self.mode == "each" or self._clock() - self._last_line >= self.interval_s):
                self._write()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The last line (before pytest's summary), when episodes finished since the one before."""
        self.stop()
        with self._lock:
            for notice in self._notices():
                self._write(f"agentgym: {notice}")
            if self._fresh:
                self._write()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _write(self, text: str | None = None) -> None:
        """One progress line (the lock held), on a line of its own: pytest's terminal writer
        knows where its cursor is, the reporter's ``currentfspath`` not always (under xdist a
        result's character may follow a line this printer ended)."""
        if self._line_width():
            self.reporter.write("\n")
        self.reporter.currentfspath = None
        self.reporter.write_line(text if text is not None else self._line())

    def _line(self) -> str:
        """The line to print now; from here on, the episodes so far have been shown."""
        for env in self._stopped():
            self.progress.stopped(env)
        self._last_line = self._clock()
        self._fresh = 0
        return progress_line(self.progress.snapshot())

    # -- the heartbeat's thread -----------------------------------------------------------------

    def _beat(self) -> None:
        tick = max(0.05, min(1.0, self.interval_s / 4))
        while not self._stop.wait(tick):
            with self._lock:
                if self._in_phase and self._current is not None:
                    for notice in self._notices():
                        self._write_between(f"agentgym: {notice}")
                    if self._clock() - self._last_line >= self.interval_s:
                        self._write_between()

    def _write_between(self, text: str | None = None) -> None:
        """A line while the main thread waits in an item's phase: out of pytest's capture,
        then the item's prefix again for pytest's character or word to follow (writing the
        prefix starts a new line, which ends this one)."""
        capman = self.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            reporter, line = self.reporter, text if text is not None else self._line()
            if self._bare_width is not None and self._line_width() == self._bare_width:
                reporter.rewrite(line, erase=True)  # the line held the item's prefix alone: replaced
            else:
                reporter.ensure_newline()
                reporter.write(line)
            reporter.currentfspath = None  # what pytest writes next begins on a new line
            self._bare_width = None
            if reporter.showlongtestinfo or reporter.showfspath:
                nodeid, location = self._current  # type: ignore[misc]
                reporter.pytest_runtest_logstart(nodeid=nodeid, location=location)
                self._bare_width = self._line_width()
            else:  # -q: pytest writes no prefix, its characters follow a line of their own
                reporter.write("\n")
            reporter.flush()


def start(config: pytest.Config, run: Any, *, xdist: bool) -> ProgressPrinter | None:
    """The printer for ``run`` (run/evaluation.py's EvaluationRun), registered as a plugin,
    or None when nothing is to be printed (``off``, ``-qq`` without the option, no terminal
    reporter, no episode planned)."""
    planned_keys, settings = run.planned_keys, run.settings
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    choice = settings.progress
    if reporter is None or choice == "off" or not planned_keys or config.option.collectonly:
        return None
    if choice is None and config.get_verbosity() <= -2:
        return None
    tty = bool(reporter.isatty())
    mode = "each" if choice == "each" else "interval"
    interval = choice if isinstance(choice, float) else (TERMINAL_INTERVAL_S if tty else LOG_INTERVAL_S)
    workers = getattr(config.option, "numprocesses", None) if xdist else None
    workers = workers if isinstance(workers, int) and workers > 0 else 1
    concurrency = None if settings.queue is not None else settings.concurrency * workers
    planned = Counter(sorted(key[0] for key in planned_keys))  # environments by name, as the summary table
    printer = ProgressPrinter(config, reporter, Progress(planned, concurrency), mode=mode, interval_s=interval,
                              heartbeat=tty and mode == "interval" and not xdist,
                              stopped=lambda: list(run.stopper.stops) if run.stopper is not None else (),
                              notices=lambda: _drain(run.resources.outage_lines))
    config.pluginmanager.register(printer, "agentgym-progress")
    return printer


def _drain(lines: Any) -> list[str]:
    """What ``lines`` (a deque another thread appends to) holds now, taken out of it."""
    taken = []
    while lines:
        taken.append(lines.popleft())
    return taken


# -- -v: each item's figures -----------------------------------------------------------------------


def figures(record: Any) -> tuple[float | None, int, float]:
    """What ``-v`` shows of an episode, kept on its report once the record is let go:
    (reward, rounds, duration in seconds)."""
    return (record.reward, record.rounds, record.duration_s)


def with_figures(word: str, shown: Sequence[Any] | None, kept: bool = False) -> str:
    """``PASSED (reward 1.00, 7 rounds, 2.3 s)``: the verbose word with the episode's figures
    (a list after an xdist worker's report crossed over as JSON)."""
    if not shown:
        return word
    reward, rounds, duration = shown
    parts = ["no reward" if reward is None else f"reward {reward:.2f}",
             f"{rounds} round{'' if rounds == 1 else 's'}", f"{duration:.1f} s"]
    if kept:
        parts.append("kept")
    return f"{word} ({', '.join(parts)})"

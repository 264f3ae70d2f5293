"""The run as pytest sees it: one session object whose methods are the hooks.

:class:`ControllerSession` is registered in the process that owns the servers,
the endpoint and the reporting (a plain pytest process, or pytest-xdist's
controller); :class:`WorkerSession` in each xdist worker, which plays the
episodes of the items it is given. Both hand the work to the run core
(:class:`~pytest_agentgym.run.evaluation.EvaluationRun`), in phases:

1. configure (plugin/__init__.py): settings, the run directory, servers spawned ahead;
2. start (``pytest_sessionstart``): the model endpoint is chosen (a reference agent
   or vLLM launched, health probes); the header only reports it;
3. plan, once, after collection (``pytest_collection_modifyitems``, after ``-k``,
   ``-m`` and ``--deselect``; before a shard's split): what the suites ask of each
   environment;
4. run (``pytest_runtestloop``): servers, run.json, the episodes queued ahead;
5. finish: gates reported as test results, run.json, events, the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentgym.config import suites
from pytest_agentgym.plugin import items as episode_items
from pytest_agentgym.plugin.stash import NODE_SKIPPED_KEY, SETTINGS_KEY, SUITE_ERRORS_KEY
from pytest_agentgym.results.gates import NOT_JUDGED

#: The exit status of a run that could not play (some of) its episodes: no model endpoint,
#: or an environment whose server cannot be had. Not 1, which CI reads as "the model failed".
NOT_PLAYED_EXIT = 3

_RECORD_ATTR = "agentgym_record"
_KEPT_ATTR = "agentgym_kept"
_OUTCOME_ATTR = "agentgym_outcome"
_FIGURES_ATTR = "agentgym_figures"  # progress: (reward, rounds, duration_s), what -v shows


def _episodes(items: list[pytest.Item]) -> list[episode_items.EpisodeItem]:
    return [i for i in items if isinstance(i, episode_items.EpisodeItem)]


def as_usage_error(function, *args):  # type: ignore[no-untyped-def]
    """``function(*args)`` with a :class:`LedgerError` made a usage error (exit 4), except a resume
    that no model endpoint can play now: infrastructure, exit 3 as a run with none."""
    from pytest_agentgym.results.ledger import LedgerError, ResumeNotPlayable

    try:
        return function(*args)
    except ResumeNotPlayable as exc:
        pytest.exit(f"agentgym: NOT PLAYED: {exc}", returncode=NOT_PLAYED_EXIT)
    except LedgerError as exc:
        raise pytest.UsageError(str(exc)) from None


class _Session:
    """What both sides do: collect suite files, plan, attach records to reports."""

    def __init__(self, config: pytest.Config, run: Any) -> None:
        self.config = config
        self.run = run

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        return episode_items.collect_suite(file_path, parent)

    @pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: a shard splits what they left
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        episodes = _episodes(items)
        errors = config.stash[SUITE_ERRORS_KEY]
        errors.extend(suites.duplicate_episodes(episodes))
        errors.extend(suites.out_of_range(episodes, config.stash[SETTINGS_KEY]))
        if errors:
            return
        self.run.plan(episodes)
        settings = config.stash[SETTINGS_KEY]
        if settings.shard is not None:
            self._take_shard(items)
        if settings.stop_when_decided:
            self._play_in_seeded_order(items, settings)

    @staticmethod
    def _play_in_seeded_order(items: list[pytest.Item], settings: Any) -> None:
        """--agentgym-stop-when-decided: each environment's tasks in their seeded order
        (--agentgym-seed, else 0: a rerun plays the same order), so any prefix is a
        random sample of them."""
        from pytest_agentgym.run.stopping import seeded_order

        seed = settings.seed if settings.seed is not None else 0
        items[:] = seeded_order(items, lambda i: i.key if isinstance(i, episode_items.EpisodeItem) else None, seed)

    def _take_shard(self, items: list[pytest.Item]) -> None:
        """Keep this shard's slice of ``items``; the rest are deselected (pytest's summary counts them)."""
        from pytest_agentgym.run import shards

        run = self.run
        kept, dropped, run.selection = shards.select(
            items, self.config.stash[SETTINGS_KEY].shard,
            lambda item: run.plans[item.suite.environment].max_rounds
            if isinstance(item, episode_items.EpisodeItem) else None)
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        errors = session.config.stash[SUITE_ERRORS_KEY]
        if errors:
            raise pytest.UsageError("\n".join(errors))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session):  # type: ignore[no-untyped-def]
        """Before the items: start what the episodes need and let the engine run ahead;
        after them, what this side does at the end (:meth:`_after_items`)."""
        if self.config.option.collectonly:
            return (yield)
        items = _episodes(session.items)
        if items:
            as_usage_error(self.run.prepare, items)
        self._before_items()
        result = yield
        self._after_items(session)
        return result

    def _before_items(self) -> None:
        """What this side does once the run has started, before the first item."""

    def _after_items(self, session: pytest.Session) -> None:
        """What this side does after the last item."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
        report = yield
        record = getattr(item, "record", None)
        if isinstance(item, episode_items.EpisodeItem):
            _episode_duration(report, record)
        if record is not None and not getattr(item, "_agentgym_reported", False):
            if report.when == "call" or (report.when == "setup" and report.failed):
                setattr(report, _RECORD_ATTR, record.to_dict())
                setattr(report, _KEPT_ATTR, bool(getattr(item, "kept", False)))
                setattr(report, _OUTCOME_ATTR, record.outcome)
                from pytest_agentgym.plugin.progress import figures  # progress: for -v

                setattr(report, _FIGURES_ATTR, figures(record))
                item._agentgym_reported = True  # type: ignore[attr-defined]
                item.record = None  # type: ignore[attr-defined]  (on disk and on its way in the report)
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport):  # type: ignore[no-untyped-def]
        """Once every plugin has seen the report (the controller has written and published
        its record, an xdist worker has sent it), the report keeps only the outcome:
        pytest's terminal reporter holds every report to the end of the session, and a
        trajectory in each would grow the process with every episode."""
        self._record_reported(report)
        result = yield
        if getattr(report, _RECORD_ATTR, None) is not None:
            delattr(report, _RECORD_ATTR)
        return result

    def _record_reported(self, report: pytest.TestReport) -> None:
        """What this side does with a report that carries an episode's record."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):  # type: ignore[no-untyped-def]
        outcome = getattr(report, _OUTCOME_ATTR, None)
        if outcome is None:  # a report from an xdist worker: its record is still attached
            outcome = (getattr(report, _RECORD_ATTR, None) or {}).get("outcome")
        shown = getattr(report, _FIGURES_ATTR, None) if config.get_verbosity() > 0 else None  # progress: -v
        if shown is not None:
            from pytest_agentgym.plugin.progress import with_figures

            kept = bool(getattr(report, _KEPT_ATTR, False))
            if outcome == "unsolved" and report.skipped:
                return "unsolved", "u", (with_figures("UNSOLVED", shown, kept), {"yellow": True})
            if report.when == "call" and report.passed:
                return "passed", ".", (with_figures("PASSED", shown, kept), {"green": True})
            if report.when == "call" and report.failed:
                return "failed", "F", (with_figures("FAILED", shown, kept), {"red": True})
        if outcome == "unsolved" and report.skipped:
            return "unsolved", "u", ("UNSOLVED", {"yellow": True})
        return None


class WorkerSession(_Session):
    """An xdist worker: plays the episodes of its items, reading ahead of the one running."""

    def __init__(self, config: pytest.Config, run: Any) -> None:
        super().__init__(config, run)
        self._reader = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """The episodes queued for this worker go to its engine (plugin/readahead.py)."""
        if not isinstance(item, episode_items.EpisodeItem):
            return
        if self._reader is None:
            from pytest_agentgym.plugin.readahead import WorkerReadAhead

            self._reader = WorkerReadAhead(item.config, self.run.read_ahead, self.run.withdraw,
                                           lambda i: isinstance(i, episode_items.EpisodeItem))
        self._reader.before(item, item.session)


class ControllerSession(_Session):
    """The process that owns the servers and the endpoint, publishes each finished
    episode once and judges the run at the end."""

    def __init__(self, config: pytest.Config, run: Any, *, xdist: bool) -> None:
        super().__init__(config, run)
        self.xdist = xdist

    # -- start ------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The start phase, before the header is printed: the endpoint is chosen here
        (under xdist the servers are started too, before the workers start)."""
        if self.xdist and self.config.stash[SETTINGS_KEY].stop_when_decided:
            raise pytest.UsageError(
                "--agentgym-stop-when-decided and pytest-xdist (-n) do not go together: deciding an "
                "environment early needs every one of its episodes in one process; drop -n or "
                "--agentgym-stop-when-decided")
        if self.config.option.collectonly:
            return
        if self.xdist:
            from pytest_agentgym.plugin.selection import selection

            as_usage_error(self.run.start_for_paths, self.config.args, selection(self.config))
        else:
            self.run.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        """Ctrl-C (or SIGTERM): the run is interrupted from now on, whatever happens next
        (a second Ctrl-C may cut pytest's own handling short before the run is judged)."""
        if isinstance(excinfo.value, KeyboardInterrupt):
            self.run.interrupt(str(excinfo.value) or "Ctrl-C")

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        from pytest_agentgym.run.terminal import header_lines

        return header_lines(self.run, not config.option.collectonly and self.run.has_suites)

    #: woken from dormancy during collection (plugin/dormancy.py): the header follows it
    late_header = False

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        lines = self.pytest_report_header(config) if self.late_header else []
        skipped = config.stash.get(NODE_SKIPPED_KEY, {})
        if skipped:
            settings = config.stash[SETTINGS_KEY]
            names = ", ".join(f"{env} ({n} episode(s))" for env, n in skipped.items())
            lines.append(f"agentgym: node {settings.node} skips {names}: not collected. Run them on a node "
                         f"that serves them (--agentgym-node=NAME), or give their servers' URLs in a node "
                         f"profile (envs.overrides.<Name>.url) and take them off its envs.skip list")
        from pytest_agentgym.plugin.lastfailed import rerun_lines
        from pytest_agentgym.run.terminal import sampling_lines, stop_header_lines

        if not self.xdist:  # under xdist the workers collect: this side has no items
            lines.extend(rerun_lines(config, items))
        lines.extend(sampling_lines(self.run))
        lines.extend(stop_header_lines(self.run))
        return lines

    # -- pytest-xdist ---------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # type: ignore[no-untyped-def]
        node.workerinput.update(self.run.worker_input())

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):  # type: ignore[no-untyped-def]
        """A run of episodes hands each worker its whole share at once (readahead.py)."""
        from pytest_agentgym.plugin.readahead import TAKEN_OVER, make_scheduler

        if getattr(config.option, "dist", None) in TAKEN_OVER and self.run.plans:
            return make_scheduler(config, log)
        return None

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:  # type: ignore[no-untyped-def]
        """pytest-xdist: a worker died while running ``crashitem``. Its episode gets an
        error record (harness:WorkerCrashed) in episodes.jsonl and NATS, and the item
        is reported as an error with a readable message."""
        record = self.run.record_crash(crashitem, str(report.longrepr))
        if record is not None:
            report.when = "setup"  # an error, not a policy failure
            report.longrepr = episode_items.infra_message(record, self.run.run_dir.logs)
            setattr(report, _RECORD_ATTR, record.to_dict())

    # -- the run ------------------------------------------------------------------------------

    def _before_items(self) -> None:
        _show_notices(self.config, self.run.start_notices)
        from pytest_agentgym.plugin import progress  # progress: lines of the run's progress

        self._progress = progress.start(self.config, self.run, xdist=self.xdist)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            from pytest_agentgym.run.terminal import not_played_lines

            for line, markup in not_played_lines(self.run):
                reporter.write_line(line, **markup)
        self._show_stops()

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self._show_stops()

    def _show_stops(self) -> None:
        """Each environment that stopped early, once, as it happens."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        from pytest_agentgym.run.terminal import stop_line

        for stop in self.run.new_stops():
            if reporter is not None:
                line, markup = stop_line(stop)
                reporter.write_line(line, **markup)

    def _after_items(self, session: pytest.Session) -> None:
        """Aggregate gates, reported as test results of their own (so the terminal
        counts, --junitxml and the exit status include them)."""
        self.run.finish(session.exitstatus or 0)
        self._report_gates(session)

    def _report_gates(self, session: pytest.Session) -> None:
        """Each gate verdict as a test result (once: also for a run stopped before the
        end of its loop, whose gates are NOT JUDGED)."""
        if getattr(self, "_gates_reported", False):
            return
        self._gates_reported = True
        session.testscollected += len(self.run.verdicts)
        for verdict in self.run.verdicts:
            self.config.hook.pytest_runtest_logreport(report=_gate_report(verdict, self.run))

    def _record_reported(self, report: pytest.TestReport) -> None:
        data = getattr(report, _RECORD_ATTR, None)
        if data is not None:
            self.run.episode_reported(data, kept=bool(getattr(report, _KEPT_ATTR, False)))
            if getattr(self, "_progress", None) is not None:  # progress
                self._progress.episode(data, kept=bool(getattr(report, _KEPT_ATTR, False)))

    # -- the end --------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):  # type: ignore[no-untyped-def]
        """Outermost. First: a run that did not reach the end of its loop (Ctrl-C, SIGTERM,
        -x, a crash) still gets its run.json, events and report (finish() is a no-op when
        done already). Last: after pytest's own summary line, say how the run ended."""
        self.run.finish(exitstatus, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        if self.run.finished:
            self._report_gates(session)
        if self.run.blocked() and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = NOT_PLAYED_EXIT  # infrastructure: not a verdict on the model
        if self.run.internal_error and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # a bug: not a verdict on the model
        result = yield
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            from pytest_agentgym.run.terminal import status_line

            line = status_line(self.run)
            if line is not None:
                reporter.write_line(line[0], **line[1])
        return result

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
        from pytest_agentgym.run.terminal import summary_lines

        for line, markup in summary_lines(self.run) if self.run.finished else ():
            terminalreporter.write_line(line, **markup)


def _show_notices(config: pytest.Config, start_notices: list) -> None:
    """Advisory notices once per machine (or with -v); the rest every time. Every
    notice is in run.json's notes either way."""
    from pytest_agentgym.publish import notices

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    for notice in notices.to_show(start_notices, verbose=config.get_verbosity() > 0):
        reporter.write_line(f"agentgym: {notice.text}", yellow=True)


def _episode_duration(report: pytest.TestReport, record: Any) -> None:
    """An episode item's time is its episode's: the call phase (or the setup of an
    episode that erred) carries ``duration_s``; the setup that waited for it and the
    teardown take 0. Without this, pytest times each phase by the wall clock, and with
    episodes played ahead of their items (or by xdist workers in batches) the waiting
    lands on whichever item comes first: junit's ``time`` and ``--durations`` would not
    be the episodes'. An item skipped in its setup (not played, stopped early) keeps its
    own time; an unsolved one (an xfail of the call phase) has its episode's."""
    if report.when == "call" or (report.when == "setup" and report.failed):
        if record is not None:
            report.duration = float(record.duration_s or 0.0)
    elif report.when == "teardown" or not report.skipped:
        report.duration = 0.0


def _gate_report(verdict, run) -> pytest.TestReport:  # type: ignore[no-untyped-def]
    plan = run.plans.get(verdict.env)
    path = plan.gate_path if plan else "agentgym"
    name = f"{verdict.env}::gate[{verdict.gate}]"
    longrepr: Any = None if verdict.passed else f"gate {verdict.outcome}: {verdict.env} {verdict.gate}: {verdict.detail}"
    outcome = "passed" if verdict.passed else "failed"
    if verdict.outcome == NOT_JUDGED:  # a partial run: the gate is skipped, with how far the run got
        outcome, longrepr = "skipped", (path, 0, f"NOT JUDGED: {verdict.detail}")
    return pytest.TestReport(
        nodeid=f"{path}::{name}",
        location=(path, None, name),
        keywords={"agentgym": 1},
        outcome=outcome,
        longrepr=longrepr,
        when="setup" if verdict.outcome in ("error", NOT_JUDGED) else "call",
        user_properties=[("value", verdict.value), ("gate", verdict.gate), ("outcome", verdict.outcome)],
    )

"""pytest entry point (pytest11 -> pytest_agentgym.plugin). Wiring only: the
work lives in config (settings, suites), plugin/items.py (the pytest nodes) and
run (EvaluationRun)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from pytest_agentgym.config import suites
from pytest_agentgym.plugin import items as episode_items

from pytest_agentgym.plugin import options
from pytest_agentgym.plugin.fixtures import agentgym_episode, agentgym_run  # noqa: F401  (registered here)
from pytest_agentgym.plugin.options import resolve_settings
from pytest_agentgym.plugin.stash import HARNESS_KEY, NODE_SKIPPED_KEY, SETTINGS_KEY, SUITE_ERRORS_KEY

_RECORD_ATTR = "agentgym_record"
_KEPT_ATTR = "agentgym_kept"
_OUTCOME_ATTR = "agentgym_outcome"
_SIGTERM_KEY = pytest.StashKey[object]()
_READ_AHEAD_KEY = pytest.StashKey[object]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_agentgym.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    options.hint_habitual_flags(parser, args)  # before pytest rejects e.g. --dry-run


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_controller(config: pytest.Config) -> bool:
    """True in the process that owns servers and reporting (no xdist, or xdist's controller)."""
    return not _is_worker(config)


def _uses_xdist(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not _is_worker(config)


def _looks_only(config: pytest.Config) -> bool:
    """--agentgym-preflight (--agentgym-dry-run) or --agentgym-list-envs, given on the
    command line, as AGENTGYM_* variables or ini keys."""
    from pytest_agentgym.plugin.options import flag

    return flag(config, "list_envs") or flag(config, "preflight")


def _runs_episodes(config: pytest.Config) -> bool:
    return not (config.option.collectonly or _looks_only(config))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """--agentgym-list-envs and --agentgym-preflight answer and end the run."""
    if not _looks_only(config):
        return None
    from pytest_agentgym.plugin.preflight import list_envs, preflight

    config._do_configure()  # resolve settings through the normal path
    try:
        settings = config.stash[SETTINGS_KEY]
        return list_envs(settings) if settings.list_envs else preflight(settings, list(config.args))
    finally:
        config._ensure_unconfigure()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "agentgym: an AgentGym episode")
    config.addinivalue_line("markers", "verifiers: episodes of verifiers environments (environment: verifiers:<module>)")
    settings = resolve_settings(config)
    if _is_worker(config):
        settings = settings.__class__(**{**settings.__dict__, "run_id": config.workerinput["agentgym_run_id"]})
    for name in settings.env_specs:
        config.addinivalue_line("markers", f"{name.lower()}: episodes of {name}")
    if settings.queue is not None and (_uses_xdist(config) or _is_worker(config)):
        raise pytest.UsageError("--agentgym-queue and pytest-xdist (-n) do not go together: the queue's "
                                "workers are the parallelism; leave out -n")
    config.stash[SETTINGS_KEY] = settings
    config.stash[SUITE_ERRORS_KEY] = []
    config.stash[NODE_SKIPPED_KEY] = {}
    from pytest_agentgym.results.ledger import LedgerError, RunLedger
    from pytest_agentgym.run.evaluation import EvaluationRun

    worker_input = config.workerinput if _is_worker(config) else None
    ledger = None
    if worker_input is None and _runs_episodes(config):
        from pytest_agentgym.results.store import check_writable

        unwritable = check_writable(Path(settings.reports).resolve())
        if unwritable is not None:
            raise pytest.UsageError(f"--agentgym-reports: {unwritable}")
        root, name = Path(settings.reports).resolve(), settings.run_id
        if settings.shard is not None:  # reports/<run_id>/shard-I-of-N
            root, name = root / settings.run_id, settings.shard.dirname
        try:
            ledger = (RunLedger.resume(settings.resume) if settings.resume is not None
                      else RunLedger.new(root, name))
        except LedgerError as exc:
            raise pytest.UsageError(str(exc)) from None
    harness = EvaluationRun(settings, hook=config.hook, config=config, worker_input=worker_input, ledger=ledger)
    config.stash[HARNESS_KEY] = harness  # from here on, unconfigure stops what the run started
    if _is_controller(config):
        config.pluginmanager.register(_Controller(harness), "agentgym-controller")
        _stop_on_sigterm(config)
    warm = _is_controller(config) and _runs_episodes(config)
    if warm:
        harness.warm_up()  # first, so the servers boot while the rest is imported and collected
    if worker_input is None:
        from pytest_agentgym.model.endpoint_settings import EndpointConfigError

        try:
            harness.model_settings()  # a bad model: section is a usage error, found now
        except EndpointConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    if warm:
        harness.launch_endpoint_ahead()


def _stop_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM ends the run like Ctrl-C: pytest unwinds, the run is written as
    ``interrupted`` with its end time, servers are stopped."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    config.stash[_SIGTERM_KEY] = signal.signal(signal.SIGTERM, interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    previous = config.stash.get(_SIGTERM_KEY, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]
    harness = config.stash.get(HARNESS_KEY, None)
    if harness is not None:
        harness.shutdown()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if suites.is_suite_file(file_path):
        return episode_items.SuiteFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: a shard splits what they left
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    episodes = [i for i in items if isinstance(i, episode_items.EpisodeItem)]
    errors = config.stash[SUITE_ERRORS_KEY]
    errors.extend(suites.duplicate_episodes(episodes))
    errors.extend(suites.out_of_range(episodes, config.stash[SETTINGS_KEY]))
    if config.stash[SETTINGS_KEY].shard is not None and not errors:
        _take_shard(config, items)


def _take_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this shard's slice of ``items``; the rest are deselected (pytest's summary counts them)."""
    from pytest_agentgym.run import shards

    harness = config.stash[HARNESS_KEY]
    for item in items:  # every environment of the selection, so the shard records all the plans
        if isinstance(item, episode_items.EpisodeItem):
            harness.plan_suite(item.suite, item.nodeid.split("::")[0])
    kept, dropped, harness.selection = shards.select(
        items, config.stash[SETTINGS_KEY].shard,
        lambda item: harness.plans[item.suite.environment].max_rounds
        if isinstance(item, episode_items.EpisodeItem) else None)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    errors = session.config.stash[SUITE_ERRORS_KEY]
    if errors:
        raise pytest.UsageError("\n".join(errors))
    if _is_controller(session.config):
        harness = session.config.stash[HARNESS_KEY]
        for item in session.items:
            if isinstance(item, episode_items.EpisodeItem):
                harness.plan_suite(item.suite, item.nodeid.split("::")[0])


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    lines = []
    skipped = config.stash.get(NODE_SKIPPED_KEY, {})
    if skipped:
        settings = config.stash[SETTINGS_KEY]
        names = ", ".join(f"{env} ({n} episode(s))" for env, n in skipped.items())
        lines.append(f"agentgym: node {settings.node} skips {names}: not collected. Run them on a node "
                     f"that serves them (--agentgym-node=NAME), or give their servers' URLs in a node "
                     f"profile (envs.overrides.<Name>.url) and take them off its envs.skip list")
    if _is_controller(config):
        harness = config.stash[HARNESS_KEY]
        for item in items:
            if isinstance(item, episode_items.EpisodeItem):
                harness.plan_suite(item.suite, item.nodeid.split("::")[0])
        lines.extend(harness.sampling_lines())
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    harness = config.stash[HARNESS_KEY]
    return harness.header_lines(probe=not config.option.collectonly)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if _uses_xdist(config) and not config.option.collectonly:
        # The controller owns the servers; workers get their addresses.
        _as_usage_error(config.stash[HARNESS_KEY].start_for_paths, config.args)


def _as_usage_error(function, *args):  # type: ignore[no-untyped-def]
    from pytest_agentgym.results.ledger import LedgerError

    try:
        return function(*args)
    except LedgerError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]  (pytest-xdist hook)
    harness = node.config.stash[HARNESS_KEY]
    node.workerinput.update(harness.worker_input())


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]  (pytest-xdist hook)
    """A run of episodes hands each worker its whole share at once (readahead.py)."""
    from pytest_agentgym.plugin.readahead import TAKEN_OVER, make_scheduler

    harness = config.stash.get(HARNESS_KEY, None)
    if getattr(config.option, "dist", None) in TAKEN_OVER and harness is not None and harness.plans:
        return make_scheduler(config, log)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """An xdist worker reads ahead: the episodes queued for it go to its engine."""
    if not _is_worker(item.config) or not isinstance(item, episode_items.EpisodeItem):
        return
    reader = item.config.stash.get(_READ_AHEAD_KEY, None)
    if reader is None:
        from pytest_agentgym.plugin.readahead import WorkerReadAhead

        harness = item.config.stash[HARNESS_KEY]
        reader = WorkerReadAhead(item.config, harness.read_ahead, harness.withdraw,
                                 lambda i: isinstance(i, episode_items.EpisodeItem))
        item.config.stash[_READ_AHEAD_KEY] = reader
    reader.before(item, item.session)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session: pytest.Session):  # type: ignore[no-untyped-def]
    """Before the items: start what the episodes need and let the engine run ahead.
    After them: aggregate gates, reported as test results of their own (so the
    terminal counts, --junitxml and the exit status include them)."""
    config = session.config
    if config.option.collectonly:
        return (yield)
    harness = config.stash[HARNESS_KEY]
    items = [i for i in session.items if isinstance(i, episode_items.EpisodeItem)]
    if items:
        _as_usage_error(harness.prepare, items)
    if _is_controller(config):
        _show_notices(config, harness.start_notices)
    result = yield
    if _is_controller(config):
        harness.finish(session.exitstatus or 0)
        session.testscollected += len(harness.verdicts)
        for verdict in harness.verdicts:
            config.hook.pytest_runtest_logreport(report=_gate_report(verdict, harness))
    return result


def _show_notices(config: pytest.Config, start_notices: list) -> None:
    """Advisory notices once per machine (or with -v); the rest every time. Every
    notice is in run.json's notes either way."""
    from pytest_agentgym.publish import notices

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    for notice in notices.to_show(start_notices, verbose=config.get_verbosity() > 0):
        reporter.write_line(f"agentgym: {notice.text}", yellow=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    report = yield
    record = getattr(item, "record", None)
    if record is not None and not getattr(item, "_agentgym_reported", False):
        if report.when == "call" or (report.when == "setup" and report.failed):
            setattr(report, _RECORD_ATTR, record.to_dict())
            setattr(report, _KEPT_ATTR, bool(getattr(item, "kept", False)))
            setattr(report, _OUTCOME_ATTR, record.outcome)
            item._agentgym_reported = True  # type: ignore[attr-defined]
            item.record = None  # type: ignore[attr-defined]  (on disk and on its way in the report)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport):  # type: ignore[no-untyped-def]
    """Once every plugin has seen the report (the controller has written and published
    its record, an xdist worker has sent it), the report keeps only the outcome:
    pytest's terminal reporter holds every report to the end of the session, and a
    trajectory in each would grow the process with every episode."""
    result = yield
    if getattr(report, _RECORD_ATTR, None) is not None:
        delattr(report, _RECORD_ATTR)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):  # type: ignore[no-untyped-def]
    outcome = getattr(report, _OUTCOME_ATTR, None)
    if outcome is None:  # a report from an xdist worker: its record is still attached
        outcome = (getattr(report, _RECORD_ATTR, None) or {}).get("outcome")
    if outcome == "unsolved" and report.skipped:
        return "unsolved", "u", ("UNSOLVED", {"yellow": True})
    return None


class _Controller:
    """Registered in the controller only (or the single process without xdist), so
    each finished episode is published and counted exactly once."""

    def __init__(self, harness) -> None:  # type: ignore[no-untyped-def]
        self.harness = harness

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, _RECORD_ATTR, None)
        if data is not None:
            self.harness.episode_reported(data, kept=bool(getattr(report, _KEPT_ATTR, False)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:  # type: ignore[no-untyped-def]
        """pytest-xdist: a worker died while running ``crashitem``. Its episode gets an
        error record (harness:WorkerCrashed) in episodes.jsonl and NATS, and the item
        is reported as an error with a readable message."""
        record = self.harness.record_crash(crashitem, str(report.longrepr))
        if record is not None:
            report.when = "setup"  # an error, not a policy failure
            report.longrepr = episode_items.infra_message(record, self.harness.run_dir.logs)
            setattr(report, _RECORD_ATTR, record.to_dict())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session):  # type: ignore[no-untyped-def]
        """Outermost: after pytest's own summary line, say how the run ended."""
        result = yield
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            from pytest_agentgym.run.terminal import status_line

            line = status_line(self.harness)
            if line is not None:
                reporter.write_line(line[0], **line[1])
        return result


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that did not reach the end of its loop (Ctrl-C, SIGTERM, -x, a crash)
    still gets its run.json, events and report; finish() is a no-op when done already."""
    config = session.config
    if _is_controller(config):
        config.stash[HARNESS_KEY].finish(exitstatus, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


def _gate_report(verdict, harness) -> pytest.TestReport:  # type: ignore[no-untyped-def]
    plan = harness.plans.get(verdict.env)
    path = plan.gate_path if plan else "agentgym"
    name = f"{verdict.env}::gate[{verdict.gate}]"
    longrepr = None if verdict.passed else f"gate {verdict.outcome}: {verdict.env} {verdict.gate}: {verdict.detail}"
    return pytest.TestReport(
        nodeid=f"{path}::{name}",
        location=(path, None, name),
        keywords={"agentgym": 1},
        outcome="passed" if verdict.passed else "failed",
        longrepr=longrepr,
        when="setup" if verdict.outcome == "error" else "call",
        user_properties=[("value", verdict.value), ("gate", verdict.gate), ("outcome", verdict.outcome)],
    )


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    if not _is_controller(config):
        return
    harness = config.stash.get(HARNESS_KEY, None)
    if harness is not None:
        for line, markup in harness.summary_lines():
            terminalreporter.write_line(line, **markup)

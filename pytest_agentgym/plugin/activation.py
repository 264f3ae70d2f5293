"""Making the run of an evaluating session: settings, the run directory, the session
object whose methods are the hooks, and the servers spawned ahead. Called from
``pytest_configure`` (plugin/__init__.py), or later by a dormant session that its
collection wakes (plugin/dormancy.py)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from pytest_agentgym.plugin.options import resolve_settings
from pytest_agentgym.plugin.stash import RUN_KEY, NODE_SKIPPED_KEY, SETTINGS_KEY, SUITE_ERRORS_KEY

_SIGTERM_KEY = pytest.StashKey[object]()


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """True in the process that owns servers and reporting (no xdist, or xdist's controller)."""
    return not is_worker(config)


def uses_xdist(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not is_worker(config)


def looks_only(config: pytest.Config) -> bool:
    """--agentgym-preflight (--agentgym-dry-run) or --agentgym-list-envs, given on the
    command line, as AGENTGYM_* variables or ini keys."""
    from pytest_agentgym.plugin.options import flag

    return flag(config, "list_envs") or flag(config, "preflight")


def runs_episodes(config: pytest.Config) -> bool:
    return not (config.option.collectonly or looks_only(config))


def activate(config: pytest.Config) -> None:
    """Make the run: settings, the run directory, the session object whose methods are
    the hooks, and the servers of the suites named on the command line spawned ahead."""
    from pytest_agentgym.plugin.logger_registry import guard_logger_registry

    guard_logger_registry()  # before any thread of the run: pytest walks the loggers at every hook
    add_batteries(config)
    settings = resolve_settings(config)
    if is_worker(config):
        settings = settings.__class__(**{**settings.__dict__, "run_id": config.workerinput["agentgym_run_id"]})
    for name in settings.env_specs:
        config.addinivalue_line("markers", f"{name.lower()}: episodes of {name}")
    if settings.queue is not None and (uses_xdist(config) or is_worker(config)):
        raise pytest.UsageError("--agentgym-queue and pytest-xdist (-n) do not go together: the queue's "
                                "workers are the parallelism; leave out -n")
    config.stash[SETTINGS_KEY] = settings
    config.stash[SUITE_ERRORS_KEY] = []
    config.stash[NODE_SKIPPED_KEY] = {}
    from pytest_agentgym.results.ledger import LedgerError, RunLedger
    from pytest_agentgym.run.evaluation import EvaluationRun

    worker_input = config.workerinput if is_worker(config) else None
    ledger, made = None, []
    if worker_input is None and runs_episodes(config):
        from pytest_agentgym.plugin.empty_run import missing_dirs
        from pytest_agentgym.results.store import check_writable

        unwritable = check_writable(Path(settings.reports).resolve())
        if unwritable is not None:
            raise pytest.UsageError(f"--agentgym-reports: {unwritable}")
        root, name = Path(settings.reports).resolve(), settings.run_id
        if settings.shard is not None:  # reports/<run_id>/shard-I-of-N
            root, name = root / settings.run_id, settings.shard.dirname
        made = missing_dirs(root / name)
        try:
            ledger = (RunLedger.resume(settings.resume) if settings.resume is not None
                      else RunLedger.new(root, name))
        except LedgerError as exc:
            raise pytest.UsageError(str(exc)) from None
    run = EvaluationRun(settings, hook=config.hook, config=config, worker_input=worker_input, ledger=ledger)
    config.stash[RUN_KEY] = run  # from here on, unconfigure stops what the run started
    from pytest_agentgym.plugin.session import ControllerSession, WorkerSession

    if is_controller(config):
        if uses_xdist(config) and isinstance(config.option.numprocesses, int):
            run.resources.processes = config.option.numprocesses  # replicas: auto follows them all
        config.pluginmanager.register(ControllerSession(config, run, xdist=uses_xdist(config)),
                                      "agentgym-session")
        from pytest_agentgym.plugin.ahead import AheadReports  # a stopped run's records ahead of their items
        from pytest_agentgym.plugin.empty_run import EmptyRun

        config.pluginmanager.register(AheadReports(run), "agentgym-ahead")
        config.pluginmanager.register(EmptyRun(config, made), "agentgym-empty-run")
        _stop_on_sigterm(config)
    else:
        config.pluginmanager.register(WorkerSession(config, run), "agentgym-session")
    from pytest_agentgym.model.endpoint_settings import EndpointConfigError

    try:  # the servers of the suites named on the command line boot while the rest is
        # imported and collected; a bad model: section is a usage error, found now
        if is_controller(config) and runs_episodes(config):
            from pytest_agentgym.plugin.selection import selection

            run.warm_up(selection(config))
        elif worker_input is None:
            run.model_settings()
    except EndpointConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def add_batteries(config: pytest.Config) -> None:
    """--agentgym-battery: the packaged folders of suite files join the command line's
    paths; with no path given (pytest's testpaths or the current directory), they are
    the paths."""
    from pytest_agentgym.config.options import BY_NAME
    from pytest_agentgym.config.suite_files import packaged_battery
    from pytest_agentgym.plugin.options import given

    found = given(config, BY_NAME["battery"])
    if found is None:
        return
    value, where = found
    try:
        folders = packaged_battery(value)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(f) for f in folders]
        return
    given_paths = [(config.invocation_params.dir / str(a).split("::")[0]).resolve() for a in config.args]
    # a folder the command line reaches already (suites/lightweight in a clone) is not collected twice
    config.args.extend(str(f) for f in folders if not any(f.is_relative_to(p) for p in given_paths))


def _stop_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM ends the run like Ctrl-C: pytest unwinds, the run is written as
    ``interrupted`` with its end time, servers are stopped."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):  # type: ignore[no-untyped-def]
        run = config.stash.get(RUN_KEY, None)
        if run is not None:
            run.interrupt(f"signal {signal.Signals(signum).name}")
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    config.stash[_SIGTERM_KEY] = signal.signal(signal.SIGTERM, interrupt)


def restore_sigterm(config: pytest.Config) -> None:
    previous = config.stash.get(_SIGTERM_KEY, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]

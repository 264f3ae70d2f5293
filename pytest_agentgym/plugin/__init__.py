"""pytest entry point (pytest11 -> pytest_agentgym.plugin). Wiring only.

The hooks that run before a run exists are here (options, hook specs, the
preflight answer); ``pytest_configure`` makes the run (plugin/activation.py: run/evaluation.py
``EvaluationRun``, and the session object whose methods are every other hook,
plugin/session.py: the controller's, or an xdist worker's), unless the session does not
evaluate (plugin/dormancy.py: the plugin then stays silent until its collection says
otherwise). The work lives in config/ (settings, suites), plugin/items.py (the pytest
nodes) and run/. Loaded in every pytest session of its environment: it imports little."""

from __future__ import annotations

import pytest

from pytest_agentgym.plugin import dormancy, options
from pytest_agentgym.plugin.activation import activate, is_worker, looks_only, restore_sigterm
from pytest_agentgym.plugin.dormancy import DormantSession
from pytest_agentgym.plugin.fixtures import agentgym_episode, agentgym_run  # noqa: F401  (registered here)
from pytest_agentgym.plugin.stash import RUN_KEY, SETTINGS_KEY
from pytest_agentgym.plugin.suite_places import add_suites_ini, suite_places


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_agentgym.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)
    add_suites_ini(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    options.hint_habitual_flags(parser, args)  # before pytest rejects e.g. --dry-run


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """--agentgym-list-envs and --agentgym-preflight answer and end the run."""
    if not looks_only(config):
        return None
    from pytest_agentgym.plugin.preflight import list_envs, preflight

    config._do_configure()  # resolve settings through the normal path
    try:
        settings = config.stash[SETTINGS_KEY]
        if settings.list_envs:
            return list_envs(settings)
        return preflight(settings, list(config.args), places=suite_places(config))
    finally:
        config._ensure_unconfigure()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "agentgym: an AgentGym episode")
    config.addinivalue_line("markers", "verifiers: episodes of verifiers environments (environment: verifiers:<module>)")
    if is_worker(config) and "agentgym_run_id" not in config.workerinput:
        config.pluginmanager.register(DormantSession(config), "agentgym-dormant")  # so is its controller
    elif not is_worker(config) and dormancy.is_dormant(config):
        config.pluginmanager.register(DormantSession(config), "agentgym-dormant")
    else:
        activate(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    restore_sigterm(config)
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        run.shutdown()

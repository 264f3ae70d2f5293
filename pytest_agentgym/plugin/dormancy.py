"""The plugin in a session that is not an evaluation: silent, and nearly free.

pytest loads every installed plugin into every session of its virtual environment,
so a project's own unit tests meet this plugin too. A session that names no
``--agentgym-*`` option (nor ``AGENTGYM_*`` variable, nor ``agentgym_*`` ini key
of a run setting) and whose paths hold no suite file stays dormant: no settings are
resolved, no run directory is claimed, nothing is printed, no server or model is
started, and the plugin's heavier modules are never imported. The check reads only
the command line and the YAML files under its paths that have a top-level
``environment:`` line (config/suite_files.py says which of those are suites: a
deployment config's ``environment: staging`` is not). The ``agentgym_suites`` ini key
names folders where every YAML file is a suite (plugin/suite_places.py); it says where
suites are, not that this session runs them, so it wakes nothing by itself.

A dormant session wakes up when its collection shows that it does evaluate after all:
a suite file the walk did not see, or a test that asks for the ``agentgym_episode`` or
``agentgym_run`` fixture. It then makes the run as an active session would have
(plugin/activation.py), prints the header after collection, and goes on. Under
pytest-xdist the run belongs to the controller, which never collects: in a worker, such
a test errs with :func:`no_run_message`, which says how to name the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentgym.plugin.suite_places import suite_places

#: the fixtures that need the run
RUN_FIXTURES = ("agentgym_episode", "agentgym_run")


def names_an_option(config: pytest.Config) -> bool:
    """Whether any of the plugin's options is given: flag, variable or ini key (read as
    every option is read, plugin/options.py)."""
    from pytest_agentgym.config.options import OPTIONS
    from pytest_agentgym.plugin.options import given

    return any(given(config, option) is not None for option in OPTIONS)


def is_dormant(config: pytest.Config) -> bool:
    """No option of the plugin and no suite file under the session's paths."""
    if names_an_option(config):
        return False
    from pytest_agentgym.config.suite_files import suite_files

    skip = config.getini("norecursedirs")
    try:
        return next(suite_files([str(a) for a in config.args], skip, suite_places(config)), None) is None
    except OSError:
        return False  # collection will say what is wrong with the paths


class DormantSession:
    """Registered instead of the run's session while the plugin is dormant."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.awake = False

    def _wake(self, why: str) -> Any:
        self.awake = True
        from pytest_agentgym.plugin.activation import activate
        from pytest_agentgym.plugin.stash import RUN_KEY

        activate(self.config)
        session = self.config.pluginmanager.get_plugin("agentgym-session")
        session.late_header = True  # the header was due before collection: it follows it
        if not self.config.option.collectonly:
            self.config.stash[RUN_KEY].start()
        return session

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if self.awake:
            return None  # the run's session collects from now on
        from pytest_agentgym.config.suite_files import is_suite_file

        if not is_suite_file(file_path, suite_places(self.config)) or hasattr(self.config, "workerinput"):
            return None
        self._wake(f"{file_path} is a suite file")
        from pytest_agentgym.plugin.items import collect_suite

        return collect_suite(file_path, parent)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if self.awake or hasattr(config, "workerinput"):  # an xdist worker: see no_run_message
            return
        users = [i for i in items if any(f in getattr(i, "fixturenames", ()) for f in RUN_FIXTURES)]
        if not users:
            return
        woken = self._wake(f"{users[0].nodeid} uses the plugin's fixtures")
        # registered during this hook's call, which pluggy does not extend to it
        woken.pytest_collection_modifyitems(session, config, items)


def no_run_message(nodeid: str) -> str:
    """Why a test that asks for the run's fixtures has none (an xdist worker of a dormant
    controller), and what to do."""
    return (f"{nodeid} asks for the agentgym_episode/agentgym_run fixture, but this pytest-xdist session "
            f"names no --agentgym-* option and its paths hold no suite file, so the plugin made no run. "
            f"Name one: --agentgym-node=local on the command line (or the ini key agentgym_node), or "
            f"run without -n")

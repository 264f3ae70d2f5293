"""A run that collected nothing: what to do next, and no empty reports directory left.

pytest's exit status 5 alone ("no tests ran") tells a first-time user nothing about
where suites come from; this says it: the batteries the package ships, or
``pytest-agentgym init`` for copies to edit. The directories the run made for its run
directory (``reports/`` the first time) are removed again when it wrote nothing into them.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def missing_dirs(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist yet, deepest first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def advice(config: pytest.Config, suites_found: bool) -> str:
    from pytest_agentgym.config.suite_files import batteries

    shipped = " or ".join(f"--agentgym-battery={name}" for name in batteries())
    why = ("the suites under the paths given hold no episode that the selection keeps "
           "(--agentgym-envs, --agentgym-tasks, -k, -m, --deselect, the node's skip list)" if suites_found
           else f"no suite file under {' '.join(str(a) for a in config.args)}")
    return (f"agentgym: no episode collected: {why}. To run the suites the package ships: "
            f"pytest {shipped}; for copies to edit and CI job files: pytest-agentgym init "
            f"(then pytest suites/lightweight)")


class EmptyRun:
    """Registered by activation in the controller (plugin/activation.py)."""

    def __init__(self, config: pytest.Config, made: list[Path]) -> None:
        self.config = config
        self.made = made  # the directories that claiming the run directory creates

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, exitstatus: int,
                                config: pytest.Config) -> None:
        if exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED:
            return
        from pytest_agentgym.config.suite_files import suite_files
        from pytest_agentgym.plugin.suite_places import suite_places

        try:
            found = next(suite_files([str(a) for a in config.args], config.getini("norecursedirs"),
                                     suite_places(config)), None) is not None
        except OSError:
            found = False
        terminalreporter.write_line(advice(config, found), yellow=True)

    @pytest.hookimpl(trylast=True)  # after the run let go of its directory (plugin/__init__.py)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for directory in self.made:
            if not directory.is_dir():  # the run directory: the lock removes it when it held nothing
                continue
            try:
                directory.rmdir()  # only when empty: a run that wrote anything keeps it all
            except OSError:
                return

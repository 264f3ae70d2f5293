"""pytest walks logging's registry of loggers at every hook while a run's threads may add
loggers to it (a module imported on the engine's thread): the walk must not see the
registry change under it (plugin/logger_registry.py). Seen under load in CI as
``INTERNALERROR> RuntimeError: dictionary changed size during iteration``."""

from __future__ import annotations

import contextlib
import itertools
import logging

import pytest
from _pytest.logging import LogCaptureHandler, catching_logs

from pytest_agentgym.plugin.logger_registry import SnapshotRegistry, guard_logger_registry

_added = itertools.count()


class AddsALoggerWhenRead(logging.Logger):
    """A logger that, when pytest reads its ``propagate`` during the walk, makes a new logger:
    what another thread's import does at that moment, made to happen every time."""

    @property  # type: ignore[override]
    def propagate(self) -> bool:
        logging.getLogger(f"agentgym-test-added-while-walked-{next(_added)}")
        return True

    @propagate.setter
    def propagate(self, value: bool) -> None:
        pass


@contextlib.contextmanager
def walker_in(registry: dict):
    """``logging``'s registry replaced by ``registry`` holding the logger above, for the
    ``with`` block only: pytest walks the registry itself at each phase of this test."""
    manager = logging.Logger.manager
    saved = manager.loggerDict
    registry.update(saved)
    registry["agentgym-test-walker"] = AddsALoggerWhenRead("agentgym-test-walker")
    manager.loggerDict = registry
    try:
        yield manager
    finally:
        manager.loggerDict = saved


def test_pytest_walking_a_plain_registry_that_grows_fails_as_seen_in_ci():
    with walker_in({}), pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
        with catching_logs(LogCaptureHandler()):
            pass


def test_the_guarded_registry_lets_pytest_walk_while_a_logger_is_added():
    with walker_in({}) as manager:
        guard_logger_registry()
        assert isinstance(manager.loggerDict, SnapshotRegistry)
        before = len(manager.loggerDict)
        with catching_logs(LogCaptureHandler()):
            pass
        assert len(manager.loggerDict) == before + 1  # the logger made during the walk is kept
        assert logging.getLogger("agentgym-test-walker") is manager.loggerDict["agentgym-test-walker"]
        guard_logger_registry()  # again: nothing changes
        assert len(manager.loggerDict) == before + 1

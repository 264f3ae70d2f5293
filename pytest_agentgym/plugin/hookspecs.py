"""Hooks that other plugins and conftest.py files can implement.

Built-in behaviour does not depend on any of these being implemented.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_agentgym_add_environments(config: pytest.Config, specs: dict[str, Any]) -> None:
    """Add or change environments before suites are collected.

    Put an :class:`~pytest_agentgym.envs.spec.EnvSpec` into ``specs`` and register
    the adapter class that plays it. Example, in a conftest.py::

        from pytest_agentgym.envs import register
        from pytest_agentgym.envs.base import EnvAdapter
        from pytest_agentgym.envs.spec import EnvSpec

        @register
        class GuessAdapter(EnvAdapter):
            name = "Guess"
            prompt_template = "unused.j2"
            ...

        def pytest_agentgym_add_environments(config, specs):
            specs["Guess"] = EnvSpec(name="Guess", category="lightweight", port=36100,
                                     url="http://127.0.0.1:36100")
    """


@pytest.hookspec
def pytest_agentgym_episode_finished(config: pytest.Config, record: Any) -> None:
    """Called once per finished episode (in the controller under pytest-xdist),
    with its :class:`~pytest_agentgym.results.records.EpisodeRecord`. Example::

        def pytest_agentgym_episode_finished(config, record):
            if record.error:
                print("infrastructure error in", record.episode_id, record.error.message)
    """


@pytest.hookspec
def pytest_agentgym_run_finished(config: pytest.Config, summaries: dict, verdicts: list) -> None:
    """Called once at the end of a run with the per-environment summaries
    (:class:`~pytest_agentgym.results.aggregate.EnvSummary`) and the gate verdicts. Example::

        def pytest_agentgym_run_finished(config, summaries, verdicts):
            for env, summary in summaries.items():
                print(env, summary.mean_reward)
    """

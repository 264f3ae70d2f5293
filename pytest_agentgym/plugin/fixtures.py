"""Fixtures for tests written in Python rather than suite YAML.

    def test_maze_from_the_far_corner(agentgym_episode):
        record = agentgym_episode("Maze", 0, max_rounds=15)
        assert record.success, record.turns[-1].feedback

The episode runs through the same servers, endpoint and engine as suite items,
and lands in the run's episodes.jsonl like them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pytest

from pytest_agentgym.plugin.stash import RUN_KEY

if TYPE_CHECKING:  # loaded with the plugin in every pytest session: imports only what it must
    from pytest_agentgym.results.records import EpisodeRecord


@pytest.fixture
def agentgym_episode(request: pytest.FixtureRequest) -> Callable[..., EpisodeRecord]:
    """A function ``(env, task_index, *, repeat=1, max_rounds=None, episode_timeout=None,
    sampling=None, min_reward=None) -> EpisodeRecord`` that plays one episode."""
    run = _run(request)
    counter = {"n": 0}

    def play(env: str, task_index: int, *, repeat: int = 1, max_rounds: int | None = None,
             episode_timeout: float | None = None, sampling: dict[str, Any] | None = None,
             min_reward: float | None = None) -> EpisodeRecord:
        counter["n"] += 1
        key = f"{request.node.nodeid}#{counter['n']}"
        return run.play(key, env, task_index, repeat=repeat, max_rounds=max_rounds,
                            episode_timeout=episode_timeout, sampling=sampling or {},
                            min_reward=min_reward, nodeid=request.node.nodeid)

    return play


@pytest.fixture
def agentgym_run(request: pytest.FixtureRequest) -> Any:
    """The run's :class:`~pytest_agentgym.run.evaluation.EvaluationRun` (settings, run directory, ...)."""
    return _run(request)


def _run(request: pytest.FixtureRequest) -> Any:
    run = request.config.stash.get(RUN_KEY, None)
    if run is None:
        from pytest_agentgym.plugin.dormancy import no_run_message

        pytest.fail(no_run_message(request.node.nodeid), pytrace=False)
    return run

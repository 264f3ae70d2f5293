"""Episodes that cannot be played: there is no model endpoint at all, or their
environment's server could not be had (an extra not installed, a command that does not
start). Each one's record is an error at once, written like any other, and nothing is
contacted; the plugin reports their environments once ('agentgym: NOT PLAYED',
:func:`blocked`), not once per episode. No pytest."""

from __future__ import annotations

import concurrent.futures
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

if TYPE_CHECKING:
    from pytest_agentgym.engine.episode import EpisodeRequest


def cause(resources: Any, env: str) -> ErrorInfo | None:
    """Why ``env``'s episodes cannot be played (``resources``: the run's RunResources), or None."""
    return resources.setup_error or resources.env_errors.get(env)


def blocked(resources: Any, envs: Iterable[str]) -> dict[str, ErrorInfo]:
    """The environments of ``envs`` none of whose episodes can be played, and why."""
    found = {}
    for env in envs:
        error = cause(resources, env)
        if error is not None:
            found[env] = error
    return found


class NotPlayed:
    """The episodes a run could not play, each a future that holds its error record (or
    the OSError of writing it) from the start. ``write`` puts a record on disk and
    returns it, as the engine's ``on_finished`` does."""

    def __init__(self, write: Callable[[EpisodeRecord], EpisodeRecord]) -> None:
        self._write = write
        self._futures: dict[str, concurrent.futures.Future[EpisodeRecord]] = {}

    def future(self, key: str, request: EpisodeRequest, error: ErrorInfo | None,
               model: str) -> concurrent.futures.Future[EpisodeRecord]:
        """The error record of the episode ``key`` (written once, however often asked):
        ``error``, or the engine that did not start."""
        if key not in self._futures:
            error = error or ErrorInfo("RuntimeError", "the engine did not start", "harness")
            record = EpisodeRecord.errored(
                request.run_id, request.spec.name, request.task_index, request.repeat, error,
                started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), model=model,
                nodeid=request.nodeid, node=request.node, checkpoint=request.checkpoint,
                min_reward=request.min_reward, max_rounds=request.limits.max_rounds, sampling=dict(request.sampling))
            future: concurrent.futures.Future[EpisodeRecord] = concurrent.futures.Future()
            try:
                future.set_result(self._write(record))
            except OSError as exc:
                future.set_exception(exc)
            self._futures[key] = future
        return self._futures[key]

    def forget(self, key: str) -> None:
        """The record is the caller's now (and on disk): hold no reference to it."""
        self._futures.pop(key, None)

"""What the reference-policy benchmarks share: an embedded server on a free
loopback port, and episodes played through the harness's own loop
(``episode.run_episode``: the real adapter, protocol client, refusal rule,
max rounds and ``/close``), with a reference policy answering in-process in
place of a model endpoint, so the figure measures the policy, not HTTP to an agent.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.engine.episode import Completion, EpisodeLimits, EpisodeRequest, run_episode
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer


@contextmanager
def embedded_server(name: str) -> Iterator[ManagedServer]:
    """``pytest-agentgym serve NAME`` on a free loopback port, healthy; its output goes to a log file."""
    server = ManagedServer(name, command=embedded_command(name), startup_timeout=60).start()
    try:
        yield server
    finally:
        server.stop()


class PolicyModel:
    """The episode loop's ``ChatModel``, answered by a reference policy in this process."""

    def __init__(self, policy: Any, *, random_moves: bool, seed: int) -> None:
        self.name = "random" if random_moves else "reference"
        self._answer = policy.random_reply if random_moves else policy.reply
        self._rng = random.Random(seed)

    async def complete(self, messages: Sequence[dict[str, str]], *, budget_s: float,
                       sampling: dict[str, Any], previous: Completion | None = None) -> Completion:
        started = time.perf_counter()
        text = self._answer(messages, self._rng)
        return Completion(text, time.perf_counter() - started)


def default_seed(index: int, repeat: int) -> int:
    return index * 1000 + repeat


async def play(env: str, url: str, policy: Any, indices: Iterable[int], *, random_moves: bool,
               repeats: int = 1, seed: Callable[[int, int], int] = default_seed,
               ) -> tuple[list[EpisodeRecord], float]:
    """Every index ``repeats`` times, one episode after another through one client
    (making an httpx client costs more than an episode). Returns the records and
    the wall time; an episode that ends in an error stops the benchmark."""
    spec = load_default_specs()[env]
    adapter = adapter_class(env)()
    limits = EpisodeLimits(max_rounds=spec.max_rounds, timeout_s=300, retries=0)
    records: list[EpisodeRecord] = []
    started = time.perf_counter()
    async with EnvClient(spec.base_url(url), env=env, dialect=spec.dialect) as client:
        for repeat in range(repeats):
            for index in indices:
                request = EpisodeRequest(run_id="benchmark", spec=spec, task_index=index,
                                         repeat=repeat + 1, limits=limits)
                model = PolicyModel(policy, random_moves=random_moves, seed=seed(index, repeat))
                record = await run_episode(request, adapter, client, model)
                if record.error is not None:
                    raise SystemExit(f"{env} task {index}: {record.error.type}: {record.error.message}")
                records.append(record)
    return records, time.perf_counter() - started

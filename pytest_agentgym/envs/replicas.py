"""One environment served by several server processes (replicas), behind one client.

A run that gives an environment more than one server (``replicas: N|auto``, or
``url:`` as a list of running servers: servers/pool.py) plays through a
:class:`ReplicatedClient`: it has the :class:`~pytest_agentgym.envs.protocol.EnvClient`
operations, and under them one plain client per replica.

* ``/create`` goes to the replica with the fewest live episodes (created and not
  yet released by the engine), ties taken in turn. A replica that cannot be
  reached (being restarted after a crash) is passed over for the next one: a
  create that never arrived created nothing, and a dead server's environments
  are gone anyway.
* Every later call of an episode goes to the replica that created its
  environment. The id the engine sees is ``real_id * replicas + replica``, so the
  mapping needs no table and survives a restart of the replica on its port;
  errors name the replica's URL and the server's own env id.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from pytest_agentgym.envs.protocol import EnvBadResponse, EnvClient, EnvUnreachable


class ReplicatedClient:
    """The replicas of one environment, each reached through its own ``EnvClient``."""

    def __init__(self, clients: Sequence[EnvClient]) -> None:
        if len(clients) < 2:
            raise ValueError("a replicated client needs at least two servers; use the EnvClient itself")
        self.replicas = list(clients)
        first = self.replicas[0]
        self.env = first.env
        self.dialect = first.dialect
        self.timeout = first.timeout
        #: the first replica's URL (a message about the environment as a whole names it)
        self.base_url = first.base_url
        #: The whole answer of the last ``/create`` (TextCraft's carries an observation).
        self.last_create: Any = None
        #: per replica: episodes created on it and not yet released
        self.live = [0] * len(self.replicas)
        self._turn = 0
        #: the episode being opened by each asyncio task: created, not yet handed to the engine
        self._opening: dict[Any, int] = {}

    @property
    def id_key(self) -> str:
        return self.replicas[0].id_key

    def _replica(self, env_id: int) -> tuple[EnvClient, int]:
        count = len(self.replicas)
        return self.replicas[env_id % count], env_id // count

    def replica_of(self, env_id: int) -> int:
        """The index of the replica that holds the environment ``env_id``."""
        return env_id % len(self.replicas)

    def _order(self) -> list[int]:
        """Replicas by live episodes, fewest first; ties in turn from the last one chosen."""
        count = len(self.replicas)
        start = self._turn
        self._turn = (self._turn + 1) % count
        return sorted(range(count), key=lambda i: (self.live[i], (i - start) % count))

    async def create(self, body: dict[str, Any] | None = None) -> int:
        unreachable: EnvUnreachable | None = None
        for index in self._order():
            replica = self.replicas[index]
            try:
                real_id = await replica.create(body)
            except EnvUnreachable as exc:  # down (restarting): the next replica takes the episode
                unreachable = unreachable or exc
                continue
            self.live[index] += 1
            self.last_create = replica.last_create
            handle = real_id * len(self.replicas) + index
            self._opening[asyncio.current_task()] = handle
            return handle
        assert unreachable is not None
        raise unreachable

    def release(self, env_id: int) -> None:
        self._opening.pop(asyncio.current_task(), None)
        index = self.replica_of(env_id)
        self.live[index] = max(0, self.live[index] - 1)

    def abandon_open(self) -> None:
        """The episode this task was opening failed before the engine got its env id (its
        reset failed after the create): count it off its replica all the same."""
        handle = self._opening.pop(asyncio.current_task(), None)
        if handle is not None:
            self.release(handle)

    async def reset(self, env_id: int, payload: dict[str, Any]) -> Any:
        replica, real_id = self._replica(env_id)
        return await replica.reset(real_id, payload)

    async def step(self, env_id: int, action: str) -> Any:
        replica, real_id = self._replica(env_id)
        return await replica.step(real_id, action)

    async def observation(self, env_id: int) -> Any:
        replica, real_id = self._replica(env_id)
        return await replica.observation(real_id)

    async def close(self, env_id: int) -> Any:
        replica, real_id = self._replica(env_id)
        return await replica.close(real_id)

    async def get(self, endpoint: str, env_id: int | None = None) -> Any:
        if env_id is None:
            return await self.replicas[0].get(endpoint)
        replica, real_id = self._replica(env_id)
        return await replica.get(endpoint, real_id)

    def bad_answer(self, endpoint: str, message: str, env_id: int | None = None) -> EnvBadResponse:
        if env_id is None:
            return self.replicas[0].bad_answer(endpoint, message)
        replica, real_id = self._replica(env_id)
        return replica.bad_answer(endpoint, message, real_id)

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.aclose()


def replicated(clients: Sequence[EnvClient]) -> Any:
    """The one client of an environment: the plain client when it has one server."""
    return clients[0] if len(clients) == 1 else ReplicatedClient(clients)

"""What the rollout service takes from a node profile: the environments it may
serve, how their servers are had, and the limits an episode runs under.

Resolved like ``--agentgym-node`` (a name under configs/nodes/, the project's
first, or a YAML path), with the same envs.yaml and node overrides as a pytest
run, so that a rollout and a pytest episode on the same node are the same episode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentgym.config.profile import NodeProfile, ProfileError
from pytest_agentgym.envs.spec import EnvSpec
from pytest_agentgym.run.requests import RequestRules


#: The error of a node profile the service cannot use (the one loader's).
NodeError = ProfileError


@dataclass(frozen=True)
class RolloutNode:
    name: str
    file: Path
    profile: dict[str, Any]
    specs: dict[str, EnvSpec]
    #: environments the node leaves out (its ``envs.skip``)
    skip: tuple[str, ...]
    #: spawn, attach or auto (node ``envs.servers``)
    servers_mode: str
    concurrency: int
    #: the node's ``limits.max_rounds`` (None: each environment's own) and episode budget
    max_rounds: int | None
    episode_timeout: float
    #: the node's ``model.sampling`` (set keys only): under a batch's own, its temperature and
    #: max_tokens, or all of it with ``"node_sampling": true`` (rollouts/request.py)
    sampling: dict[str, Any]
    request_timeout: float
    model_retries: int
    #: retries of an episode after an infrastructure error (as --agentgym-retries' default)
    episode_retries: int = 1
    nats: str | None = None
    create_stream: bool = False
    #: the OpenAI base URLs of the node's model endpoints that have one (``model.endpoints``;
    #: a launched endpoint has none): where the service's API key may go by default
    model_urls: tuple[str, ...] = ()
    #: the profile as the one loader read it (config/profile.py)
    node: NodeProfile = None  # type: ignore[assignment]
    #: server processes per spawned environment (--replicas, else the node's envs.replicas)
    replicas: int | str = 1

    @classmethod
    def load(cls, node: str, rootdir: Path, *, concurrency: int | None = None,
             nats: str | None = None, replicas: int | str | None = None) -> "RolloutNode":
        """The node profile ``node`` as a pytest run on it sees it; ``concurrency`` and
        ``nats`` replace the profile's. Raises :class:`NodeError`."""
        from pytest_agentgym.model.endpoint_settings import EndpointConfigError

        loaded = NodeProfile.load(node, rootdir, flag="--node")
        try:
            model = loaded.model_settings()
        except EndpointConfigError as exc:
            raise NodeError(str(exc)) from None
        if concurrency is not None and (isinstance(concurrency, bool) or concurrency < 1):
            raise NodeError(f"--concurrency must be a whole number >= 1, got {concurrency!r}")
        sampling = {k: v for k, v in dataclasses.asdict(model.sampling).items() if v is not None}
        return cls(
            name=loaded.name, file=loaded.file, profile=loaded.raw, specs=loaded.specs, skip=loaded.skip,
            servers_mode=loaded.servers_mode, concurrency=concurrency or loaded.concurrency,
            max_rounds=loaded.max_rounds, episode_timeout=loaded.episode_timeout,
            sampling=sampling, request_timeout=model.request_timeout, model_retries=model.retries,
            nats=nats if nats is not None else loaded.nats_url, create_stream=loaded.create_stream,
            model_urls=tuple(e.base_url for e in model.endpoints if e.url is not None), node=loaded,
            replicas=replicas or loaded.replicas,
        )

    def served(self) -> list[str]:
        """The environments a batch may name on this node (configured and not skipped)."""
        return self.node.served()

    def spec(self, name: str) -> EnvSpec | None:
        """The served environment called ``name`` (any case), or None."""
        return self.node.spec(name)

    def skipped(self, name: str) -> bool:
        return self.node.skipped(name)

    def rules(self, run_id: str = "") -> RequestRules:
        """How a rollout's limits are decided on this node: as a pytest run's (run/requests.py);
        a batch's sampling is its own (rollouts/request.py), so the node adds none here."""
        return RequestRules(run_id=run_id, node=self.name, node_max_rounds=self.max_rounds,
                            node_episode_timeout=self.episode_timeout, retries=self.episode_retries)

    def rounds_for(self, spec: EnvSpec) -> int:
        """Rounds when a batch gives no ``max_round``: as a pytest run on this node."""
        return self.rules().rounds(spec)

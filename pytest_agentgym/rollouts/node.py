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

from pytest_agentgym.envs.spec import EnvSpec


class NodeError(ValueError):
    """A node profile the service cannot use; the message names the file and the fix."""


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
    #: the node's ``model.sampling`` (set keys only), under each batch's own
    sampling: dict[str, Any]
    request_timeout: float
    model_retries: int
    #: retries of an episode after an infrastructure error (as --agentgym-retries' default)
    episode_retries: int = 1
    nats: str | None = None
    create_stream: bool = False

    @classmethod
    def load(cls, node: str, rootdir: Path, *, concurrency: int | None = None,
             nats: str | None = None) -> "RolloutNode":
        """The node profile ``node`` as a pytest run on it sees it; ``concurrency`` and
        ``nats`` replace the profile's. Raises :class:`NodeError`."""
        import pytest

        from pytest_agentgym.model.endpoint_settings import EndpointConfigError, ModelSettings
        from pytest_agentgym.config.settings import find_node_file, load_env_specs, load_profile

        try:
            path = find_node_file(node, rootdir)
            profile = load_profile(path)
            specs = load_env_specs(rootdir, profile, path)
            model = ModelSettings.from_profile(profile, where=str(path))
        except pytest.UsageError as exc:
            raise NodeError(str(exc).replace("--agentgym-node", "--node")) from None
        except EndpointConfigError as exc:
            raise NodeError(str(exc)) from None
        limits = profile.get("limits") or {}
        envs = profile.get("envs") or {}
        nats_section = profile.get("nats") or {}
        servers = envs.get("servers", "spawn")
        if servers not in ("attach", "spawn", "auto"):
            raise NodeError(f"{path}: envs.servers is {servers!r}; use attach, spawn or auto")
        limit = concurrency if concurrency is not None else limits.get("concurrency", 1)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise NodeError(f"{path}: limits.concurrency must be a whole number >= 1, got {limit!r}")
        sampling = {k: v for k, v in dataclasses.asdict(model.sampling).items() if v is not None}
        return cls(
            name=str(profile.get("name", node)), file=path, profile=profile, specs=specs,
            skip=tuple(envs.get("skip") or ()), servers_mode=servers, concurrency=limit,
            max_rounds=limits.get("max_rounds"), episode_timeout=float(limits.get("episode_timeout", 300)),
            sampling=sampling, request_timeout=model.request_timeout, model_retries=model.retries,
            nats=nats if nats is not None else nats_section.get("url"),
            create_stream=bool(nats_section.get("create_stream", False)),
        )

    def served(self) -> list[str]:
        """The environments a batch may name on this node (configured and not skipped)."""
        skipped = {s.lower() for s in self.skip}
        return [name for name in self.specs if name.lower() not in skipped]

    def spec(self, name: str) -> EnvSpec | None:
        """The served environment called ``name`` (any case), or None."""
        for known in self.served():
            if known.lower() == name.lower():
                return self.specs[known]
        return None

    def skipped(self, name: str) -> bool:
        return name.lower() in {s.lower() for s in self.skip}

    def rounds_for(self, spec: EnvSpec) -> int:
        """Rounds when a batch gives no ``max_round``: as a pytest run on this node."""
        return min(spec.max_rounds, self.max_rounds or spec.max_rounds)

"""A worker's node profile as the run's :class:`~pytest_agentgym.config.settings.Settings`.

A worker reads its profile the way a pytest run does (configs/nodes/NAME.yaml
of the current directory first, then the shipped ones; configs/envs.yaml and
the profile's ``envs.overrides``), without pytest's options: what an episode is
(rounds, budget, sampling, retries) comes with each work item from the
coordinator; the profile gives the model endpoint, the environment servers and
the concurrency.
"""

from __future__ import annotations

from pathlib import Path

from pytest_agentgym.config.settings import Settings, find_node_file, load_env_specs, load_profile


class ProfileError(ValueError):
    """The node profile cannot be used; the message names the file and the fix."""


def worker_settings(node: str, *, rootdir: Path, concurrency: int | None, log_dir: Path,
                    command: str) -> Settings:
    import pytest

    try:
        node_file = find_node_file(node, rootdir)
        profile = load_profile(node_file)
        specs = load_env_specs(rootdir, profile, node_file)
    except pytest.UsageError as exc:
        raise ProfileError(str(exc).replace("--agentgym-node", "--node")) from None
    limits = profile.get("limits") or {}
    envs = profile.get("envs") or {}
    servers = envs.get("servers", "spawn")
    if servers not in ("attach", "spawn", "auto"):
        raise ProfileError(f"{node_file}: envs.servers is {servers!r}; use attach, spawn or auto")
    slots = concurrency or limits.get("concurrency", 1)
    if not isinstance(slots, int) or slots < 1:
        raise ProfileError(f"{node_file}: limits.concurrency must be a whole number >= 1 (or give --concurrency N)")
    return Settings(
        node=str(profile.get("name", node)), node_file=node_file, profile=profile, env_specs=specs,
        concurrency=slots, reports=log_dir, run_id="worker", retries=1, servers_mode=servers, nats=None,
        command=command, skip_envs=tuple(envs.get("skip", ()) or ()),
        node_max_rounds=limits.get("max_rounds"),
        node_episode_timeout=float(limits.get("episode_timeout", 300)),
    )

"""Node profiles: the one loader every front door reads a node with.

A node profile (``configs/nodes/NAME.yaml``, the project's first, then the
shipped ones, or a YAML path) says what a machine serves and how: its model
endpoints, its environment servers (``envs.servers``: spawn, attach or auto;
``envs.skip``; ``envs.overrides``), its limits (rounds, episode budget,
concurrency, error budget) and its NATS server. pytest (``--agentgym-node``),
the queue worker and the rollout service (``--node``), ``pytest-agentgym envs
--node`` and the verifiers taskset all read it through :meth:`NodeProfile.load`,
so a node means the same thing whichever door an episode comes through.

Pytest-free: a profile that cannot be used raises :class:`ProfileError`, whose
message names the flag the user typed (each door passes its own), the file, the
key and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from pytest_agentgym.servers.modes import SERVERS_MODES
from pytest_agentgym.envs.spec import DEFAULT_ENVS_FILE, EnvConfigError, EnvSpec, load_specs, read_yaml, \
    read_replicas, spec_from_mapping

PACKAGE_NODES = DEFAULT_ENVS_FILE.parent / "nodes"
PROFILE_KEYS = frozenset({"name", "description", "model", "limits", "nats", "envs", "vllm"})
DEFAULT_EPISODE_TIMEOUT_S = 300.0

#: What a run does when its model endpoint stops answering mid-run (``model.outage.policy``)
OUTAGE_POLICIES = {
    "fail": "the episodes that meet the outage error, as before (the default)",
    "wait": "pause new episodes, probe the endpoint for up to wait_s, then retry the episodes it cut short",
    "failover": "move to the next endpoint of model.endpoints that answers; records name the model that served them",
}
#: ``model.outage.wait_s`` when a policy of ``wait`` gives none: long enough for a gateway or
#: a GPU server to be restarted by hand
DEFAULT_OUTAGE_WAIT_S = 600.0
_OUTAGE_KEYS = ("policy", "wait_s", "probe_every_s")


@dataclass(frozen=True)
class OutagePolicy:
    """``model.outage``: what the engine does when the model endpoint becomes unreachable
    mid-run (docs/outages.md). ``probe_every_s``: the pause between two health probes
    while waiting."""

    policy: str = "fail"
    wait_s: float = DEFAULT_OUTAGE_WAIT_S
    probe_every_s: float = 2.0


def outage_policy(profile: Mapping[str, Any], where: str) -> OutagePolicy:
    """The ``model.outage`` section of the profile mapping ``profile`` (``where``: its
    file, for the message). Raises :class:`ProfileError` naming the key and the fix."""
    model = profile.get("model")
    section = model.get("outage") if isinstance(model, Mapping) else None
    if section is None:
        return OutagePolicy()
    example = "e.g. outage: {policy: wait, wait_s: 600}"
    if not isinstance(section, Mapping):
        raise ProfileError(f"{where}: model.outage must be a mapping, {example}; got {section!r}")
    unknown = sorted(str(k) for k in section if k not in _OUTAGE_KEYS)
    if unknown:
        raise ProfileError(f"{where}: model.outage has unknown key(s) {', '.join(unknown)}; "
                           f"it takes {', '.join(_OUTAGE_KEYS)}, {example}")
    policy = section.get("policy", "wait")
    if policy not in OUTAGE_POLICIES:
        raise ProfileError(f"{where}: model.outage.policy is {policy!r}; use "
                           + ", ".join(f"'{name}' ({why})" for name, why in OUTAGE_POLICIES.items()))
    seconds = {}
    for key, default in (("wait_s", DEFAULT_OUTAGE_WAIT_S), ("probe_every_s", 2.0)):
        value = section.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ProfileError(f"{where}: model.outage.{key} must be a number of seconds above 0, "
                               f"{example}; got {value!r}")
        seconds[key] = float(value)
    if policy == "failover" and len(model.get("endpoints") or ()) < 2:
        raise ProfileError(f"{where}: model.outage.policy is failover, but model.endpoints lists one "
                           "endpoint: add the endpoint to fail over to, or use policy: wait")
    return OutagePolicy(policy=policy, **seconds)


class ProfileError(ValueError):
    """A node profile that cannot be used. ``reason`` is the message without the flag
    that named the node (a door that words its own error takes that)."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


@dataclass(frozen=True)
class NodeProfile:
    name: str
    file: Path
    #: the profile as written (its ``model:`` and ``vllm:`` sections are read by model.endpoints)
    raw: dict[str, Any]
    #: the shipped envs.yaml, the project's configs/envs.yaml over it, the node's overrides over both
    specs: dict[str, EnvSpec]
    servers_mode: str = "spawn"
    skip: tuple[str, ...] = ()
    concurrency: int = 1
    #: ``limits.max_rounds``: the cap on every episode's rounds (None: each environment's own)
    max_rounds: int | None = None
    episode_timeout: float = DEFAULT_EPISODE_TIMEOUT_S
    max_error_rate: float | None = None
    nats_url: str | None = None
    create_stream: bool = False
    limits: dict[str, Any] = field(default_factory=dict)
    #: ``model.outage``: wait for the endpoint, fail over, or fail (docs/outages.md)
    outage: OutagePolicy = field(default_factory=OutagePolicy)
    #: ``envs.replicas``: server processes per spawned environment (a number or "auto"),
    #: for the environments whose own ``replicas`` is not set
    replicas: int | str = 1

    @classmethod
    def load(cls, node: str, rootdir: Path, *, flag: str = "--agentgym-node",
             add_environments: Callable[[dict[str, EnvSpec]], None] | None = None) -> "NodeProfile":
        """The node ``node`` (a name or a YAML path) as seen from ``rootdir``.
        ``add_environments`` may add specs to the node's (plugins' environments).
        Raises :class:`ProfileError`."""
        path = find_node_file(node, rootdir, flag=flag)
        raw = read_profile(path)
        limits = _section(raw, "limits", path)
        envs = _section(raw, "envs", path)
        nats = _section(raw, "nats", path)
        specs = load_env_specs(rootdir, raw, path)
        if add_environments is not None:  # plugins' environments (pytest_agentgym_add_environments)
            add_environments(specs)
        servers = envs.get("servers", "spawn")
        if servers not in SERVERS_MODES:
            raise ProfileError(f"{path}: envs.servers is {servers!r}; use "
                               + ", ".join(f"'{mode}' ({why})" for mode, why in SERVERS_MODES.items()))
        concurrency = limits.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ProfileError(f"{path}: limits.concurrency must be a whole number >= 1, got {concurrency!r}")
        try:
            replicas = read_replicas(envs.get("replicas", 1), f"{path}: envs.replicas")
        except EnvConfigError as exc:
            raise ProfileError(str(exc)) from None
        budget = limits.get("max_error_rate")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not 0 <= budget <= 1):
            raise ProfileError(f"{path}: limits.max_error_rate must be a number from 0 to 1, got {budget!r}")
        return cls(name=str(raw.get("name", node)), file=path, raw=raw, specs=specs, servers_mode=servers,
                   skip=tuple(envs.get("skip") or ()), concurrency=concurrency,
                   max_rounds=limits.get("max_rounds"),
                   episode_timeout=float(limits.get("episode_timeout", DEFAULT_EPISODE_TIMEOUT_S)),
                   max_error_rate=budget, nats_url=nats.get("url"),
                   create_stream=bool(nats.get("create_stream", False)), limits=limits,
                   outage=outage_policy(raw, str(path)), replicas=replicas)

    def model_settings(self) -> Any:
        """The ``model:`` section (model.endpoints.ModelSettings). Raises
        model.endpoints.EndpointConfigError for a section that cannot be used."""
        from pytest_agentgym.model.endpoint_settings import ModelSettings

        return ModelSettings.from_profile(self.raw, where=str(self.file))

    def served(self) -> list[str]:
        """The environments this node serves (configured and not skipped)."""
        return [name for name in self.specs if not self.skipped(name)]

    def skipped(self, name: str) -> bool:
        return name.lower() in {s.lower() for s in self.skip}

    def spec(self, name: str) -> EnvSpec | None:
        """The served environment called ``name`` (any case), or None."""
        return next((self.specs[known] for known in self.served() if known.lower() == name.lower()), None)


def find_node_file(name: str, rootdir: Path, *, flag: str = "--agentgym-node") -> Path:
    """A node name (configs/nodes/NAME.yaml, the project's first, then the plugin's) or a file path."""
    known = ", ".join(known_nodes(rootdir))
    if name.endswith((".yaml", ".yml")) or os.sep in name or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            reason = f"no such file; give a node name ({known}) or the path of a node YAML file"
            raise ProfileError(f"{flag}={name}: {reason}", reason=reason)
        return path
    for directory in (rootdir / "configs" / "nodes", PACKAGE_NODES):
        candidate = directory / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    reason = (f"unknown node; known nodes: {known} (files configs/nodes/<name>.yaml), "
              f"or pass the path of a node YAML file")
    raise ProfileError(f"{flag}={name}: {reason}", reason=reason)


def known_nodes(rootdir: Path) -> list[str]:
    names = set()
    for directory in (rootdir / "configs" / "nodes", PACKAGE_NODES):
        if directory.is_dir():
            names.update(p.stem for p in directory.glob("*.yaml"))
    return sorted(names)


def read_profile(path: Path) -> dict[str, Any]:
    """The profile's mapping, its top-level keys checked."""
    try:
        profile = read_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(profile, dict):
        raise ProfileError(f"{path}: a node profile must be a mapping of keys")
    unknown = sorted(set(profile) - PROFILE_KEYS)
    if unknown:
        raise ProfileError(f"{path}: unknown key(s) {', '.join(unknown)}; a node profile has "
                           f"{', '.join(sorted(PROFILE_KEYS))} (see docs/model.md)")
    return profile


def load_env_specs(rootdir: Path, profile: Mapping[str, Any], node_file: Path) -> dict[str, EnvSpec]:
    """The shipped envs.yaml, a project's configs/envs.yaml on top, then the node's overrides."""
    specs = _base_specs(rootdir)
    _apply_overrides(specs, _section(_section(profile, "envs", node_file), "overrides", node_file,
                                     "envs.overrides"), node_file)
    return specs


def _base_specs(rootdir: Path) -> dict[str, EnvSpec]:
    try:
        specs = load_specs(DEFAULT_ENVS_FILE)
        project = rootdir / "configs" / "envs.yaml"
        if project.is_file() and project.resolve() != DEFAULT_ENVS_FILE.resolve():
            specs.update(load_specs(project))
    except EnvConfigError as exc:
        raise ProfileError(str(exc)) from None
    return specs


def _apply_overrides(specs: dict[str, EnvSpec], overrides: Mapping[str, Any], node_file: Path) -> None:
    for name, changes in overrides.items():
        if name not in specs:
            raise ProfileError(f"{node_file}: envs.overrides.{name}: unknown environment; known: {', '.join(specs)}")
        if not isinstance(changes, dict):
            raise ProfileError(f"{node_file}: envs.overrides.{name} must be a mapping")
        base = {k: v for k, v in specs[name].__dict__.items() if k != "name"}
        base["success"] = specs[name].success.text
        if "url" in changes:  # a new url (one or a list) replaces the whole list
            base.pop("replica_urls", None)
        try:
            specs[name] = spec_from_mapping(name, {**base, **changes}, str(node_file))
        except EnvConfigError as exc:
            raise ProfileError(str(exc)) from None


def _section(mapping: Mapping[str, Any], key: str, path: Path, shown: str | None = None) -> dict[str, Any]:
    section = mapping.get(key) or {}
    if not isinstance(section, dict):
        raise ProfileError(f"{path}: '{shown or key}' must be a mapping, got {type(section).__name__}")
    return section

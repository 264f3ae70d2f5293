"""Resolve the run's settings once, into a frozen object kept in ``config.stash``.

Order: command line, ``AGENTGYM_*`` environment variables, ini keys, then (per
suite, in collect.py) the suite's YAML, then the node profile, then defaults.
A bad key or value is a ``pytest.UsageError`` naming where it came from and the fix.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentgym.envs.spec import (
    DEFAULT_ENVS_FILE,
    EnvConfigError,
    EnvSpec,
    is_verifiers,
    load_specs,
    read_yaml,
    spec_from_mapping,
)
from pytest_agentgym.config.options import BY_NAME, OPTIONS, Option

PACKAGE_NODES = DEFAULT_ENVS_FILE.parent / "nodes"
_PROFILE_KEYS = {"name", "description", "model", "limits", "nats", "envs", "vllm"}


@dataclass(frozen=True)
class Settings:
    node: str
    node_file: Path
    profile: dict[str, Any]
    env_specs: dict[str, EnvSpec]
    concurrency: int
    reports: Path
    run_id: str
    retries: int
    servers_mode: str
    nats: str | None
    command: str
    envs: tuple[str, ...] | None = None
    tasks: tuple[int, ...] | None = None
    repeat: int | None = None
    max_rounds: int | None = None
    episode_timeout: float | None = None
    node_max_rounds: int | None = None
    node_episode_timeout: float = 300.0
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    checkpoint: str | None = None
    #: --agentgym-baseline, resolved to a run directory (before this run repoints latest)
    baseline: str | None = None
    max_drop: float = 0.05
    baseline_metric: str | None = None
    strict_gates: bool = False
    allow_mismatch: bool = False
    seed: int | None = None
    no_report: bool = False
    preflight: bool = False
    list_envs: bool = False
    skip_envs: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: --agentgym-sampling: over the node's and the suites' sampling
    sampling: dict[str, Any] | None = None
    max_error_rate: float | None = None
    node_max_error_rate: float | None = None
    #: --agentgym-resume, resolved to the run directory
    resume: Path | None = None
    #: --agentgym-shard (pytest_agentgym.run.shards.Shard), ``auto`` resolved
    shard: Any = None
    #: --agentgym-queue (a queue.address.QueueAddress): workers play the episodes
    queue: Any = None

    def spec(self, name: str) -> EnvSpec:
        for known, spec in self.env_specs.items():
            if known.lower() == name.lower():
                return spec
        raise KeyError(name)


def _raw(config: pytest.Config, option: Option) -> tuple[Any, str] | None:
    """The first value given for ``option`` and where it came from, or None."""
    value = config.getoption(option.dest, default=None)
    if value is not None:
        return value, option.flag
    if option.env_var in os.environ:
        return os.environ[option.env_var], f"environment variable {option.env_var}"
    try:
        value = config.getini(option.dest)
    except ValueError:
        value = None
    if value not in (None, "", []):
        return value, f"ini key {option.dest}"
    return None


def _value(config: pytest.Config, name: str) -> Any:
    option = BY_NAME[name]
    found = _raw(config, option)
    if found is None:
        return None
    value, where = found
    if option.parse is None:  # a flag
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() in ("1", "true", "yes", "on")
    try:
        return option.parse(value)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def flag(config: pytest.Config, name: str) -> bool:
    """A flag option's value from the command line, its AGENTGYM_* variable or ini key."""
    return bool(_value(config, name))


def find_node_file(name: str, rootdir: Path) -> Path:
    """A node name (configs/nodes/NAME.yaml, project first, then the plugin's) or a file path."""
    if name.endswith((".yaml", ".yml")) or os.sep in name or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise pytest.UsageError(
                f"--agentgym-node={name}: no such file; give a node name "
                f"({', '.join(known_nodes(rootdir))}) or the path of a node YAML file"
            )
        return path
    for directory in (rootdir / "configs" / "nodes", PACKAGE_NODES):
        candidate = directory / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    raise pytest.UsageError(
        f"--agentgym-node={name}: unknown node; known nodes: {', '.join(known_nodes(rootdir))} "
        f"(files configs/nodes/<name>.yaml), or pass the path of a node YAML file"
    )


def known_nodes(rootdir: Path) -> list[str]:
    names = set()
    for directory in (rootdir / "configs" / "nodes", PACKAGE_NODES):
        if directory.is_dir():
            names.update(p.stem for p in directory.glob("*.yaml"))
    return sorted(names)


def load_profile(path: Path) -> dict[str, Any]:
    try:
        profile = read_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise pytest.UsageError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(profile, dict):
        raise pytest.UsageError(f"{path}: a node profile must be a mapping of keys")
    unknown = sorted(set(profile) - _PROFILE_KEYS)
    if unknown:
        raise pytest.UsageError(
            f"{path}: unknown key(s) {', '.join(unknown)}; a node profile has "
            f"{', '.join(sorted(_PROFILE_KEYS))} (see docs/model.md)"
        )
    return profile


def _section(profile: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    section = profile.get(key) or {}
    if not isinstance(section, dict):
        raise pytest.UsageError(f"{path}: '{key}' must be a mapping, got {type(section).__name__}")
    return section


def load_env_specs(rootdir: Path, profile: dict[str, Any], node_file: Path) -> dict[str, EnvSpec]:
    """The shipped envs.yaml, a project's configs/envs.yaml on top, then the node's overrides."""
    try:
        specs = load_specs(DEFAULT_ENVS_FILE)
        project = rootdir / "configs" / "envs.yaml"
        if project.is_file() and project.resolve() != DEFAULT_ENVS_FILE.resolve():
            specs.update(load_specs(project))
    except EnvConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    overrides = _section(_section(profile, "envs", node_file), "overrides", node_file)
    for name, changes in overrides.items():
        if name not in specs:
            raise pytest.UsageError(
                f"{node_file}: envs.overrides.{name}: unknown environment; known: {', '.join(specs)}"
            )
        if not isinstance(changes, dict):
            raise pytest.UsageError(f"{node_file}: envs.overrides.{name} must be a mapping")
        base = {k: v for k, v in specs[name].__dict__.items() if k != "name"}
        base["success"] = specs[name].success.text
        try:
            specs[name] = spec_from_mapping(name, {**base, **changes}, str(node_file))
        except EnvConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    return specs


def rerun_command(config: pytest.Config, seed: int | None) -> str:
    """The command that reruns this run, for the header and run.json. Credentials
    in URLs are shown as ``***`` (:func:`pytest_agentgym.results.redact.redact_text`)."""
    from pytest_agentgym.results.redact import redact_text

    args = [a for a in config.invocation_params.args if not a.startswith("--agentgym-run-id")]
    if seed is not None and not any(a.startswith("--agentgym-seed") for a in args):
        args.append(f"--agentgym-seed={seed}")
    return shlex.join(["pytest", *(redact_text(a) for a in args)])


def resolve(config: pytest.Config) -> Settings:
    rootdir = Path(config.rootpath)
    values = {option.name: _value(config, option.name) for option in OPTIONS}
    node = values["node"] or "local"
    node_file = find_node_file(node, rootdir)
    profile = load_profile(node_file)
    limits = _section(profile, "limits", node_file)
    envs_section = _section(profile, "envs", node_file)
    nats_section = _section(profile, "nats", node_file)
    specs = load_env_specs(rootdir, profile, node_file)
    config.hook.pytest_agentgym_add_environments(config=config, specs=specs)

    if values["envs"]:
        unknown = [n for n in values["envs"] if n.lower() not in {s.lower() for s in specs}
                   and not is_verifiers(n)]  # a verifiers environment is known once its suite is read
        if unknown:
            raise pytest.UsageError(
                f"--agentgym-envs: unknown environment(s) {', '.join(unknown)}; "
                f"known: {', '.join(specs)} (configs/envs.yaml)"
            )
    servers_mode = envs_section.get("servers", "spawn")
    if servers_mode not in ("attach", "spawn", "auto"):
        raise pytest.UsageError(
            f"{node_file}: envs.servers is {servers_mode!r}; use 'attach' (servers already run), "
            "'spawn' (start embedded or installed servers on free ports) or 'auto' (attach to "
            "what answers on the configured port, spawn the rest)"
        )
    concurrency = values["concurrency"] or limits.get("concurrency", 1)
    if not isinstance(concurrency, int) or concurrency < 1:
        raise pytest.UsageError(f"{node_file}: limits.concurrency must be a whole number >= 1")
    nats = None if values["no_nats"] else (values["nats"] or nats_section.get("url"))
    reports = Path(values["reports"] or "reports")
    resume, run_id = _resume_target(values, reports)
    if resume is not None:
        reports = resume.parent
    shard, run_id = _shard(values, resume, run_id)
    run_id = run_id or datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    if values["sampling"]:
        from pytest_agentgym.model.client import Sampling

        try:
            Sampling.from_mapping(values["sampling"], where="--agentgym-sampling")
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    node_budget = limits.get("max_error_rate")
    if node_budget is not None and (isinstance(node_budget, bool) or not isinstance(node_budget, (int, float))
                                    or not 0 <= node_budget <= 1):
        raise pytest.UsageError(f"{node_file}: limits.max_error_rate must be a number from 0 to 1, "
                                f"got {node_budget!r}")
    return Settings(
        node=str(profile.get("name", node)),
        node_file=node_file,
        profile=profile,
        env_specs=specs,
        concurrency=concurrency,
        reports=reports,
        run_id=run_id,
        retries=values["retries"] if values["retries"] is not None else 1,
        servers_mode=servers_mode,
        nats=nats,
        command=rerun_command(config, values["seed"]),
        envs=values["envs"],
        tasks=values["tasks"],
        repeat=values["repeat"],
        max_rounds=values["max_rounds"],
        episode_timeout=values["episode_timeout"],
        node_max_rounds=limits.get("max_rounds"),
        node_episode_timeout=float(limits.get("episode_timeout", 300)),
        model=values["model"],
        base_url=values["base_url"],
        api_key_env=values["api_key_env"],
        checkpoint=values["checkpoint"],
        baseline=_baseline_dir(values["baseline"], reports),
        max_drop=values["max_drop"] if values["max_drop"] is not None else 0.05,
        baseline_metric=values["baseline_metric"],
        strict_gates=bool(values["strict_gates"]),
        allow_mismatch=bool(values["allow_mismatch"]),
        seed=values["seed"],
        no_report=bool(values["no_report"]),
        preflight=bool(values["preflight"]),
        list_envs=bool(values["list_envs"]),
        skip_envs=tuple(envs_section.get("skip", ()) or ()),
        sampling=values["sampling"],
        max_error_rate=values["max_error_rate"],
        node_max_error_rate=node_budget,
        resume=resume,
        shard=shard,
        queue=values["queue"],
    )


def _baseline_dir(value: str | None, reports: Path) -> str | None:
    """--agentgym-baseline as a run directory with results, resolved now (``latest``
    names the run it names before this run starts); anything else is a usage error."""
    if not value:
        return None
    from pytest_agentgym.compare import CompareError
    from pytest_agentgym.compare.runs import load_run
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir

    try:
        path = resolve_run_dir(value, reports)
    except LedgerError:  # say what is wrong with the directory the user most likely meant
        named = Path(value) if Path(value).exists() or value == "latest" else reports / value
        path = named if named.exists() else Path(value)
    try:
        load_run(path, "baseline")
    except CompareError as exc:
        raise pytest.UsageError(f"--agentgym-baseline={value}: {exc}") from None
    return str(path.resolve())


def _resume_target(values: dict[str, Any], reports: Path) -> tuple[Path | None, str | None]:
    """The run directory of --agentgym-resume (resolved now, before this run repoints
    ``latest``) and its run id; a different --agentgym-run-id is a usage error."""
    if not values["resume"]:
        return None, values["run_id"]
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir
    from pytest_agentgym.results.store import RunDir

    try:
        path = resolve_run_dir(values["resume"], reports)
    except LedgerError as exc:
        raise pytest.UsageError(f"--agentgym-resume: {exc}") from None
    try:
        run_id = RunDir(path).read_info().run_id
    except (OSError, ValueError, TypeError) as exc:
        raise pytest.UsageError(f"--agentgym-resume={values['resume']}: cannot read {path}/run.json "
                                f"({exc}); it cannot be resumed, start a new run") from None
    if values["run_id"] and values["run_id"] != run_id:
        raise pytest.UsageError(f"--agentgym-run-id={values['run_id']} and --agentgym-resume={values['resume']} "
                                f"(run {run_id}) disagree; leave out --agentgym-run-id when resuming")
    return path, run_id


def _shard(values: dict[str, Any], resume: Path | None, run_id: str | None) -> tuple[Any, str | None]:
    """--agentgym-shard (auto: from the scheduler's variables) and the run id the shards share:
    --agentgym-run-id, else the scheduler's (a Slurm array's job id). A resumed shard keeps its shard."""
    from pytest_agentgym.run import shards

    try:
        shard = shards.resolve(values["shard"], os.environ)
    except shards.ShardError as exc:
        raise pytest.UsageError(str(exc)) from None
    if resume is not None:
        from pytest_agentgym.results.store import RunDir

        was = shards.from_record(RunDir(resume).read_info().shard)
        if shard is None or was is None or (shard.index, shard.count) == (was.index, was.count):
            return shard or was, run_id
        raise pytest.UsageError(f"--agentgym-shard={shard.name} and --agentgym-resume={resume} (shard {was.name}) "
                                f"disagree; leave out --agentgym-shard when resuming a shard")
    if shard is not None and not run_id:
        run_id = shard.run_id
        if not run_id:
            raise pytest.UsageError(f"--agentgym-shard={shard.name} ({shard.source}): the shards of one run share "
                                    f"a run id; give every shard the same --agentgym-run-id=ID (see "
                                    f"docs/scale-out.md)")
    return shard, run_id


SETTINGS_KEY = pytest.StashKey[Settings]()
#: Messages of suite files that could not be loaded (turned into one UsageError).
SUITE_ERRORS_KEY = pytest.StashKey[list]()
#: The run's harness (run.EvaluationRun); created in pytest_configure.
HARNESS_KEY = pytest.StashKey[Any]()
#: Environments the node skips -> how many episodes of theirs were not collected.
NODE_SKIPPED_KEY = pytest.StashKey[dict]()

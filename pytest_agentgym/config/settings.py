"""What a run is asked to do: the run's settings, resolved once into a frozen object.

The values of the ``--agentgym-*`` options come in already read and parsed (the
plugin reads them in one order: command line, ``AGENTGYM_*`` environment
variables, ini keys; plugin/options.py); then (per suite, config/suites.py) the
suite's YAML, then the node profile (config/profile.py), then defaults. Pytest-free:
a bad key or value raises :class:`SettingsError` (or
:class:`~pytest_agentgym.config.profile.ProfileError`) naming where it came from
and the fix; the plugin turns either into a ``pytest.UsageError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from pytest_agentgym.config.profile import NodeProfile
from pytest_agentgym.envs.spec import EnvSpec, is_verifiers


class SettingsError(ValueError):
    """Settings that cannot be used; the message names the option or file and the fix."""


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
    #: server processes per spawned environment without its own ``replicas`` (N or "auto")
    replicas: int | str = 1
    envs: tuple[str, ...] | None = None
    tasks: tuple[int, ...] | None = None
    repeat: int | None = None
    max_rounds: int | None = None
    episode_timeout: float | None = None
    node_max_rounds: int | None = None
    node_episode_timeout: float = 300.0
    model: str | None = None
    base_url: str | None = None
    #: --agentgym-endpoint: the endpoints of the chain whose URL was replaced
    #: (model.endpoint_settings.EndpointOverride); ``profile`` has the new URLs already
    endpoint_overrides: tuple[Any, ...] = ()
    api_key_env: str | None = None
    checkpoint: str | None = None
    #: --agentgym-baseline, resolved to a run directory (before this run repoints latest)
    baseline: str | None = None
    #: --agentgym-baseline as given (messages name it so)
    baseline_given: str | None = None
    max_drop: float = 0.05
    baseline_metric: str | None = None
    strict_gates: bool = False
    allow_mismatch: bool = False
    #: --agentgym-stop-when-decided: an environment stops once its verdicts are decided
    stop_when_decided: bool = False
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
    #: --agentgym-notify: URLs that get the run's summary when it ends (publish/webhook.py)
    notify: tuple[str, ...] = ()
    #: --agentgym-progress: seconds between progress lines, "each", "off"; None: the default
    progress: float | str | None = None

    def spec(self, name: str) -> EnvSpec:
        for known, spec in self.env_specs.items():
            if known.lower() == name.lower():
                return spec
        raise KeyError(name)


def resolve(values: Mapping[str, Any], *, rootdir: Path, command: str,
            add_environments: Callable[[dict[str, EnvSpec]], None] | None = None) -> Settings:
    """The run's settings from the options' ``values`` (option name -> parsed value, None
    when not given). ``add_environments`` lets plugins add environments to the node's."""
    node = values["node"] or "local"
    profile = NodeProfile.load(node, rootdir, flag="--agentgym-node", add_environments=add_environments)
    specs = profile.specs
    if values["envs"]:
        unknown = [n for n in values["envs"] if n.lower() not in {s.lower() for s in specs}
                   and not is_verifiers(n)]  # a verifiers environment is known once its suite is read
        if unknown:
            raise SettingsError(
                f"--agentgym-envs: unknown environment(s) {', '.join(unknown)}; "
                f"known: {', '.join(specs)} (configs/envs.yaml)"
            )
    concurrency = values["concurrency"] or profile.concurrency
    nats = None if values["no_nats"] else (values["nats"] or profile.nats_url)
    reports = Path(values["reports"] or "reports")
    resume, run_id = _resume_target(values, reports)
    if resume is not None:
        reports = resume.parent
    shard, run_id = _shard(values, resume, run_id)
    for given, flag in ((shard, "--agentgym-shard"), (values["queue"], "--agentgym-queue")):
        if given is not None and values["stop_when_decided"]:
            raise SettingsError(f"--agentgym-stop-when-decided and {flag} do not go together: deciding an "
                                f"environment early needs every one of its episodes in one process; drop "
                                f"{flag} or --agentgym-stop-when-decided")
    raw_profile, overrides = _endpoint_overrides(values, profile)
    _checkpoint_served(values, raw_profile, profile, rootdir)
    run_id = run_id or datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    if values["sampling"]:
        from pytest_agentgym.model.call_settings import Sampling

        try:
            Sampling.from_mapping(values["sampling"], where="--agentgym-sampling")
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    return Settings(
        node=profile.name,
        node_file=profile.file,
        profile=raw_profile,
        env_specs=specs,
        concurrency=concurrency,
        reports=reports,
        run_id=run_id,
        retries=values["retries"] if values["retries"] is not None else 1,
        servers_mode=profile.servers_mode,
        replicas=values.get("replicas") or profile.replicas,
        nats=nats,
        command=command,
        envs=values["envs"],
        tasks=values["tasks"],
        repeat=values["repeat"],
        max_rounds=values["max_rounds"],
        episode_timeout=values["episode_timeout"],
        node_max_rounds=profile.max_rounds,
        node_episode_timeout=profile.episode_timeout,
        model=values["model"],
        base_url=values["base_url"],
        endpoint_overrides=overrides,
        api_key_env=values["api_key_env"],
        checkpoint=values["checkpoint"],
        baseline=_baseline_dir(values["baseline"], reports),
        baseline_given=values["baseline"],
        max_drop=values["max_drop"] if values["max_drop"] is not None else 0.05,
        baseline_metric=values["baseline_metric"],
        strict_gates=bool(values["strict_gates"]),
        allow_mismatch=bool(values["allow_mismatch"]),
        stop_when_decided=bool(values["stop_when_decided"]),
        seed=values["seed"],
        no_report=bool(values["no_report"]),
        preflight=bool(values["preflight"]),
        list_envs=bool(values["list_envs"]),
        skip_envs=profile.skip,
        sampling=values["sampling"],
        max_error_rate=values["max_error_rate"],
        node_max_error_rate=profile.max_error_rate,
        resume=resume,
        shard=shard,
        queue=values["queue"],
        notify=values.get("notify") or (),
        progress=values.get("progress"),
    )


def for_node(profile: NodeProfile, *, concurrency: int | None, reports: Path, command: str,
             run_id: str = "worker", replicas: int | str | None = None) -> Settings:
    """Settings for a front door without pytest's options (the queue worker): what the node
    profile says; what an episode is comes with each request."""
    return Settings(
        node=profile.name, node_file=profile.file, profile=profile.raw, env_specs=profile.specs,
        concurrency=concurrency or profile.concurrency, reports=reports, run_id=run_id, retries=1,
        servers_mode=profile.servers_mode, replicas=replicas or profile.replicas, nats=None, command=command,
        skip_envs=profile.skip,
        node_max_rounds=profile.max_rounds, node_episode_timeout=profile.episode_timeout,
        node_max_error_rate=profile.max_error_rate)


def _endpoint_overrides(values: Mapping[str, Any], profile: NodeProfile) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The node's raw profile with --agentgym-endpoint's URLs in its model chain, and the
    overrides (model/endpoint_settings.py ``override_urls``); the profile as it is without it."""
    pairs = values.get("endpoint")
    if not pairs:
        return profile.raw, ()
    given_by = values.get("endpoint_given_by") or "--agentgym-endpoint"
    for other, flag in ((values["base_url"], "--agentgym-base-url"), (values["queue"], "--agentgym-queue")):
        if other is not None:
            why = ("replaces the whole chain with one endpoint" if flag == "--agentgym-base-url"
                   else "has the workers play with the endpoints of their own node profiles")
            raise SettingsError(f"{given_by} and {flag} do not go together: {flag} {why}; drop one of them")
    from pytest_agentgym.model.endpoint_settings import EndpointConfigError, override_urls

    try:
        return override_urls(profile.raw, pairs, given_by=given_by, where=f"node {profile.name} ({profile.file})")
    except EndpointConfigError as exc:
        raise SettingsError(str(exc)) from None


def _launches_checkpoints(raw_profile: Mapping[str, Any]) -> bool | None:
    """Whether a profile's model chain has a ``vllm`` entry without a URL, the one that
    --agentgym-checkpoint launches (model/endpoint_settings.py ``with_checkpoint``); None
    when the chain is not a list of entries (the model section's own check says why)."""
    model = raw_profile.get("model")
    endpoints = model.get("endpoints") if isinstance(model, Mapping) else None
    if not isinstance(endpoints, list) or not all(isinstance(e, Mapping) for e in endpoints):
        return None
    return any(e.get("kind") == "vllm" and e.get("url") is None for e in endpoints)


def _checkpoint_served(values: Mapping[str, Any], raw_profile: Mapping[str, Any], profile: NodeProfile,
                       rootdir: Path) -> None:
    """--agentgym-checkpoint on a chain that would not play it is a usage error naming the node
    and the nodes that serve checkpoints (else the run is a green run of another model)."""
    checkpoint = values["checkpoint"]
    if not checkpoint or values["queue"] is not None:  # a queue's workers play with their own nodes
        return
    if values["base_url"] is not None:
        raise SettingsError(f"--agentgym-checkpoint={checkpoint} and --agentgym-base-url do not go together: "
                            f"--agentgym-base-url replaces the chain with one endpoint, which serves its own "
                            f"model; drop one of them")
    if _launches_checkpoints(raw_profile) is not False:
        return
    from pytest_agentgym.config.profile import ProfileError, find_node_file, known_nodes, read_profile

    serving = []
    for name in known_nodes(rootdir):
        try:
            if _launches_checkpoints(read_profile(find_node_file(name, rootdir))):
                serving.append(name)
        except ProfileError:
            continue
    chain = ", ".join(f"{e.get('kind')}" + (" (attached)" if e.get("kind") == "vllm" else "")
                      for e in raw_profile["model"]["endpoints"])
    where = (f"Nodes that serve checkpoints: {', '.join(serving)}; run on one (--agentgym-node={serving[0]})"
             if serving else "No node here serves checkpoints: give one a model entry {kind: vllm} (docs/model.md)")
    raise SettingsError(f"--agentgym-checkpoint={checkpoint}: node {profile.name} ({profile.file}) serves no "
                        f"checkpoint (its model chain: {chain}; only a vllm entry without a url launches one), "
                        f"so the run would play another model. {where}, or drop --agentgym-checkpoint")


def _baseline_dir(value: str | None, reports: Path) -> str | None:
    """--agentgym-baseline as a run directory, resolved now (``latest`` names the run it
    names before this run starts). Whether it holds results is checked by the run
    (run/checks.py ``baseline_usable``), which can read runs."""
    return str(baseline_as_named(value, reports).resolve()) if value else None


def baseline_as_named(value: str, reports: Path) -> Path:
    """The run directory --agentgym-baseline=``value`` names, as the user would write it
    (messages show it so), or the path the user most likely meant when it names none."""
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir

    try:
        return resolve_run_dir(value, reports)
    except LedgerError:  # say what is wrong with the directory the user most likely meant
        named = Path(value) if Path(value).exists() or value == "latest" else reports / value
        return named if named.exists() else Path(value)


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
        raise SettingsError(f"--agentgym-resume: {exc}") from None
    try:
        run_id = RunDir(path).read_info().run_id
    except (OSError, ValueError, TypeError, AttributeError) as exc:  # AttributeError: a JSON list
        raise SettingsError(f"--agentgym-resume={values['resume']}: cannot read {path}/run.json "
                                f"({exc}); it cannot be resumed, start a new run") from None
    if values["run_id"] and values["run_id"] != run_id:
        raise SettingsError(f"--agentgym-run-id={values['run_id']} and --agentgym-resume={values['resume']} "
                                f"(run {run_id}) disagree; leave out --agentgym-run-id when resuming")
    return path, run_id


def _shard(values: dict[str, Any], resume: Path | None, run_id: str | None) -> tuple[Any, str | None]:
    """--agentgym-shard (auto: from the scheduler's variables) and the run id the shards share:
    --agentgym-run-id, else the scheduler's (a Slurm array's job id). A resumed shard keeps its shard."""
    from pytest_agentgym.config import shard as shards

    try:
        shard = shards.resolve(values["shard"], os.environ)
    except shards.ShardError as exc:
        raise SettingsError(str(exc)) from None
    if resume is not None:
        from pytest_agentgym.results.store import RunDir

        was = shards.from_record(RunDir(resume).read_info().shard)
        if shard is None or was is None or (shard.index, shard.count) == (was.index, was.count):
            return shard or was, run_id
        raise SettingsError(f"--agentgym-shard={shard.name} and --agentgym-resume={resume} (shard {was.name}) "
                                f"disagree; leave out --agentgym-shard when resuming a shard")
    if shard is not None and not run_id:
        run_id = shard.run_id
        if not run_id:
            raise SettingsError(f"--agentgym-shard={shard.name} ({shard.source}): the shards of one run share "
                                    f"a run id; give every shard the same --agentgym-run-id=ID (see "
                                    f"docs/scale-out.md)")
    return shard, run_id

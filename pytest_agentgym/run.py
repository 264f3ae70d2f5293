"""One evaluation run: servers, endpoint, engine, results, events, gates, report.

:class:`EvaluationRun` is what the plugin drives; it imports nothing of pytest
(the plugin hands it the settings and the items' facts). Under pytest-xdist the
controller's instance owns the servers and the endpoint and hands their
addresses to the workers (:meth:`worker_input`); each worker's instance runs the
episodes of the items it is given.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from pytest_agentgym import __version__
from pytest_agentgym.aggregate import EnvSummary, summarize
from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.base import EnvAdapter
from pytest_agentgym.episode import Completion, EpisodeLimits, EpisodeRequest
from pytest_agentgym.gates import Gate, GateVerdict, check, check_baseline
from pytest_agentgym.results import EpisodeRecord, ErrorInfo, RunInfo
from pytest_agentgym.store import RunDir, point_latest


class ModelAdapter:
    """Gives the episode loop the ``ChatModel`` it expects, over an EndpointClient."""

    def __init__(self, client: Any, base_sampling: Any) -> None:
        self._client = client
        self._base = base_sampling
        self.name = client.model
        self._cache: dict[tuple, Any] = {}

    def _sampling(self, overrides: dict[str, Any]) -> Any:
        key = tuple(sorted((k, str(v)) for k, v in overrides.items()))
        if key not in self._cache:
            from pytest_agentgym.model.client import Sampling

            base = {k: v for k, v in dataclasses.asdict(self._base).items() if v is not None}
            self._cache[key] = Sampling.from_mapping({**base, **overrides}, where="suite sampling")
        return self._cache[key]

    async def complete(self, messages: Sequence[dict[str, str]], *, budget_s: float,
                       sampling: dict[str, Any]) -> Completion:
        reply = await self._client.chat(messages, sampling=self._sampling(sampling), budget=budget_s)
        return Completion(reply.text, reply.latency_s, reply.prompt_tokens, reply.completion_tokens)

    async def aclose(self) -> None:
        await self._client.aclose()


def _model_name_for(kind: str, model: str) -> str:
    """--agentgym-model for one endpoint: TensorZero wants ``tensorzero::model_name::X``."""
    if kind == "tensorzero" and not model.startswith("tensorzero::"):
        return f"tensorzero::model_name::{model}"
    return model


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class EvaluationRun:
    def __init__(self, settings: Any, *, hook: Any = None, config: Any = None,
                 worker_input: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.hook = hook
        self.config = config
        self.worker = worker_input
        self.run_dir = RunDir(Path(settings.reports).resolve() / settings.run_id)
        self.gates: dict[str, tuple[Gate, ...]] = {}
        #: env -> suite file (relative), for the node ids of gate reports
        self.gate_paths: dict[str, str] = {}
        self.info: RunInfo | None = None
        self.summaries: dict[str, EnvSummary] = {}
        self.verdicts: list[GateVerdict] = []
        self.reported: list[EpisodeRecord] = []
        self._chosen = None  # model.endpoints.ChosenEndpoint
        self._model_settings = None
        self._pool = None  # servers.lifecycle.ServerPool
        self._env_urls: dict[str, str] = {}
        self._engine = None
        self._publisher = None
        self._adapters: dict[str, EnvAdapter] = {}
        self._started = False
        self._finished = False
        #: why no episode can run at all (no endpoint), or on one environment (no server)
        self._setup_error: ErrorInfo | None = None
        self._env_errors: dict[str, ErrorInfo] = {}
        self._failed_futures: dict[str, concurrent.futures.Future[EpisodeRecord]] = {}
        self._prefetch = True
        if worker_input is not None:
            self.run_dir = RunDir(worker_input["agentgym_run_dir"])
            self._env_urls = dict(worker_input["agentgym_env_urls"])
            self._prefetch = False

    # -- the model endpoint ---------------------------------------------------------

    def model_settings(self) -> Any:
        if self._model_settings is None:
            from pytest_agentgym.model.endpoints import ModelSettings, parse_endpoint

            s = self.settings
            where = str(s.node_file)
            ms = ModelSettings.from_profile(s.profile, where=where)
            if s.base_url:
                endpoint = parse_endpoint({"kind": "openai", "url": s.base_url, "model": s.model or "default"},
                                          "--agentgym-base-url")
                ms = dataclasses.replace(ms, endpoints=(endpoint,))
            elif s.model:
                primary, *fallbacks = ms.endpoints  # the fallbacks keep their own models
                primary = dataclasses.replace(primary, model=_model_name_for(primary.kind, s.model))
                ms = dataclasses.replace(ms, endpoints=(primary, *fallbacks))
            if s.checkpoint:
                ms = ms.with_checkpoint(s.checkpoint)
            if s.api_key_env:
                ms = dataclasses.replace(ms, api_key_env=s.api_key_env)
            if s.seed is not None and ms.sampling.seed is None:
                ms = dataclasses.replace(ms, sampling=dataclasses.replace(ms.sampling, seed=s.seed))
            self._model_settings = ms
        return self._model_settings

    def ensure_endpoint(self) -> Any:
        if self._chosen is None:
            from pytest_agentgym.model.endpoints import choose_endpoint

            if self.worker is not None:
                from pytest_agentgym.model.endpoints import EndpointConfig, ChosenEndpoint

                w = self.worker
                config = EndpointConfig(kind=w["agentgym_endpoint_kind"], url=w["agentgym_endpoint_url"],
                                        model=w["agentgym_model"])
                self._chosen = ChosenEndpoint(config, w["agentgym_base_url"], w["agentgym_model"])
            else:
                self.run_dir.logs.mkdir(parents=True, exist_ok=True)
                self._chosen = choose_endpoint(self.model_settings(), log_dir=self.run_dir.logs)
        return self._chosen

    def _endpoint_or_error(self) -> Any:
        """The chosen endpoint, or None with ``_setup_error`` saying why there is none."""
        if self._setup_error is not None:
            return None
        try:
            return self.ensure_endpoint()
        except Exception as exc:  # noqa: BLE001 - NoEndpointAvailable, LaunchError, ...
            self._setup_error = ErrorInfo.from_exception(exc, "model")
            return None

    def header_lines(self, probe: bool) -> list[str]:
        s = self.settings
        lines = [f"agentgym: node {s.node} ({s.node_file}), run {s.run_id}, seed {s.seed if s.seed is not None else 'none'}"]
        if probe:
            chosen = self._endpoint_or_error()
            if chosen is None:
                lines.append(f"agentgym: NO MODEL ENDPOINT, every episode will be an error: "
                             f"{self._setup_error.message}")
            else:
                lines.append(f"agentgym: model {chosen.model} via {chosen.kind} at {chosen.base_url}")
                lines.extend(f"agentgym: endpoint: {note}" for note in chosen.notes)
        else:
            first = self.model_settings().endpoints[0]
            lines.append(f"agentgym: model endpoint {first.describe()} (not contacted)")
        lines.append(f"agentgym: rerun with: {s.command}")
        return lines

    # -- environment servers ----------------------------------------------------------

    def start_envs(self, names: Iterable[str]) -> None:
        if self.worker is not None:
            return
        from pytest_agentgym.servers.lifecycle import ServerPool

        s = self.settings
        if self._pool is None:
            specs = dict(s.env_specs)
            if s.servers_mode == "attach":
                specs = {n: sp if sp.url else sp.with_overrides(url=sp.default_url()) for n, sp in specs.items()}
            self.run_dir.logs.mkdir(parents=True, exist_ok=True)
            # spawn: always fresh servers on free ports; auto: attach to what answers on
            # the configured port, spawn the rest; attach: every URL must already answer.
            self._pool = ServerPool(specs, log_dir=self.run_dir.logs,
                                    attach_running=s.servers_mode == "auto")
        from pytest_agentgym.servers.lifecycle import ServerError

        for name in names:
            if name not in self._env_urls and name not in self._env_errors:
                try:
                    self._env_urls[name] = self._pool.start(name).url
                except (ServerError, OSError) as exc:
                    self._env_errors[name] = ErrorInfo.from_exception(exc, "env")

    async def _before_retry(self, env: str, error: ErrorInfo) -> None:
        """Restart a spawned server that died before the episode is tried again."""
        if self._pool is not None and error.where == "env":
            await asyncio.to_thread(self._pool.ensure, env)

    # -- starting the run ------------------------------------------------------------------

    def _adapter(self, name: str) -> EnvAdapter:
        if name not in self._adapters:
            spec = self.settings.spec(name)
            self._adapters[name] = adapter_class(name)(spec.prompt_template)
        return self._adapters[name]

    def _begin(self, env_names: Sequence[str]) -> None:
        """Servers, endpoint, run directory, events: once per process."""
        if self._started:
            return
        self._started = True
        chosen = self._endpoint_or_error()
        self.start_envs(env_names)
        for name in env_names:
            self._adapter(name)
        s = self.settings
        if self.worker is None:
            self.run_dir = RunDir.create(self.run_dir.path.parent, s.run_id)
            self.info = RunInfo(
                run_id=s.run_id, started_at=_now(), node=s.node,
                model=chosen.model if chosen else "none", endpoint=chosen.base_url if chosen else "none",
                endpoint_kind=chosen.kind if chosen else "none", environments=tuple(env_names),
                command=s.command, seed=s.seed, checkpoint=s.checkpoint,
                settings=self._settings_snapshot(), versions=self._versions(),
                git_commit=_git_commit(), baseline=s.baseline,
                notes=tuple(chosen.notes) if chosen else (f"no model endpoint: {self._setup_error.message}",),
            )
            self.run_dir.write_info(self.info)
            point_latest(self.run_dir.path.parent, s.run_id)
            self._start_publisher()
        if chosen is None:
            return  # every episode becomes an error record (see submit)
        ms = self.model_settings() if self.worker is None else None
        concurrency = s.concurrency if self._prefetch else 1

        def model_factory() -> ModelAdapter:
            from pytest_agentgym.model.client import EndpointClient, RetryPolicy, Sampling

            if ms is not None:
                client = ms.client(chosen)
                return ModelAdapter(client, ms.sampling)
            w = self.worker
            sampling = Sampling.from_mapping(w["agentgym_sampling"])
            client = EndpointClient(chosen.base_url, chosen.model, api_key_env=w["agentgym_api_key_env"],
                                    sampling=sampling, request_timeout=w["agentgym_request_timeout"],
                                    retry=RetryPolicy(retries=w["agentgym_model_retries"]))
            return ModelAdapter(client, sampling)

        from pytest_agentgym.engine import Engine

        self._engine = Engine(concurrency=concurrency, model_factory=model_factory,
                              adapters=self._adapters, env_urls=self._env_urls,
                              before_retry=self._before_retry, on_finished=self._episode_finished)

    def _settings_snapshot(self) -> dict[str, Any]:
        s = self.settings
        keep = ("node", "envs", "tasks", "repeat", "max_rounds", "episode_timeout", "concurrency",
                "model", "base_url", "checkpoint", "baseline", "max_drop", "seed", "retries",
                "nats", "servers_mode", "node_max_rounds", "node_episode_timeout")
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in
                ((k, getattr(s, k)) for k in keep)} | {"node_file": str(s.node_file)}

    def _versions(self) -> dict[str, str]:
        versions = {"pytest-agentgym": __version__, "python": platform.python_version()}
        for name, url in self._env_urls.items():
            versions[f"server:{name}"] = url
        return versions

    def start_for_paths(self, paths: Sequence[str]) -> None:
        """xdist controller: start what the suites under ``paths`` need, before workers start."""
        from pytest_agentgym.collect import suites_under

        envs: list[str] = []
        for suite in suites_under(list(paths), self.settings):
            self.gates.setdefault(suite.environment, suite.gates)
            self.gate_paths.setdefault(suite.environment, self._node_path(suite.path))
            if suite.environment not in envs:
                envs.append(suite.environment)
        self._begin(envs)

    def _node_path(self, path: Path) -> str:
        """``path`` as pytest writes it in node ids (relative to the rootdir, '/'-separated),
        so a gate has the same id with and without xdist."""
        root = Path(self.config.rootpath) if self.config is not None else Path.cwd()
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return path.as_posix()

    def worker_input(self) -> dict[str, Any]:
        chosen = self.ensure_endpoint()
        ms = self.model_settings()
        return {
            "agentgym_run_id": self.settings.run_id,
            "agentgym_run_dir": str(self.run_dir.path),
            "agentgym_env_urls": dict(self._env_urls),
            "agentgym_endpoint_kind": chosen.kind,
            "agentgym_endpoint_url": chosen.config.url,
            "agentgym_base_url": chosen.base_url,
            "agentgym_model": chosen.model,
            "agentgym_api_key_env": ms.key_env(chosen.config),
            "agentgym_sampling": {k: v for k, v in dataclasses.asdict(ms.sampling).items() if v is not None},
            "agentgym_request_timeout": ms.request_timeout,
            "agentgym_model_retries": ms.retries,
        }

    # -- episodes -----------------------------------------------------------------------

    def request_for(self, item: Any) -> EpisodeRequest:
        s, suite = self.settings, item.suite
        spec = s.spec(suite.environment)
        if s.max_rounds is not None:
            rounds = s.max_rounds
        else:
            rounds = suite.max_rounds or spec.max_rounds
            if s.node_max_rounds:
                rounds = min(rounds, s.node_max_rounds)
        timeout = s.episode_timeout or suite.episode_timeout or s.node_episode_timeout
        return EpisodeRequest(
            run_id=s.run_id, spec=spec, task_index=item.task_index, repeat=item.repeat,
            limits=EpisodeLimits(max_rounds=rounds, timeout_s=timeout, retries=s.retries),
            min_reward=suite.min_reward, nodeid=item.nodeid, node=s.node, checkpoint=s.checkpoint,
            sampling=dict(suite.sampling),
        )

    def prepare(self, items: Sequence[Any]) -> None:
        """Start what the items need; without xdist, queue every episode at once so
        the engine runs up to ``concurrency`` of them ahead of the items."""
        runnable = [i for i in items if not i.get_closest_marker("skip")]
        for item in items:
            self.gates.setdefault(item.suite.environment, item.suite.gates)
            self.gate_paths.setdefault(item.suite.environment, item.nodeid.split("::")[0])
        envs = list(dict.fromkeys(i.suite.environment for i in runnable))
        if not envs:
            return
        self._begin(envs)
        if self._prefetch:
            for item in runnable:
                self.submit(item.nodeid, self.request_for(item))

    def result(self, item: Any) -> EpisodeRecord:
        """Block until the item's episode has finished and return its record."""
        if not self._started:
            self._begin([item.suite.environment])
        if item.suite.environment not in self._adapters:
            self.start_envs([item.suite.environment])
            self._adapter(item.suite.environment)
        return self.submit(item.nodeid, self.request_for(item)).result()

    def play(self, key: str, env: str, task_index: int, *, repeat: int, max_rounds: int | None,
             episode_timeout: float | None, sampling: dict[str, Any], min_reward: float | None,
             nodeid: str) -> EpisodeRecord:
        """One episode for the ``agentgym_episode`` fixture; blocks until it ends."""
        s = self.settings
        try:
            spec = s.spec(env)
        except KeyError:
            raise ValueError(f"unknown environment {env!r}; known: {', '.join(s.env_specs)}") from None
        if not self._started:
            self._begin([spec.name])
        if spec.name not in self._adapters:
            self.start_envs([spec.name])
            self._adapter(spec.name)
        rounds = max_rounds or min(spec.max_rounds, s.node_max_rounds or spec.max_rounds)
        request = EpisodeRequest(
            run_id=s.run_id, spec=spec, task_index=task_index, repeat=repeat,
            limits=EpisodeLimits(max_rounds=s.max_rounds or rounds,
                                 timeout_s=s.episode_timeout or episode_timeout or s.node_episode_timeout,
                                 retries=s.retries),
            min_reward=min_reward, nodeid=nodeid, node=s.node, checkpoint=s.checkpoint,
            sampling=dict(sampling),
        )
        record = self.submit(key, request).result()
        if self.worker is None:
            self.episode_reported(record.to_dict())
        return record

    def submit(self, key: str, request: EpisodeRequest) -> concurrent.futures.Future[EpisodeRecord]:
        """Queue an episode; when its endpoint or server could not be had, its record
        is an error at once (written like any other), and nothing is contacted."""
        error = self._setup_error or self._env_errors.get(request.spec.name)
        if error is None and self._engine is not None:
            return self._engine.submit(key, request)
        if key not in self._failed_futures:
            error = error or ErrorInfo("RuntimeError", "the engine did not start", "harness")
            record = EpisodeRecord(
                run_id=request.run_id, env=request.spec.name, task_index=request.task_index,
                repeat=request.repeat, reward=None, success=False, rounds=0, stop_reason="error",
                started_at=_now(), duration_s=0.0, model=self.info.model if self.info else "none",
                error=error, min_reward=request.min_reward, outcome="error", nodeid=request.nodeid,
                checkpoint=request.checkpoint, node=request.node,
            )
            self._episode_finished(record)
            future: concurrent.futures.Future[EpisodeRecord] = concurrent.futures.Future()
            future.set_result(record)
            self._failed_futures[key] = future
        return self._failed_futures[key]

    def _episode_finished(self, record: EpisodeRecord) -> None:
        """Engine thread: the episode is on disk before anything else happens."""
        self.run_dir.append_episode(record)

    def episode_reported(self, data: dict[str, Any]) -> None:
        """Controller: an item's report arrived with its record."""
        record = EpisodeRecord.from_dict(data)
        self.reported.append(record)
        if self._publisher is not None:
            from pytest_agentgym.events import episode_completed

            self._publisher.publish(episode_completed(record, node=self.settings.node,
                                                      checkpoint=self.settings.checkpoint))
        if self.hook is not None:
            self.hook.pytest_agentgym_episode_finished(config=self.config, record=record)

    # -- events ---------------------------------------------------------------------------

    def _start_publisher(self) -> None:
        url = self.settings.nats
        if not url:
            return
        from pytest_agentgym.events import field_status
        from pytest_agentgym.publish.publisher import EventPublisher

        nats = self.settings.profile.get("nats") or {}
        self._publisher = EventPublisher(url, self.run_dir.path / "outbox.jsonl",
                                         create_stream=bool(nats.get("create_stream", False)))
        notes = self._publisher.start()
        if notes and self.info is not None:
            self.info = dataclasses.replace(self.info, notes=self.info.notes + tuple(notes))
            self.run_dir.write_info(self.info)
        self._publisher.publish(field_status(self.info, "started", {}))

    # -- the end of the run -------------------------------------------------------------------

    def finish(self, exitstatus: int, interrupted: bool = False) -> list[GateVerdict]:
        """Controller: aggregate, check gates, write run.json, events and the report.
        Returns the failed verdicts. Safe to call when nothing ran."""
        if self._finished or not self._started or self.worker is not None:
            return []
        self._finished = True
        if self._engine is not None:
            self._engine.close()
        records = [r for r in self.run_dir.read_episodes() if r.run_id == self.settings.run_id]
        self.summaries = summarize(records)
        self.verdicts = self._check_gates()
        status = "interrupted" if interrupted else ("failed" if exitstatus in (3, 4) else "finished")
        counts = {
            "episodes": len(records),
            "passed": sum(1 for r in records if r.outcome == "passed"),
            "failed": sum(1 for r in records if r.outcome == "failed"),
            "errors": sum(1 for r in records if r.outcome == "error"),
            "gates_failed": sum(1 for v in self.verdicts if not v.passed),
        }
        assert self.info is not None
        self.info = dataclasses.replace(self.info, ended_at=_now(), status=status, counts=counts,
                                        gates=tuple(v.to_dict() for v in self.verdicts),
                                        versions=self._versions())
        self.run_dir.write_info(self.info)
        self._publish_end(status, counts)
        if not self.settings.no_report:
            self._write_report()
        if self.hook is not None:
            self.hook.pytest_agentgym_run_finished(config=self.config, summaries=self.summaries,
                                                   verdicts=self.verdicts)
        self._stop_processes()
        return [v for v in self.verdicts if not v.passed]

    def _check_gates(self) -> list[GateVerdict]:
        verdicts = [check(gate, self.summaries[env]) for env, gates in self.gates.items()
                    if env in self.summaries for gate in gates]
        if self.settings.baseline:
            baseline_dir = RunDir(self.settings.baseline)
            base = summarize(baseline_dir.read_episodes())
            for env, summary in self.summaries.items():
                verdicts.append(check_baseline(summary, base.get(env), self.settings.max_drop))
        return verdicts

    def _publish_end(self, status: str, counts: dict[str, int]) -> None:
        if self._publisher is None:
            return
        from pytest_agentgym.events import batch_completed, field_status

        for env, summary in self.summaries.items():
            self._publisher.publish(batch_completed(
                self.settings.run_id, summary, [v for v in self.verdicts if v.env == env],
                node=self.settings.node, model=self.info.model, checkpoint=self.settings.checkpoint))
        self._publisher.publish(field_status(self.info, status, counts))
        self.publish_stats = self._publisher.close(timeout=5.0)
        self._publisher = None

    def _write_report(self) -> None:
        from pytest_agentgym.report.render import render_run_dir

        try:
            self.report_path = render_run_dir(self.run_dir.path)
        except Exception as exc:  # noqa: BLE001 - the results are safe; say what went wrong
            self.report_error = f"{type(exc).__name__}: {exc}"

    def _stop_processes(self) -> None:
        if self._pool is not None:
            self._pool.stop_all()
            self._pool = None
        if self._chosen is not None and self.worker is None:
            self._chosen.close()

    def shutdown(self) -> None:
        """Last resort at unconfigure: nothing may outlive the run."""
        if self._engine is not None:
            self._engine.close()
        if self._publisher is not None:
            self._publisher.close(timeout=2.0)
            self._publisher = None
        self._stop_processes()

    # -- the terminal summary -------------------------------------------------------------------

    def summary_lines(self) -> list[tuple[str, dict[str, bool]]]:
        if not self._finished:
            return []
        lines: list[tuple[str, dict[str, bool]]] = [("", {})]
        lines.append((f"{'environment':<12} {'episodes':>8} {'mean reward (95% CI)':>26} {'success':>8} "
                      f"{'rounds':>6} {'errors':>6} {'tokens':>9} {'wall s':>8}", {"bold": True}))
        for env, s in self.summaries.items():
            reward = "-" if s.mean_reward is None else (
                f"{s.mean_reward:.3f} [{s.reward_ci95[0]:.3f}, {s.reward_ci95[1]:.3f}]")
            success = "-" if s.success_rate is None else f"{s.success_rate:.0%}"
            rounds = "-" if s.mean_rounds is None else f"{s.mean_rounds:.1f}"
            lines.append((f"{env:<12} {s.episodes:>8} {reward:>26} {success:>8} {rounds:>6} "
                          f"{s.errors:>6} {s.prompt_tokens + s.completion_tokens:>9} {s.wall_s:>8.1f}", {}))
        for v in self.verdicts:
            word = "GATE PASSED" if v.passed else "GATE FAILED"
            lines.append((f"{word}: {v.env} {v.gate}: {v.detail}", {"green": v.passed, "red": not v.passed}))
        lines.append((f"agentgym results: {self.run_dir.episodes_file}", {}))
        stats = getattr(self, "publish_stats", None)
        if stats is not None and (getattr(stats, "outboxed", 0) or getattr(stats, "lost", 0)):
            lines.append((f"agentgym events: {stats.outboxed} kept in {self.run_dir.path / 'outbox.jsonl'}"
                          f" (deliver with `pytest-agentgym publish-outbox {self.run_dir.path}`)",
                          {"yellow": True}))
        if getattr(self, "report_path", None):
            lines.append((f"agentgym report: {self.report_path}", {}))
        if getattr(self, "report_error", None):
            lines.append((f"agentgym report could not be written: {self.report_error}; "
                          f"render it later with `pytest-agentgym report {self.run_dir.path}`", {"yellow": True}))
        return lines

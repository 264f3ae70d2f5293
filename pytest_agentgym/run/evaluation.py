"""One evaluation run: what it runs, what it records, what it concludes.

:class:`EvaluationRun` is what the plugin drives; it imports nothing of pytest
(the plugin hands it the settings and the items' facts). It holds the run's flow
through its phases and ties three parts:

* :class:`~pytest_agentgym.run.services.RunResources`: the endpoint, the servers,
  the engine and the publisher (what runs);
* :class:`~pytest_agentgym.results.ledger.RunLedger`: run.json and episodes.jsonl, the
  status, resume (what is recorded);
* gates and the report at the end (what is concluded), see :meth:`finish`.

What each phase decides or writes is a sibling's: the episodes the command line
selects (``selection``), the start of the records (``opening``), the episodes that
cannot be played (``not_played``), stopping early (``stopping.RunStops``), the
verdicts at the end (``judging``) and what is written then (``ending``).

Under pytest-xdist the controller's instance owns the servers and the endpoint
and hands their addresses to the workers (:meth:`worker_input`); each worker's
instance runs the episodes of the items it is given.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pytest_agentgym.results.aggregate import EnvSummary
from pytest_agentgym.envs import adapter_class
from pytest_agentgym.results.gates import GateVerdict
from pytest_agentgym.results.ledger import RunLedger
from pytest_agentgym.run.services import RunResources
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.run import ending, judging, not_played, opening
from pytest_agentgym.run.selection import Choose, node_path, selected_episodes
from pytest_agentgym.run.plans import EnvPlan, plan_for
from pytest_agentgym.run.requests import RequestRules

if TYPE_CHECKING:  # the environment client (httpx, jinja2) is imported after warm_up
    # has spawned the servers, where the first episode is made
    from pytest_agentgym.envs.base import EnvAdapter
    from pytest_agentgym.engine.episode import EpisodeRequest
    from pytest_agentgym.run.stopping import RunStops, Stop, Stopper


class RunAborted(RuntimeError):
    """The run cannot go on (its results cannot be written); the message says why and what to do."""


class EvaluationRun:
    def __init__(self, settings: Any, *, hook: Any = None, config: Any = None,
                 worker_input: dict[str, Any] | None = None, ledger: RunLedger | None = None) -> None:
        self.settings = settings
        self.hook = hook
        self.config = config
        self.worker = worker_input
        if worker_input is not None:
            ledger = RunLedger.for_worker(RunDir(worker_input["agentgym_run_dir"]),
                                          worker_input["agentgym_generation"])
        self.ledger = ledger or RunLedger(RunDir(Path(settings.reports).resolve() / settings.run_id))
        self.resources = RunResources(settings, log_dir=self.ledger.run_dir.logs, worker_input=worker_input)
        self.resources.generation, self.resources.run_dir = self.ledger.generation, str(self.run_dir.path)
        #: env -> what the suites ask of it (gates, budget, rounds, sampling)
        self.plans: dict[str, EnvPlan] = {}
        self.summaries: dict[str, EnvSummary] = {}
        self.verdicts: list[GateVerdict] = []
        self.status: str | None = None
        #: notices of the start (NATS/JetStream), for the plugin to show once per machine
        self.start_notices: list = []
        self.abort_reason: str | None = None
        #: an exception the end of the run did not expect (the baseline comparison's), told in one line
        self.internal_error: str | None = None
        self._adapters: dict[str, EnvAdapter] = {}
        self._rules: RequestRules | None = None
        self._began = False
        self._finished = False
        #: the episodes whose endpoint or server could not be had: their error records (run/not_played.py)
        self._not_played = not_played.NotPlayed(self._episode_finished)
        #: (env, task, repeat) of the episodes this run selected (the baseline check compares them)
        self.planned_keys: set[tuple[str, int, int]] = set()
        #: the paired comparisons with the baseline made at the end (pytest_agentgym.compare)
        self.comparisons: list = []
        #: a shard (--agentgym-shard): the whole selection's keys -> expected cost, before the split
        self.selection: dict[tuple[str, int, int], float] | None = None
        #: the command line's paths hold suites (warm_up): only then is an endpoint chosen
        self.has_suites = True
        #: why the run was stopped early (Ctrl-C, SIGTERM), set at once: a second Ctrl-C cannot hide it
        self.interrupted_by: str | None = None
        #: why the gates were not judged (the run is partial), or None
        self.partial: str | None = None
        #: the --agentgym-notify URLs that did not take the run's summary (publish/webhook.py)
        self.notify_problems: list[str] = []
        #: --agentgym-stop-when-decided: the stopper and the items its stops leave unplayed
        #: (run/stopping.py), started by prepare
        self.stops_early: RunStops | None = None

    @property
    def run_dir(self) -> RunDir:
        return self.ledger.run_dir

    @property
    def info(self) -> RunInfo | None:
        return self.ledger.info

    # -- the model endpoint ---------------------------------------------------------

    def model_settings(self) -> Any:
        return self.resources.model_settings()

    def warm_up(self, choose: Choose | None = None) -> None:
        """At configure time, for the first episode's sake: launch the servers of the
        suites named on the command line without waiting, so they boot while pytest
        imports and collects; read the model settings (a bad ``model:`` section raises
        EndpointConfigError now); then launch the reference agent too when it is the
        first endpoint. The first episode waits for the slowest process, not the sum.
        Nothing is launched when those paths hold no suite (the plugin is installed,
        but this run is of other tests), nor for an environment that ``choose`` (the
        command line's -k, -m, --deselect, --lf) leaves no episode of."""
        from pytest_agentgym.config.suites import suites_under

        try:
            paths = [str(a) for a in self.config.args] if self.config is not None else []
            found = suites_under(paths, self.settings)
        except OSError:
            found = []  # collection will say what is wrong with the paths
        self.has_suites = bool(found)
        selected = selected_episodes(found, self.settings, choose, getattr(self.config, "rootpath", None))
        envs = list(dict.fromkeys(env for _path, env, _task, _repeat in selected))
        if envs:
            self.resources.warm_up(envs)
        self.model_settings()
        if self.has_suites:
            self.resources.spawn_endpoint_ahead()

    def start(self) -> None:
        """The start phase (before the header is printed): choose the model endpoint
        (health probes, the fallback chain, a reference agent or vLLM launched). A run of
        other tests chooses none. What could not be had is in ``resources.setup_error``."""
        if self.has_suites and self.worker is None:
            self.resources.endpoint_or_error()

    def plan(self, items: Sequence[Any]) -> None:
        """Once, after collection: what the collected suites ask of each environment
        (the first suite of an environment wins)."""
        for item in items:
            self._plan_suite(item.suite, item.nodeid.split("::")[0])

    def _plan_suite(self, suite: Any, gate_path: str) -> None:
        if suite.environment not in self.plans:
            self.plans[suite.environment] = plan_for(suite, self.settings, gate_path)

    def start_for_paths(self, paths: Sequence[str], choose: Choose | None = None) -> None:
        """xdist controller: plan from the suites under ``paths`` (the controller collects
        no items) and start what they need, before workers start: only what ``choose``
        (the command line's -k, -m, --deselect, --lf) keeps."""
        from pytest_agentgym.config.suites import suites_under

        found, root = suites_under(list(paths), self.settings), getattr(self.config, "rootpath", None)
        selected = selected_episodes(found, self.settings, choose, root)
        envs = {env for _path, env, _task, _repeat in selected}
        for suite in found:
            if suite.environment in envs:
                self._plan_suite(suite, node_path(suite.path, root))
        self.planned_keys.update((env, task, repeat) for _path, env, task, repeat in selected)
        self._begin(list(self.plans))

    # -- starting the run ------------------------------------------------------------------

    def _adapter(self, name: str) -> EnvAdapter:
        if name not in self._adapters:
            spec = self.settings.spec(name)
            self._adapters[name] = adapter_class(name)(spec.prompt_template)
        return self._adapters[name]

    def _begin(self, env_names: Sequence[str]) -> None:
        """Servers, endpoint, run directory, events: once per process."""
        if self._began:
            return
        self._began = True
        self.ledger.open_log(None if self.worker is None else self.worker.get("workerid"))
        whole, judged = opening.whole_run(self)  # a resume: the run's selection, else refused (run/resuming.py)
        for name in dict.fromkeys([*env_names, *judged]):  # imports and templates, while the servers boot
            self._adapter(name)
        chosen = self.resources.start_all(env_names)  # without a model: no server is left running
        if self.worker is None:  # the controller: run.json, `latest`, the events (run/opening.py)
            self.start_notices = opening.open_records(
                self.settings, self.resources, self.ledger, chosen, env_names, plans=self.plans, rules=self.rules,
                adapters=self._adapters, planned_keys=self.planned_keys, selection=self.selection, judged=judged)
        self.planned_keys = whole or self.planned_keys  # judged on the whole run, kept episodes included
        if chosen is not None:  # else every episode becomes an error record (see submit)
            self.resources.start_engine(self._adapters, concurrency=self.settings.concurrency,
                                        on_finished=self._episode_finished, kept=self.ledger.kept)

    def worker_input(self) -> dict[str, Any]:
        return {**self.resources.worker_input(self.run_dir.path), "agentgym_generation": self.ledger.generation}

    # -- episodes -----------------------------------------------------------------------

    @property
    def rules(self) -> RequestRules:
        """How this run makes an episode request (run/requests.py: the one builder)."""
        if self._rules is None:
            self._rules = RequestRules.of(self.settings, self.resources.node_sampling())
        return self._rules

    def request_for(self, item: Any) -> EpisodeRequest:
        return self.rules.for_item(self.settings.spec(item.suite.environment), item)

    def kept_record(self, item: Any) -> EpisodeRecord | None:
        """The scored record an earlier generation of a resumed run left for ``item``."""
        return self.ledger.kept.get((item.suite.environment, item.task_index, item.repeat))

    def prepare(self, items: Sequence[Any]) -> None:
        """Start what the items need (they were planned after collection: :meth:`plan`);
        without xdist, queue every episode that is not kept at once, so the engine runs up to
        ``concurrency`` of them ahead."""
        self.planned_keys = {item.key for item in items}
        envs = list(dict.fromkeys(i.suite.environment for i in items))
        if not envs:
            return
        self._begin(envs)
        if self.settings.stop_when_decided and self.worker is None and self._began:
            from pytest_agentgym.run.stopping import RunStops

            self.stops_early = RunStops.start(self.settings, self.plans, self.planned_keys, self.ledger, items,
                                              self.resources.engine)
        if self.worker is None:  # without xdist: the engine runs ahead of the items
            self._queue(items)

    def _queue(self, items: Sequence[Any]) -> None:
        """Submit the episodes of ``items`` that are neither kept nor left unplayed by a stop."""
        unplayed = self.stops_early.unplayed if self.stops_early is not None else {}
        for item in items:
            if self.kept_record(item) is None and item.nodeid not in unplayed:
                self.submit(item.nodeid, self.request_for(item))

    # -- stopping when decided ----------------------------------------------------------------

    @property
    def stopper(self) -> Stopper | None:
        """--agentgym-stop-when-decided: decides each environment early (run/stopping.py)."""
        return self.stops_early.stopper if self.stops_early is not None else None

    def _look(self, env: str) -> None:
        """After a record of ``env``: look at it, and leave unplayed what a stop takes back."""
        if self.stops_early is not None:
            self.stops_early.look(env)

    def stopped_reason(self, item: Any) -> str | None:
        """Why ``item`` is not played (its environment stopped before it), or None."""
        early = self.stops_early
        return early.stopped_reason(item.suite.environment, item.nodeid) if early is not None else None

    def new_stops(self) -> list[Stop]:
        """The stops not shown yet (the plugin shows each once, as it happens)."""
        return self.stopper.unannounced() if self.stopper is not None else []

    def read_ahead(self, items: Sequence[Any]) -> None:
        """xdist worker: queue the episodes of ``items`` (the ones queued for this worker,
        in order) so the engine plays up to ``concurrency`` of them at once, as a
        single process does with all of its items (see pytest_agentgym.plugin.readahead)."""
        if self._began:
            self._queue(items)  # a worker: no stop leaves anything unplayed

    def withdraw(self, keys: Sequence[str]) -> list[str]:
        """Take back queued episodes that have not begun; returns the keys withdrawn."""
        engine = self.resources.engine
        return [key for key in keys if engine is not None and engine.withdraw(key)]

    def result(self, item: Any) -> EpisodeRecord:
        """Block until the item's episode has finished and return its record (a kept
        one at once). Raises :class:`RunAborted` when results cannot be written."""
        kept = self.kept_record(item)
        if kept is not None:
            self._look(item.suite.environment)
            return kept
        if not self._began:
            self.plan([item])
            self._begin([item.suite.environment])
        self._ensure_env(item.suite.environment)
        future = self.submit(item.nodeid, self.request_for(item))
        try:
            record = self.ledger.stamp(future.result())  # this generation's, as on disk (not kept)
        except OSError as exc:
            raise RunAborted(self.abort_reason or f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._forget(item.nodeid)
        self._look(item.suite.environment)
        return record

    def _forget(self, key: str) -> None:
        """The record is the caller's now (and on disk): hold no reference to it."""
        self._not_played.forget(key)
        if self.resources.engine is not None:
            self.resources.engine.forget(key)

    def _ensure_env(self, name: str) -> None:
        if name not in self._adapters:
            self.resources.start_envs([name])
            self._adapter(name)

    def play(self, key: str, env: str, task_index: int, *, repeat: int, max_rounds: int | None,
             episode_timeout: float | None, sampling: dict[str, Any], min_reward: float | None,
             nodeid: str) -> EpisodeRecord:
        """One episode for the ``agentgym_episode`` fixture; blocks until it ends."""
        s = self.settings
        try:
            spec = s.spec(env)
        except KeyError:
            raise ValueError(f"unknown environment {env!r}; known: {', '.join(s.env_specs)}") from None
        if not self._began:
            self._begin([spec.name])
        self._ensure_env(spec.name)
        request = self.rules.request(spec, task_index, repeat, max_rounds=max_rounds,
                                     episode_timeout=episode_timeout, sampling=sampling, min_reward=min_reward,
                                     nodeid=nodeid)
        try:
            record = self.submit(key, request).result()
        finally:
            self._forget(key)
        if self.worker is None:
            self.episode_reported(record.to_dict())
        return record

    def submit(self, key: str, request: EpisodeRequest) -> concurrent.futures.Future[EpisodeRecord]:
        """Queue an episode; when its endpoint or server could not be had, its record
        is an error at once (written like any other), and nothing is contacted."""
        error = not_played.cause(self.resources, request.spec.name)
        if error is None and self.resources.engine is not None:
            return self.resources.engine.submit(key, request)
        return self._not_played.future(key, request, error, self.info.model if self.info else "none")

    def _episode_finished(self, record: EpisodeRecord) -> EpisodeRecord:
        """Engine thread: the episode is on disk before anything else happens."""
        try:
            record = self.ledger.append(record)
        except OSError as exc:  # store.ResultsWriteError: says what happened and how to resume
            self.abort_reason = self.abort_reason or str(exc)
            raise
        if self.stopper is not None:
            self.stopper.recorded(record)
        return record

    def record_crash(self, nodeid: str, message: str) -> EpisodeRecord | None:
        """Controller: the xdist worker running ``nodeid`` died; write its episode's
        error record (``harness:WorkerCrashed``). None when ``nodeid`` is no episode."""
        if not self._began:
            return None
        record = ending.crash_record(self.settings, self.info, nodeid, message)
        if record is None:
            return None
        try:
            return self._episode_finished(record)
        except OSError:
            return record

    def episode_reported(self, data: dict[str, Any], *, kept: bool = False) -> None:
        """Controller: an item's report arrived with its record. A kept record (from an
        earlier generation of a resumed run) was published by the run that played it."""
        if kept:
            return
        record = EpisodeRecord.from_dict(data)  # not kept here: the record is on disk
        publisher = self.resources.publisher
        if publisher is not None:
            from pytest_agentgym.results.events import episode_completed

            publisher.publish(episode_completed(record, node=self.settings.node,
                                                checkpoint=self.settings.checkpoint))
        if self.hook is not None:
            self.hook.pytest_agentgym_episode_finished(config=self.config, record=record)

    # -- the end of the run -------------------------------------------------------------------

    def finish(self, exitstatus: int, interrupted: bool = False) -> list[GateVerdict]:
        """Controller: aggregate, check gates, write run.json, events and the report.
        Returns the verdicts that did not pass. Safe to call when nothing ran."""
        if self._finished or self.info is None or self.worker is not None:
            return []
        self._finished = True
        with ending.signals_deferred() as deferred:  # a Ctrl-C now waits until run.json says how the run ended
            self._conclude(exitstatus, interrupted)
        if deferred:  # the user wants out: the report can be rendered later
            self.report_error = "stopped by a signal while the run was being recorded"
        if self.resources.publisher is not None:
            ending.publish_end(self.resources.publisher, self.settings, self.info, self.summaries, self.verdicts,
                               self.status, self.info.counts)
            self.publish_stats = self.resources.close_publisher(timeout=5.0)
        if not self.settings.no_report and not deferred:
            # the comparison made at the end, so the report does not make it again
            self.report_path, self.report_error = ending.write_report(
                self.run_dir.path, self.comparisons[0] if len(self.comparisons) == 1 else None)
        if self.hook is not None:
            self.hook.pytest_agentgym_run_finished(config=self.config, summaries=self.summaries,
                                                   verdicts=self.verdicts)
        self.resources.stop()
        if self.settings.notify and not deferred:  # the servers are down: a slow receiver holds nothing
            from pytest_agentgym.publish.webhook import notify_run

            self.notify_problems = notify_run(self.settings.notify, self.info, run_dir=self.run_dir.path,
                                              report_path=self.report_path, write_info=self.ledger.write)
        return [v for v in self.verdicts if not v.passed]

    def _conclude(self, exitstatus: int, interrupted: bool) -> None:
        """Aggregate, judge the gates (not on a partial run: run/judging.py) and write run.json's end state."""
        if self.resources.engine is not None:
            self.resources.engine.close()
        interrupted = interrupted or self.interrupted_by is not None or self.abort_reason is not None
        self.ledger.release_reserve()  # room for the last writes, whether or not the disk is full
        done = judging.conclude(
            self.ledger.records(), settings=self.settings, plans=self.plans, run_dir=self.run_dir.path,
            stops=self.stops_early, generation=self.ledger.generation, exitstatus=exitstatus,
            interrupted=interrupted, abort_reason=self.abort_reason, blocked=self.blocked(),
            planned_keys=self.planned_keys)
        self.summaries, self.verdicts, self.status = done.summaries, done.verdicts, done.status
        self.partial, self.comparisons, self.internal_error = done.partial, done.comparisons, done.internal_error
        try:
            self.ledger.write(ending.end_info(self.info, done, stopper=self.stopper, resources=self.resources))
        except OSError as exc:
            self.abort_reason = self.abort_reason or f"run.json could not be written: {exc}"

    def blocked(self) -> dict[str, ErrorInfo]:
        """The environments none of whose episodes can be played, and why (run/not_played.py):
        their episodes are error records, and the plugin reports them once."""
        if self.worker is not None or not self._began:
            return {}
        return not_played.blocked(self.resources, self.plans)

    def interrupt(self, why: str) -> None:
        """The run is being stopped early (Ctrl-C, SIGTERM): remember it at once."""
        self.interrupted_by = self.interrupted_by or why

    def shutdown(self) -> None:
        """Last resort at unconfigure: nothing may outlive the run."""
        self.resources.close_publisher(timeout=2.0)
        self.resources.stop()
        self.ledger.close_log()
        self.ledger.release()

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` has judged the run (its summary can be printed)."""
        return self._finished

    @property
    def asserts_quality(self) -> bool:
        """Whether anything says what a good episode or run is: a suite's gate or
        min_reward, or a baseline to compare with."""
        return bool(self.settings.baseline) or any(plan.asserts for plan in self.plans.values())

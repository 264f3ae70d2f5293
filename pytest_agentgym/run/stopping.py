"""``--agentgym-stop-when-decided``: when an environment stops, and what it then skips.

The statistics are compare/sequential.py's; this module holds the bookkeeping of
one run around them, without pytest:

* :func:`seeded_order` (compare/sequential.py) puts each environment's items in :func:`play_order`, so that
  the tasks played at any point are a random sample of the planned ones;
* a :class:`Stopper` collects the records of each environment as they are written
  (any thread), and at each *look* (:meth:`Stopper.look`) decides its verdicts on
  exactly the first ``n`` tasks of the play order, whatever else has finished (so
  concurrency does not move a look): the baseline comparison
  (:func:`decide_against_baseline`) and each threshold gate (:func:`gate_decided`).
  An environment stops when one verdict is decided failing or all are decided
  passing; its :class:`Decision` is kept, with which verdicts were decided how and
  which were still open;
* :class:`RunStops` is the run's side: the items of each environment, looked at as
  each of their records is written (on the engine's thread, before the episode's slot
  goes to the next one), and those a stop leaves unplayed: the engine starts none of
  them (``Engine.may_start``), those in flight finish and are recorded;
* at the end, :func:`stopped_verdicts` turns the verdicts of a stopped environment
  into what they were decided as, and those still open into ``not-judged``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_agentgym.compare.sequential import (Decision, SequentialPlan, decide_against_baseline,  # noqa: F401
                                                gate_decided, play_order, seeded_order)  # seeded_order: for the plugin
from pytest_agentgym.results.aggregate import is_scored, summarize_env
from pytest_agentgym.results.gates import NOT_JUDGED, Gate, GateVerdict, error_budget_exceeded
from pytest_agentgym.results.ledger import LedgerError
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.run.plans import baseline_gate_name, reward_ranges

Key = tuple[str, int, int]

#: The prefix of a skipped item's reason and of a still-open verdict's detail.
STOPPED = "stopped early"
#: The significance level of the whole run's baseline comparison (that of compare_runs).
ALPHA = 0.05


@dataclass
class EnvWatch:
    """What the stopper knows of one environment."""

    env: str
    #: task -> planned repeats
    planned: dict[int, int]
    gates: tuple[Gate, ...]
    max_error_rate: float
    #: [low, high] of one episode's reward (None: the mean reward cannot be bounded)
    reward_range: tuple[float, float] | None
    #: the planned tasks in the order they are played (the looks take prefixes of it)
    order: list[int] = field(default_factory=list)
    records: dict[tuple[int, int], EpisodeRecord] = field(default_factory=dict)
    used_points: set[int] = field(default_factory=set)
    #: how many tasks at the head of ``order`` are completed (Stopper._frontier)
    frontier: int = 0
    #: task -> its repeats recorded
    repeats_done: dict[int, int] = field(default_factory=dict)

    @property
    def planned_episodes(self) -> int:
        return sum(self.planned.values())


@dataclass(frozen=True)
class Stop:
    """A stopped environment: its decision, and which verdicts (by gate name) were
    decided passing (True) or failing (False), each with its sentence; the rest were
    still open."""

    decision: Decision
    decided: dict[str, bool]
    whys: dict[str, str] = field(default_factory=dict)
    #: the verdicts still open when it stopped (not judged at the end)
    open: tuple[str, ...] = ()
    #: the environment's episodes on record when it was decided (the look's and any that
    #: finished beyond it); those in flight then are the only ones recorded after it
    recorded: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """run.json's entry: the Decision's, each decided verdict with its sentence, the open ones."""
        extra = {} if self.recorded is None else {"recorded": self.recorded}
        return {**self.decision.to_dict(), **extra, "decided": {
            name: {"passed": passed, "why": self.whys.get(name, "")} for name, passed in self.decided.items()},
            "open": list(self.open)}

    @classmethod
    def from_dict(cls, env: str, data: Mapping[str, Any]) -> "Stop":
        decision = Decision(env, str(data["verdict"]), int(data["tasks"]), int(data["episodes"]),
                            int(data["planned_tasks"]), int(data["planned_episodes"]), str(data["why"]))
        decided = {str(k): v for k, v in (data.get("decided") or {}).items() if isinstance(v, Mapping)}
        recorded = data.get("recorded")
        return cls(decision, {k: bool(v.get("passed")) for k, v in decided.items()},
                   {k: str(v.get("why", "")) for k, v in decided.items()},
                   tuple(str(name) for name in data.get("open") or ()),
                   int(recorded) if isinstance(recorded, int) else None)


class Stopper:
    """Decides, environment by environment, whether the rest of its episodes can change
    its verdicts. ``baseline``: the baseline's records (None without a baseline);
    ``seed``: the seed of the play order (None: the tasks in ascending order)."""

    def __init__(self, plans: Mapping[str, Any], planned_keys: Iterable[Key], *,
                 baseline: Sequence[EpisodeRecord] | None, margin: float,
                 reward_ranges: Mapping[str, tuple[float, float]], seed: int | str | None = None) -> None:
        self._lock = threading.Lock()
        self._looking = threading.RLock()
        #: called with an environment's name after each of its records (RunStops.look)
        self.after_record: Callable[[str], None] | None = None
        self.baseline = list(baseline) if baseline is not None else None
        self.margin = margin
        planned: dict[str, dict[int, int]] = {}
        for env, task, _repeat in planned_keys:
            planned.setdefault(env, {}).setdefault(task, 0)
            planned[env][task] += 1
        self.watches = {env: EnvWatch(env, tasks, tuple(plans[env].gates), plans[env].max_error_rate,
                                      reward_ranges.get(env),
                                      sorted(tasks) if seed is None else play_order(tasks, seed))
                        for env, tasks in planned.items() if env in plans}
        self._metric = {env: plans[env].baseline_metric for env in self.watches}
        self._base_envs = {r.env for r in self.baseline} if self.baseline is not None else set()
        self._families = self._baseline_families(plans)
        self.stops: dict[str, Stop] = {}
        self._announced: set[str] = set()

    def _baseline_families(self, plans: Mapping[str, Any]) -> dict[str, int]:
        """env -> how many environments its final baseline comparison holds (those the
        baseline holds, sharing its metric and error budget)."""
        groups: dict[tuple[str, float], list[str]] = {}
        for env in self.watches:
            if env in self._base_envs:
                groups.setdefault((plans[env].baseline_metric, plans[env].max_error_rate), []).append(env)
        return {env: len(names) for names in groups.values() for env in names}

    # -- what can stop ---------------------------------------------------------------------

    def compared(self, env: str) -> bool:
        """Whether ``env`` has a baseline verdict (the baseline holds it)."""
        return env in self._families

    def can_stop(self, env: str) -> bool:
        """Whether anything can decide ``env`` early: a baseline verdict or a gate."""
        watch = self.watches.get(env)
        return watch is not None and (self.compared(env) or bool(watch.gates))

    def plan(self, env: str) -> SequentialPlan:
        return SequentialPlan(alpha=ALPHA, margin=self.margin, n_envs=self._families.get(env, 1))

    @property
    def final_alpha(self) -> float:
        """The alpha of the final comparison of the environments that play to the end
        (compare/sequential.final_alpha), given the records now held: what the looks left."""
        from pytest_agentgym.compare.pairing import pair_env
        from pytest_agentgym.compare.sequential import final_alpha, final_looks

        with self._lock:
            held = {env: list(w.records.values()) for env, w in self.watches.items()}
        final = [env for env in self._families if env not in self.stops]
        family: dict[tuple[str, float], int] = {}
        for env in final:
            group = (self._metric[env], self.watches[env].max_error_rate)
            family[group] = family.get(group, 0) + 1
        finals = []
        for env in final:
            watch = self.watches[env]
            pairs = pair_env(env, self.baseline or [], held[env], self._metric[env])
            if pairs.units:
                finals.append(final_looks(pairs, watch.order, self.plan(env),
                                          family[(self._metric[env], watch.max_error_rate)]))
        stopped = [self.plan(env).regressed_level for env in self._families if env in self.stops]
        return final_alpha(finals, self.plan(""), stopped=stopped)

    # -- the records ------------------------------------------------------------------------

    def recorded(self, record: EpisodeRecord) -> None:
        """A record was written (any thread): the next look counts it."""
        watch = self.watches.get(record.env)
        if watch is not None and record.task_index in watch.planned:
            with self._lock:
                if (record.task_index, record.repeat) not in watch.records:
                    watch.repeats_done[record.task_index] = watch.repeats_done.get(record.task_index, 0) + 1
                watch.records[(record.task_index, record.repeat)] = record
            if self.after_record is not None:
                self.after_record(record.env)

    def has_record(self, key: Key) -> bool:
        """Whether the episode ``key`` has a record this run counts."""
        watch = self.watches.get(key[0])
        with self._lock:
            return watch is not None and (key[1], key[2]) in watch.records

    def carry(self, stops: Mapping[str, Mapping[str, Any]]) -> None:
        """The stops an earlier generation of a resumed run recorded: they stand."""
        for env, data in stops.items():
            if env in self.watches:
                self.stops[env] = Stop.from_dict(env, data)
                self._announced.add(env)

    # -- the looks ----------------------------------------------------------------------------

    def look(self, env: str) -> Stop | None:
        """Look at ``env`` at each look point not used yet whose tasks (the first ones of the
        play order) are all completed, in order, each on exactly those tasks' records;
        returns its new :class:`Stop`, if any."""
        watch = self.watches.get(env)
        if watch is None or env in self.stops or not self.can_stop(env):
            return None
        with self._looking:
            if env in self.stops:
                return None
            plan = self.plan(env)
            points = plan.look_points(len(watch.planned))
            waiting = [p for p in points if p not in watch.used_points]
            if not waiting or self._frontier(watch) < waiting[0]:
                return None  # the next look's tasks are not all done: no need to read the records
            with self._lock:
                records = list(watch.records.values())
            for k, point in enumerate(points):
                if point in watch.used_points:
                    continue
                if self._frontier(watch) < point:
                    return None
                watch.used_points.add(point)
                stop = self._decide(watch, plan, records, points[:k + 1])
                if stop is not None:
                    self.stops[env] = stop
                    return stop
            return None

    def _frontier(self, watch: EnvWatch) -> int:
        """How many tasks at the head of the play order are completed (every repeat recorded);
        it only grows, so each record costs a look O(1) on average."""
        with self._lock:
            while watch.frontier < len(watch.order):
                task = watch.order[watch.frontier]
                if watch.repeats_done.get(task, 0) < watch.planned[task]:
                    break
                watch.frontier += 1
        return watch.frontier

    def _decide(self, watch: EnvWatch, plan: SequentialPlan, records: list[EpisodeRecord],
                points: Sequence[int]) -> Stop | None:
        tasks = set(watch.order[:points[-1]])
        prefix = [r for r in records if r.task_index in tasks]
        decided: dict[str, bool] = {}
        whys: dict[str, str] = {}
        open_names: list[str] = []
        if self.compared(watch.env):
            name = baseline_gate_name(self._metric[watch.env], self.margin)
            found = decide_against_baseline(watch.env, self.baseline or [], prefix, watch.order, points, plan,
                                            metric=self._metric[watch.env], max_error_rate=watch.max_error_rate)
            if found is None:
                open_names.append(name)
            else:
                decided[name], whys[name] = found[0] == "ok", found[1]
        for gate in watch.gates:
            found_gate = self._gate(watch, gate, prefix)
            if found_gate is None:
                open_names.append(str(gate))
            else:
                decided[str(gate)], whys[str(gate)] = found_gate
        failing = [name for name, passes in decided.items() if not passes]
        if not failing and open_names:
            return None
        names = failing[:1] or list(decided)
        verdict = self._verdict(names, passing=not failing)
        why = "; ".join(whys[n] for n in names)
        return Stop(Decision(watch.env, verdict, points[-1], len(prefix), len(watch.planned),
                             watch.planned_episodes, why), decided, whys, tuple(open_names), len(records))

    def _verdict(self, names: list[str], *, passing: bool) -> str:
        baseline = any(n.startswith("baseline ") for n in names)
        if passing:
            return "ok" if baseline else "passed"
        return "regressed" if baseline else "failed"

    def _gate(self, watch: EnvWatch, gate: Gate, records: list[EpisodeRecord]) -> tuple[bool, str] | None:
        """Whether ``gate`` is decided on ``records``, and the sentence that says so (the
        error budget and what counts as scored are the gates' own: results.gates, aggregate)."""
        if not records or error_budget_exceeded(summarize_env(watch.env, records), watch.max_error_rate):
            return None
        scored = [r for r in records if is_scored(r)]
        if gate.metric == "success_rate":
            values, low, high = [1.0 if r.success else 0.0 for r in scored], 0.0, 1.0
        elif watch.reward_range is not None:
            values, (low, high) = [float(r.reward) for r in scored], watch.reward_range
        else:
            return None
        remaining = max(0, watch.planned_episodes - len(records))
        passes = gate_decided(gate, values, remaining, low, high)
        if passes is None:
            return None
        value = sum(values) / len(values)
        return passes, (f"{gate} {'passed' if passes else 'failed'}: {gate.metric} = {value:.3f} over "
                        f"{len(values)} scored episodes, and no score of the {remaining} left can change it")

    # -- what the plugin shows ------------------------------------------------------------------

    def unannounced(self) -> list[Stop]:
        """Stops not yet shown (each once)."""
        new = [stop for env, stop in self.stops.items() if env not in self._announced]
        self._announced.update(stop.decision.env for stop in new)
        return new

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """run.json's ``stopped_early``."""
        return {env: stop.to_dict() for env, stop in self.stops.items()}


class RunStops:
    """The run's side of the stops: its :class:`Stopper`, the items of each environment
    (nodeid -> key), and those a stop leaves unplayed: withdrawn from the engine before
    they began, or never submitted. Made by :meth:`start` once the engine runs.

    Each record is looked at as it is written, on the engine's thread and before its
    episode's slot is given to the next one (``Stopper.after_record``), and the engine asks
    :meth:`may_start` before it begins an episode: no episode of a stopped environment
    begins after its decision; those in flight then finish and are recorded."""

    def __init__(self, stopper: Stopper, items_by_env: Mapping[str, Mapping[str, Key]],
                 kept: Mapping[Key, Any], engine: Any) -> None:
        self.stopper = stopper
        self._items_by_env = items_by_env
        self._kept = kept
        self._engine = engine  # never a work queue's: settings refuse the flag with --agentgym-queue
        self._lock = threading.RLock()
        #: nodeid -> key of the items a stop left unplayed (withdrawn, or never submitted)
        self.unplayed: dict[str, Key] = {}
        #: nodeids the engine was let begin (may_start said yes)
        self._begun: set[str] = set()

    @classmethod
    def start(cls, settings: Any, plans: Mapping[str, Any], planned_keys: set[Key], ledger: Any,
              items: Iterable[Any], engine: Any) -> "RunStops":
        """The stopper of the run's ``items``, fed with the records a resumed run (``ledger``)
        keeps; the stops that run recorded stand, and an environment whose kept records reach
        a look point is looked at once now, before anything is played."""
        items_by_env: dict[str, dict[str, Key]] = {}
        for item in items:
            items_by_env.setdefault(item.suite.environment, {})[item.nodeid] = item.key
        baseline = None
        if settings.baseline:
            from pytest_agentgym.compare import CompareError
            from pytest_agentgym.compare.runs import load_run

            try:
                baseline = load_run(settings.baseline, "baseline").records
            except CompareError as exc:  # checked at configure: it changed since
                raise LedgerError(f"--agentgym-baseline={settings.baseline_given}: {exc}") from None
        stopper = Stopper(plans, planned_keys, baseline=baseline, margin=settings.max_drop,
                          reward_ranges=reward_ranges(settings),
                          seed=settings.seed if settings.seed is not None else 0)  # the items' order
        for key, record in ledger.kept.items():
            if key in planned_keys:
                stopper.recorded(record)
        stopper.carry(ledger.previous_stopped)
        stops = cls(stopper, items_by_env, ledger.kept, engine)
        for env in stopper.stops:
            stops._leave_unplayed(env)
        for env in list(items_by_env):
            stops.look(env)
        stopper.after_record = stops.look
        if engine is not None:
            engine.may_start = stops.may_start
        return stops

    def look(self, env: str) -> None:
        """After a record of ``env`` (any thread): look at it; when it stops, take back its
        episodes that have not begun (those begun finish and are recorded as usual)."""
        with self._lock:
            if self.stopper.look(env) is not None:
                self._leave_unplayed(env)

    def may_start(self, nodeid: str) -> bool:
        """Whether the engine may begin the episode of ``nodeid`` (its environment has not
        stopped before it)."""
        with self._lock:
            if nodeid in self.unplayed:
                return False
            self._begun.add(nodeid)
            return True

    def _leave_unplayed(self, env: str) -> None:
        """Mark ``env``'s items whose episodes have not begun as not to be played."""
        engine = self._engine
        for nodeid, key in self._items_by_env.get(env, {}).items():
            if key in self._kept or nodeid in self.unplayed or self.stopper.has_record(key):
                continue
            if nodeid not in self._begun:
                self.unplayed[nodeid] = key
                if engine is not None:
                    engine.withdraw(nodeid)

    def stopped_reason(self, env: str, nodeid: str) -> str | None:
        """Why the item ``nodeid`` of ``env`` is not played (``env`` stopped before it), or None."""
        stop = self.stopper.stops.get(env)
        if stop is None or nodeid not in self.unplayed:
            return None
        return skip_reason(stop)


def skip_reason(stop: Stop) -> str:
    """Why a stopped environment's item was not played."""
    return f"{STOPPED}: {stop.decision.line}"


def stopped_verdicts(verdicts: Sequence[GateVerdict], stops: Mapping[str, Stop], *,
                     metric_of: Callable[[str], str], margin: float) -> list[GateVerdict]:
    """The verdicts of a run with stopped environments: a stopped environment's gates as
    judged on its played episodes when they were decided (which gives the decided
    outcome), its baseline verdict as decided, and what was still open ``not-judged``
    (the baseline verdict too: every verdict of a stopped environment is listed)."""
    out: list[GateVerdict] = []
    for verdict in verdicts:
        stop = stops.get(verdict.env)
        if stop is None or verdict.gate in stop.decided:
            out.append(verdict)
        else:
            out.append(verdict.not_judged(f"{STOPPED}: {_decider(stop)} decided it"))
    for env, stop in stops.items():
        name = baseline_gate_name(metric_of(env), margin)
        if name in stop.decided:
            passed = stop.decided[name]
            out.append(GateVerdict(env, name, None, passed, stop.whys.get(name) or stop.decision.why,
                                   outcome="passed" if passed else "failed"))
        elif name in stop.open and not any(v.env == env and v.gate == name for v in out):
            out.append(GateVerdict(env, name, None, False, f"{STOPPED}: {_decider(stop)} decided it",
                                   outcome=NOT_JUDGED))
    return out


def _decider(stop: Stop) -> str:
    failing = [name for name, passes in stop.decided.items() if not passes]
    return f"'{failing[0]}'" if failing else "the other verdicts"

"""What a run prints: the header (node, model, sampling, the rerun command), the
effective settings of each environment after collection, and at the end a table
per environment, the gate verdicts, warnings that change how the exit status
should be read, where the results are, and how the run ended. Plain lines (with
their markup at the end); the plugin writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

Line = tuple[str, dict[str, bool]]


def show_sampling(sampling: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(sampling.items()))


def header_lines(run: Any, probe: bool) -> list[str]:
    """Before collection: the node, the resumed run, the endpoints --agentgym-endpoint
    pointed elsewhere, the model endpoint (probed unless ``probe`` is false, as with
    --collect-only, and how it was found healthy), the node's sampling, the rerun command;
    under xdist (planned before the header) whether anything judges the run."""
    from pytest_agentgym.results.redact import redact_text

    s = run.settings
    lines = [f"agentgym: node {s.node} ({s.node_file}), run {s.run_id}, seed {s.seed if s.seed is not None else 'none'}"]
    if run.ledger.resuming:
        kept = len(run.ledger.kept)
        lines.append(f"agentgym: resuming {run.run_dir.path} as generation {run.ledger.generation}: "
                     f"{kept} scored episode(s) kept, the missing and errored ones run again")
    lines.extend(f"agentgym: {override.describe()}" for override in s.endpoint_overrides)
    if probe:  # chosen in the start phase (EvaluationRun.start): the header only reports it
        chosen = run.resources.chosen
        if chosen is None:
            error = run.resources.setup_error
            what = ("THE WORKERS DISAGREE" if error.type == "FleetMismatch" else "NO WORK QUEUE") if s.queue \
                else "NO MODEL ENDPOINT"
            lines.append(f"agentgym: {what}, every episode will be an error: {error.message}")
        else:
            checked = getattr(chosen, "checked_by", None)  # an attached endpoint's probe
            lines.append(f"agentgym: model {chosen.model} via {chosen.kind} at {chosen.base_url}"
                         + (f" (healthy: {checked})" if checked else ""))
            lines.extend(f"agentgym: {'queue' if chosen.kind == 'queue' else 'endpoint'}: {note}"
                         for note in chosen.notes)
    else:
        first = run.model_settings().endpoints[0]
        lines.append(f"agentgym: model endpoint {first.describe()} (not contacted)")
    sampling = run.rules.effective_sampling({})
    lines.append("agentgym: sampling " + (show_sampling(sampling) or "endpoint defaults")
                 + " (node and --agentgym-sampling over the suites')")
    lines.append(f"agentgym: rerun with: {s.command}")
    lines.extend(unjudged_lines(run))  # planned already only under xdist (else after collection)
    return [redact_text(line) for line in lines]


def sampling_lines(run: Any) -> list[str]:
    """After collection: each environment's effective sampling, what a suite asked
    for that the node overrode, and whether anything judges the run (:func:`unjudged_lines`)."""
    lines = []
    for env, plan in run.plans.items():
        effective = run.rules.effective_sampling(plan.sampling)
        lost = {k: v for k, v in plan.sampling.items() if effective.get(k) != v}
        rounds = "its own" if run.settings.spec(env).in_process else plan.max_rounds  # a verifiers env's limits
        line = f"agentgym: {env}: max_rounds {rounds}, sampling {show_sampling(effective) or 'endpoint defaults'}"
        if lost:
            line += f" (the suite's {show_sampling(lost)} overridden by the node or the command line)"
        lines.append(line)
    return lines + unjudged_lines(run)


def stop_header_lines(run: Any) -> list[str]:
    """After collection, with --agentgym-stop-when-decided: what can stop each environment."""
    s = run.settings
    earlier = sorted(run.ledger.previous_stopped)
    if not s.stop_when_decided:
        return [f"agentgym: the run resumed stopped {', '.join(earlier)} early; without "
                f"--agentgym-stop-when-decided the rest of their episodes are played now"] if earlier else []
    seed = f"seed {s.seed}" if s.seed is not None else f"run id {s.run_id}"
    lines = [f"agentgym: stop when decided: each environment's tasks in a random order ({seed}); it stops "
             f"once its verdicts can no longer change (looked at after each eighth of its tasks, up to three quarters)"]
    never = [env for env, plan in run.plans.items() if not plan.gates and not s.baseline]
    if never:
        lines.append(f"agentgym: stop when decided: nothing can stop {', '.join(never)}: no baseline "
                     f"(--agentgym-baseline) and no gate in its suite; every episode is played")
    return lines


def stop_line(stop: Any) -> Line:
    """An environment that stopped early (``stop`` is a run/stopping.py Stop)."""
    decision = stop.decision
    failing = decision.verdict in ("regressed", "failed")
    return f"agentgym: STOPPED EARLY: {decision.line}", {"red": failing, "green": not failing, "bold": True}


NO_ASSERTION = "agentgym: no quality assertion: exit 0 means the run completed, not that the model is good"
#: the fix when no suite says what a good episode is, whatever the node
NO_GATES = "give the suites gates or a min_reward; see docs/suites.md"


def gated_nodes(run: Any) -> list[str]:
    """The nodes the run's suites give gates to in their ``nodes:`` maps (read again from
    the files: a suite as loaded holds this node's keys only)."""
    from pytest_agentgym.envs.spec import read_yaml

    root = getattr(run.config, "rootpath", None)
    names: set[str] = set()
    for plan in run.plans.values():
        path = Path(plan.gate_path) if root is None else Path(root) / plan.gate_path
        try:
            nodes = (read_yaml(path.read_text(encoding="utf-8")) or {}).get("nodes") or {}
        except (OSError, ValueError, AttributeError):  # collection has said what is wrong with the file
            continue
        names.update(str(name) for name, keys in nodes.items() if isinstance(keys, dict) and keys.get("gates"))
    return sorted(names)


def unjudged(run: Any) -> str | None:
    """Why nothing judges the run (no gate, min_reward or baseline for its node) and the
    fix; None when something does."""
    if run.asserts_quality or not run.plans:
        return None
    node = run.settings.node
    others = [name for name in gated_nodes(run) if name != node]
    if others:
        return (f"the suites give gates to node(s) {', '.join(others)}, none to node {node}: add "
                f"'{node}: {{gates: [...]}}' under each suite's nodes:, e.g. the floor of the node yours "
                f"is like (docs/suites.md, 'Gates of your own node')")
    return NO_GATES


def unjudged_lines(run: Any) -> list[str]:
    """After collection: a run that nothing judges says so before its first episode."""
    why = unjudged(run)
    return [] if why is None else [f"agentgym: NOTHING JUDGES THIS RUN, any model passes: {why}"]


def not_played_cause(error: Any, envs: Any) -> str:
    """What is missing, in a few words: the same for every episode it stops."""
    if error.where == "env":
        return f"the server of {', '.join(envs)} could not be had"
    if error.where == "model":
        return "no model endpoint"
    return "the workers disagree" if error.type == "FleetMismatch" else "no work queue"


def not_played_lines(run: Any) -> list[Line]:
    """Once, before the items: what cannot be played and how to fix it (the items then
    say only "not played")."""
    from pytest_agentgym.results.redact import redact_text

    blocked = run.blocked()
    if not blocked:
        return []
    lines: list[Line] = []
    by_error: dict[Any, list[str]] = {}
    for env, error in blocked.items():
        by_error.setdefault(error, []).append(env)
    for error, envs in by_error.items():
        what = not_played_cause(error, envs)
        lines.append((f"agentgym: NOT PLAYED: {', '.join(envs)}: {what}: {redact_text(error.message)}",
                      {"red": True, "bold": True}))
    for detail in run.resources.setup_details:  # a failed launch's log tail: here once, not per item
        first, *rest = detail.splitlines()
        lines += [(f"agentgym: model endpoint {redact_text(first)}", {"red": True}),
                  *((f"    {redact_text(x)}", {}) for x in rest)]
    planned = len(run.planned_keys)
    lines.append((f"agentgym: their episodes are recorded as errors without contacting anything; the run "
                  f"exits 3 (infrastructure){f' ({planned} episodes planned)' if planned else ''}; fix the above "
                  f"and resume with --agentgym-resume={run.run_dir.path}", {"red": True}))
    return lines


def summary_table(summaries: dict[str, Any]) -> list[Line]:
    width = max([12, *(len(env) for env in summaries)])  # AgentBench-ALFWorld is 19 wide
    lines: list[Line] = [(f"{'environment':<{width}} {'episodes':>8} {'mean reward (95% CI)':>26} {'success':>8} "
                          f"{'rounds':>6} {'errors':>6} {'tokens':>9} {'wall s':>8}", {"bold": True})]
    for env, s in summaries.items():
        reward = "-" if s.mean_reward is None else (
            f"{s.mean_reward:.3f} [{s.reward_ci95[0]:.3f}, {s.reward_ci95[1]:.3f}]")
        success = "-" if s.success_rate is None else f"{s.success_rate:.0%}"
        rounds = "-" if s.mean_rounds is None else f"{s.mean_rounds:.1f}"
        lines.append((f"{env:<{width}} {s.episodes:>8} {reward:>26} {success:>8} {rounds:>6} "
                      f"{s.errors:>6} {s.prompt_tokens + s.completion_tokens:>9} {s.wall_s:>8.1f}", {}))
    return lines


def summary_lines(run: Any) -> list[Line]:
    """``run`` is a finished :class:`~pytest_agentgym.run.evaluation.EvaluationRun`."""
    lines: list[Line] = [("", {})]
    lines.extend(summary_table(run.summaries))
    for v in run.verdicts:
        lines.append((f"{v.word}: {v.env} {v.gate}: {v.detail}",
                      {"green": v.outcome == "passed", "yellow": v.outcome in ("inconclusive", "not-judged"),
                       "red": v.outcome in ("failed", "error")}))
    for stop in getattr(run, "stops", {}).values():
        lines.append(stop_line(stop))
    shard = (run.info.shard or {}) if run.info else {}
    if shard:
        root = run.run_dir.path.parent
        lines.append((f"agentgym: shard {shard['index']}/{shard['count']} of run {run.settings.run_id} "
                      f"({shard['episodes']} of {shard['selection_episodes']} episodes): the gates are judged on "
                      f"the merged run: pytest-agentgym merge {root} --out {root}", {"yellow": True}))
    if any(v.outcome == "inconclusive" for v in run.verdicts):
        lines.append(("agentgym: an inconclusive comparison does not fail the run; --agentgym-strict-gates "
                      "makes it fail (see docs/compare.md for how many tasks the margin needs)", {"yellow": True}))
    if not run.asserts_quality and run.summaries and not run.blocked():
        lines.append((f"{NO_ASSERTION} ({unjudged(run) or NO_GATES})", {"yellow": True}))
    if run.abort_reason:
        lines.append((f"agentgym: RUN STOPPED: {run.abort_reason}", {"red": True}))
    for line in run.resources.endpoint_restarts:  # a launched endpoint died and was started again
        lines.append((f"agentgym: {line}", {"yellow": True}))
    fleet = run.resources.fleet  # a queue run: workers that refused its items, results dropped
    for note in fleet.notes() if fleet is not None else ():
        lines.append((f"agentgym: queue: {note}", {"yellow": True}))
    for skipped in [*run.run_dir.skipped, *run.run_dir.duplicates]:  # lines of episodes.jsonl left out
        lines.append((f"agentgym: {skipped}", {"yellow": True}))
    lines.append((f"agentgym results: {run.run_dir.episodes_file}", {}))
    stats = getattr(run, "publish_stats", None)
    if stats is not None and (getattr(stats, "outboxed", 0) or getattr(stats, "lost", 0)):
        lines.append((f"agentgym events: {stats.outboxed} kept in {run.run_dir.path / 'outbox.jsonl'}"
                      f" (deliver with `pytest-agentgym publish-outbox {run.run_dir.path}`)", {"yellow": True}))
    if getattr(run, "report_path", None):
        lines.append((f"agentgym report: {run.report_path}", {}))
    if getattr(run, "report_error", None):
        lines.append((f"agentgym report could not be written: {run.report_error}; "
                      f"render it later with `pytest-agentgym report {run.run_dir.path}`", {"yellow": True}))
    for problem in run.notify_problems:  # a webhook (--agentgym-notify) that did not take it
        lines.append((f"agentgym: {problem}", {"yellow": True}))
    return lines


def status_line(run: Any) -> Line | None:
    """The very last line: how the run ended, in run.json's words."""
    if run.status is None:
        return None
    counts = run.info.counts if run.info else {}
    detail = ", ".join(f"{counts[k]} {k}" for k in ("episodes", "errors", "kept") if counts.get(k))
    markup = {"green": run.status == "finished", "yellow": run.status != "finished"}
    return (f"agentgym: run {run.settings.run_id} {run.status}" + (f" ({detail})" if detail else ""), markup)

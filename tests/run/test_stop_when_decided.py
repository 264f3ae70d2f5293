"""--agentgym-stop-when-decided in real runs: pytest in a subprocess, the real
reference agent (its reference policy solves every Wordle task, its random policy
few) against the embedded servers. What is checked: a clearly worse candidate
stops at a look with the skip reason, run.json's ``stopped_early``, exit status 1
and the report's line; an unchanged one plays to the end; a threshold gate decided
early stops; the order is the seeded one; -n and shards are refused; a resume of a
stopped run keeps the stop."""

from __future__ import annotations

import json

import pytest

from pytest_agentgym.compare.sequential import play_order
from pytest_agentgym.config.suites import parse_item_name

from helpers.projects import episodes, make_project, run, run_json, suite
from helpers.usage_errors import says, settings_refusal

pytestmark = pytest.mark.heavy

WORDLE_40 = "environment: Wordle\ntasks: 0-39\n"
STOP = "--agentgym-stop-when-decided"


def project(pytester: pytest.Pytester, body: str = WORDLE_40) -> str:
    node = make_project(pytester)
    suite(pytester, "wordle", body)
    return f"--agentgym-node={node}"


def skip_reasons(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("SKIPPED")]


def worse_candidate(pytester: pytest.Pytester, node: str, *extra: str) -> pytest.RunResult:
    """The baseline (every task solved), then the random policy against it, with the flag."""
    assert run(pytester, "suites", node, "--agentgym-run-id=base").ret == 0
    return run(pytester, "suites", node, "--agentgym-run-id=cand", "--agentgym-model=random",
               "--agentgym-baseline=base", STOP, "-rs", *extra)


def test_a_clearly_worse_candidate_stops_at_a_look_and_fails(pytester):
    node = project(pytester)
    cand = worse_candidate(pytester, node)
    assert cand.ret == 1
    stopped = run_json(pytester, "cand")["stopped_early"]["Wordle"]
    assert stopped["verdict"] == "regressed"
    assert stopped["tasks"] in range(5, 35, 5) and stopped["planned_tasks"] == 40  # a look point of 40 tasks
    assert stopped["planned_episodes"] == 40 and stopped["episodes"] == stopped["tasks"]
    assert stopped["decided"] == {"baseline success, margin 0.05": {"passed": False, "why": stopped["why"]}}
    played = episodes(pytester, "cand")
    # the episodes begun when it stopped (the other slot of the concurrency of 2) finish and
    # are recorded; none begins after the decision
    assert stopped["episodes"] <= stopped["recorded"] <= len(played) <= stopped["recorded"] + 1
    skipped = skip_reasons(cand)
    assert len(skipped) == 1 and f"SKIPPED [{40 - len(played)}]" in skipped[0]
    assert f"stopped early: Wordle stopped after {stopped['tasks']} of 40 tasks" in skipped[0]
    assert "regressed: success fell by" in skipped[0]
    cand.stdout.fnmatch_lines(["*agentgym: STOPPED EARLY: Wordle stopped after * of 40 tasks*regressed*",
                               "GATE FAILED: Wordle baseline success, margin 0.05: success fell by *"
                               "O'Brien-Fleming boundary of the look at * of 40 tasks, exact)"])
    info = run_json(pytester, "cand")
    assert info["counts"]["stopped_early"] == 40 - len(played) and info["status"] == "finished"
    assert [g["outcome"] for g in info["gates"]] == ["failed"]  # decided, not "not judged"
    assert info["settings"]["stop_when_decided"] is True
    report = (pytester.path / "reports" / "cand" / "report.html").read_text()
    assert (f"Stopped early: Wordle stopped after {stopped['episodes']} of 40 episodes "
            f"({stopped['tasks']} of 40 tasks): regressed: success fell by") in report
    assert "GATES NOT JUDGED" not in report


def test_resuming_a_stopped_run_keeps_the_stop_and_plays_nothing_again(pytester):
    """With the flag, the stop an earlier generation recorded stands: its skipped items are
    skipped again (nothing is replayed); without it, the rest is played and the run is a
    full one (its stop is dropped from run.json)."""
    node = project(pytester)
    assert worse_candidate(pytester, node).ret == 1
    before = run_json(pytester, "cand")["stopped_early"]
    played = len(episodes(pytester, "cand"))
    again = run(pytester, "suites", node, "--agentgym-resume=cand", "--agentgym-model=random",
                "--agentgym-baseline=base", STOP, "-rs")
    assert again.ret == 1
    assert len(episodes(pytester, "cand")) == played
    assert run_json(pytester, "cand")["stopped_early"] == before
    assert f"SKIPPED [{40 - played}]" in skip_reasons(again)[0]
    full = run(pytester, "suites", node, "--agentgym-resume=cand", "--agentgym-model=random",
               "--agentgym-baseline=base")
    assert full.ret == 1
    assert len({(e["task_index"], e["repeat"]) for e in episodes(pytester, "cand")}) == 40
    assert run_json(pytester, "cand")["stopped_early"] == {}
    full.stdout.fnmatch_lines(["agentgym: the run resumed stopped Wordle early; without "
                               "--agentgym-stop-when-decided the rest of their episodes are played now"])
    full.stdout.fnmatch_lines(["GATE FAILED: Wordle baseline success*n=40 paired*REGRESSED*"])


def test_an_unchanged_candidate_plays_to_the_end_when_nothing_is_decided(pytester):
    node = project(pytester, "environment: Wordle\ntasks: 0-7\n")
    assert run(pytester, "suites", node, "--agentgym-run-id=base").ret == 0
    same = run(pytester, "suites", node, "--agentgym-run-id=same", "--agentgym-baseline=base", STOP)
    assert same.ret == 0
    assert len(episodes(pytester, "same")) == 8
    assert run_json(pytester, "same")["stopped_early"] == {}
    assert "STOPPED EARLY" not in same.stdout.str()
    same.stdout.fnmatch_lines(["GATE INCONCLUSIVE: Wordle baseline success*n=8 paired*"])


def test_a_threshold_gate_decided_early_stops_and_the_open_one_is_not_judged(pytester):
    """success_rate >= 0.9 fails whatever the rest score once too few of the first tasks
    are solved; the ``==`` gate is never decided early, so it is left not judged."""
    node = project(pytester, WORDLE_40 + "gates: ['success_rate >= 0.9', 'mean_reward == 0.5']\n")
    result = run(pytester, "suites", node, "--agentgym-run-id=gate", "--agentgym-model=random", STOP, "-rs")
    assert result.ret == 1
    stopped = run_json(pytester, "gate")["stopped_early"]["Wordle"]
    assert stopped["verdict"] == "failed" and stopped["tasks"] == 5  # the first look: 5 of 5 failed
    assert stopped["why"].startswith("success_rate >= 0.9 failed: success_rate = ")
    gates = {g["gate"]: g for g in run_json(pytester, "gate")["gates"]}
    assert gates["success_rate >= 0.9"]["outcome"] == "failed"
    assert gates["mean_reward == 0.5"]["outcome"] == "not-judged"
    assert gates["mean_reward == 0.5"]["detail"] == "stopped early: 'success_rate >= 0.9' decided it"
    assert "stopped early: Wordle stopped after 5 of 40 tasks" in skip_reasons(result)[0]


def test_without_a_baseline_or_gates_nothing_stops_and_the_header_says_so(pytester):
    node = project(pytester, "environment: Wordle\ntasks: 0-11\n")
    result = run(pytester, "suites", node, "--agentgym-run-id=plain", "--agentgym-model=random", STOP)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["agentgym: stop when decided: nothing can stop Wordle: no baseline*"])
    assert len(episodes(pytester, "plain")) == 12


def collected(result: pytest.RunResult) -> list[tuple[str, int, int]]:
    keys = [parse_item_name(line.rsplit("::", 1)[-1]) for line in result.outlines if "::" in line]
    return [k for k in keys if k is not None]


def test_the_order_is_the_seeded_permutation_and_the_same_twice(pytester):
    node = project(pytester, "environment: Wordle\ntasks: 0-9\nrepeat: 2\n")
    suite(pytester, "zmaze", "environment: Maze\ntasks: 0-5\n")
    plain = collected(run(pytester, "suites", node, "--collect-only", "-q"))
    first = collected(run(pytester, "suites", node, "--collect-only", "-q", STOP, "--agentgym-seed=7"))
    second = collected(run(pytester, "suites", node, "--collect-only", "-q", STOP, "--agentgym-seed=7"))
    other = collected(run(pytester, "suites", node, "--collect-only", "-q", STOP, "--agentgym-seed=8"))
    assert first == second and first != other
    assert sorted(first) == sorted(plain) and len(first) == 26
    assert [k[0] for k in first] == [k[0] for k in plain]  # each environment keeps its places
    wordle = [(task, repeat) for env, task, repeat in first if env == "Wordle"]
    assert wordle == [(task, repeat) for task in play_order(range(10), 7) for repeat in (1, 2)]
    assert [task for env, task, _ in first if env == "Maze"] == play_order(range(6), 7)
    # without a seed the order is seed 0's, whatever the run id: a rerun plays it again
    by_id = collected(run(pytester, "suites", node, "--collect-only", "-q", STOP, "--agentgym-run-id=r1"))
    assert [t for e, t, _ in by_id if e == "Maze"] == play_order(range(6), 0) != play_order(range(6), 7)


def test_xdist_is_refused_with_why_and_what_to_do(pytester):
    node = project(pytester, "environment: Wordle\ntasks: 0-3\n")
    refused = run(pytester, "suites", node, "--agentgym-run-id=nx", STOP, "-n", "2")
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*--agentgym-stop-when-decided and pytest-xdist (-n) do not go together: "
                                  "deciding an environment early needs every one of its episodes in one "
                                  "process; drop -n or --agentgym-stop-when-decided*"])
    assert not (pytester.path / "reports" / "nx" / "episodes.jsonl").exists()


@pytest.mark.parametrize("flag, given", [("--agentgym-shard", "1/2"),
                                         ("--agentgym-queue", "nats://127.0.0.1:4222")])
def test_a_shard_or_a_work_queue_is_refused_with_why_and_what_to_do(pytester, flag, given):
    node = project(pytester, "environment: Wordle\ntasks: 0-3\n")
    refused = settings_refusal(pytester, "suites", node, STOP, f"{flag}={given}", "--agentgym-run-id=sh")
    assert says(refused, [f"--agentgym-stop-when-decided and {flag} do not go together*one process*"
                          f"drop {flag} or --agentgym-stop-when-decided"]), refused


def test_the_flag_is_also_read_from_the_environment(pytester, monkeypatch):
    node = project(pytester, "environment: Wordle\ntasks: 0-3\n")
    monkeypatch.setenv("AGENTGYM_STOP_WHEN_DECIDED", "1")
    result = run(pytester, "suites", node, "--agentgym-run-id=env")
    assert result.ret == 0
    assert json.loads((pytester.path / "reports" / "env" / "run.json").read_text())["settings"][
        "stop_when_decided"] is True


# -- the bookkeeping around the statistics (run/stopping.py), on crafted records --------------

def _stopper(gates: str, tasks: int = 40):
    from pytest_agentgym.results.gates import Gate
    from pytest_agentgym.run.plans import EnvPlan
    from pytest_agentgym.run.stopping import Stopper

    plan = EnvPlan(gates=tuple(Gate.parse(g) for g in gates.split(";")))
    return Stopper({"W": plan}, [("W", t, 1) for t in range(tasks)], baseline=None, margin=0.05,
                   reward_ranges={"W": (0.0, 1.0)})


def _record(task: int, outcome: str):
    from helpers.report_fixtures import make_episode

    return make_episode("W", task, repeat=1, outcome=outcome)


def test_each_look_is_made_once_on_exactly_its_tasks_whatever_finished_beyond_them():
    """A look at n tasks waits for the first n of the play order and uses only them: tasks
    done beyond the point (concurrency finishes them out of order) neither make a look
    early nor count at it, so one seed stops at the same place however episodes overlap."""
    stopper = _stopper("success_rate >= 0.5")
    for task in [*range(9), *range(10, 23)]:  # everything to 23 but task 9
        stopper.recorded(_record(task, "passed"))
    # the look of 5 (5/40 at worst: open); the look of 10 waits for task 9
    assert stopper.look("W") is None and stopper.watches["W"].used_points == {5}
    stopper.recorded(_record(9, "failed"))
    # 9 of the first 10, 14 of 15, then 19 of the first 20 (19/40 at worst: open, though the 22
    # passed so far would decide it): each point once, on its own tasks; 25 waits for 23 and 24
    assert stopper.look("W") is None and stopper.watches["W"].used_points == {5, 10, 15, 20}
    for task in (23, 24):
        stopper.recorded(_record(task, "passed"))
    stop = stopper.look("W")  # 24 of the first 25 passed: 24/40 at worst
    assert stop is not None and stop.decision.verdict == "passed" and stop.decision.tasks == 25
    assert stop.decision.episodes == 25 and stop.recorded == 25
    assert stop.decided == {"success_rate >= 0.5": True} and stop.open == ()
    assert stopper.look("W") is None and stopper.unannounced() == [stop] and stopper.unannounced() == []


def test_the_looks_follow_the_seeded_play_order():
    """With a seed the looks take prefixes of play_order, not of the task numbers."""
    from pytest_agentgym.results.gates import Gate
    from pytest_agentgym.run.plans import EnvPlan
    from pytest_agentgym.run.stopping import Stopper

    stopper = Stopper({"W": EnvPlan(gates=(Gate.parse("success_rate <= 0.2"),))}, [("W", t, 1) for t in range(40)],
                      baseline=None, margin=0.05, reward_ranges={"W": (0.0, 1.0)}, seed=5)
    order = play_order(range(40), 5)
    assert stopper.watches["W"].order == order
    for task in range(20):  # the first 20 task numbers: not the first 10 of the play order
        stopper.recorded(_record(task, "passed"))
    missing = [t for t in order[:10] if t >= 20]
    assert missing and stopper.look("W") is None
    for task in missing:
        stopper.recorded(_record(task, "passed"))
    stop = stopper.look("W")
    assert stop is not None and stop.decision.verdict == "failed" and stop.decision.tasks == 10
    assert stop.recorded == 20 + len(missing) and stop.decision.episodes == 10


def test_one_failing_gate_stops_and_the_open_ones_are_not_judged():
    from pytest_agentgym.results.gates import GateVerdict
    from pytest_agentgym.run.stopping import stopped_verdicts

    stopper = _stopper("success_rate >= 0.9;success_rate <= 0.3")
    for task in range(10):
        stopper.recorded(_record(task, "failed" if task < 5 else "passed"))
    stop = stopper.look("W")
    assert stop is not None and stop.decision.verdict == "failed"
    assert stop.decided == {"success_rate >= 0.9": False}
    judged = [GateVerdict("W", "success_rate >= 0.9", 0.5, False, "misses"),
              GateVerdict("W", "success_rate <= 0.3", 0.5, False, "misses")]
    out = stopped_verdicts(judged, stopper.stops, metric_of=lambda env: "success", margin=0.05)
    assert [v.outcome for v in out] == ["failed", "not-judged"]
    assert out[1].detail == "stopped early: 'success_rate >= 0.9' decided it"


def test_seeded_order_keeps_each_environments_places():
    from pytest_agentgym.run.stopping import seeded_order

    items = [("A", 0, 1), "other", ("B", 0, 1), ("A", 1, 1), ("A", 1, 2), ("A", 0, 2), ("B", 1, 1), ("A", 2, 1)]
    ordered = seeded_order(items, lambda i: i if isinstance(i, tuple) else None, 3)
    assert [i if isinstance(i, str) else i[0] for i in ordered] == ["A", "other", "B", "A", "A", "A", "B", "A"]
    a_tasks = [i[1:] for i in ordered if isinstance(i, tuple) and i[0] == "A"]
    assert a_tasks == [(t, r) for t in play_order([0, 1, 2], 3) for r in ((1, 2) if t < 2 else (1,))]


def test_a_gate_decided_failing_keeps_the_open_baseline_verdict_as_not_judged():
    """The gate fails at the first look (100 of 800 tasks) while the baseline comparison is
    still open there: the stop records it as open (also through run.json), and the run's
    verdicts list it, not judged, beside the failed gate (issue 40: a stopped environment
    lost its baseline entry)."""
    from pytest_agentgym.results.gates import Gate, GateVerdict
    from pytest_agentgym.run.plans import EnvPlan
    from pytest_agentgym.run.stopping import Stop, Stopper, stopped_verdicts

    base = [_record(task, "passed") for task in range(800)]
    stopper = Stopper({"W": EnvPlan(gates=(Gate.parse("success_rate <= 0.1"),))}, [("W", t, 1) for t in range(800)],
                      baseline=base, margin=0.05, reward_ranges={})
    for record in base[:400]:
        stopper.recorded(record)
    stop = stopper.look("W")
    assert stop is not None and stop.decision.verdict == "failed" and stop.decision.tasks == 100
    assert stop.decided == {"success_rate <= 0.1": False}
    assert stop.open == ("baseline success, margin 0.05",) and stop.recorded == 400
    carried = Stop.from_dict("W", stop.to_dict())  # what a resume reads back from run.json
    assert carried == stop
    out = stopped_verdicts([GateVerdict("W", "success_rate <= 0.1", 1.0, False, "misses")], {"W": carried},
                           metric_of=lambda env: "success", margin=0.05)
    assert [(v.gate, v.outcome) for v in out] == [("success_rate <= 0.1", "failed"),
                                                  ("baseline success, margin 0.05", "not-judged")]
    assert out[1].detail == "stopped early: 'success_rate <= 0.1' decided it"

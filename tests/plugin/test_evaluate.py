"""``pytest_agentgym.evaluate``: a run from inside a training script (issue 24, point 5).

A training script (a Python process of its own) evaluates three times in one
process, every-N-steps style, against the real reference agent and embedded
servers; its metrics must equal a pytest run of the same tasks, and after each
call no child process and no extra thread may be left."""

from __future__ import annotations

import json
import sys

import pytest

from helpers.projects import make_project, run, run_json, suite

pytestmark = pytest.mark.heavy

TRAINING_SCRIPT = """
import json, os, sys, threading
import pytest_agentgym

def children():
    pid = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == pid and fields[0] != "Z":
                found.append(int(entry))
    return found

threads_before = {t.name for t in threading.enumerate()}
calls = []
for step in (10, 20, 30):
    result = pytest_agentgym.evaluate("suites", node=sys.argv[1], run_id=f"step-{step}",
                                      pytest_args=["-p", "no:cacheprovider"])
    calls.append({"exit": result.exit_code, "run_dir": str(result.run_dir), "metrics": result.metrics(),
                  "verdicts": [v.outcome for v in result.verdicts], "children": children(),
                  "threads": sorted({t.name for t in threading.enumerate()} - threads_before)})
print("RESULT " + json.dumps(calls))
"""


def script_result(pytester, text: str, node) -> object:
    """Run ``text`` as a training script of its own (argument: the node profile) and return
    what it printed after ``RESULT `` (JSON)."""
    script = pytester.path / "script.py"
    script.write_text(text)
    done = pytester.run(sys.executable, str(script), str(node), timeout=600)
    assert done.ret == 0, done.stderr.str()[-3000:]
    (line,) = [line for line in done.outlines if line.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def test_three_evaluations_in_one_process_match_pytest_and_leave_nothing_behind(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\ngates: ['success_rate >= 0.5']\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-2\n")
    by_pytest = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=cli")
    assert by_pytest.ret == 0
    calls = script_result(pytester, TRAINING_SCRIPT, node)
    summary = run_json(pytester, "cli")
    assert [c["exit"] for c in calls] == [0, 0, 0]
    assert [c["run_dir"] for c in calls] == [str(pytester.path / "reports" / f"step-{s}") for s in (10, 20, 30)]
    for call in calls:
        assert call["children"] == [] and call["threads"] == [], call  # servers and threads stopped each time
        assert call["verdicts"] == ["passed"]
        assert set(call["metrics"]) == {"Maze", "Wordle"}
        assert call["metrics"]["Maze"]["episodes"] == 4 and call["metrics"]["Wordle"]["episodes"] == 3
        assert call["metrics"] == calls[0]["metrics"]
    # the same figures as the pytest run of the same tasks (its run.json counts, its records)
    from pytest_agentgym.results.aggregate import summarize
    from pytest_agentgym.results.current import current_records
    from pytest_agentgym.results.store import RunDir

    cli = summarize(current_records(RunDir(pytester.path / "reports" / "cli").read_episodes()))
    for env, s in cli.items():
        assert calls[0]["metrics"][env]["mean_reward"] == pytest.approx(s.mean_reward)
        assert calls[0]["metrics"][env]["success_rate"] == pytest.approx(s.success_rate)
    assert summary["counts"]["episodes"] == 7
    # run.json holds the same per-environment figures (a reader of run.json alone has them)
    for env, figures in summary["summaries"].items():
        assert figures["mean_reward"] == pytest.approx(calls[0]["metrics"][env]["mean_reward"])
        assert figures["success_rate"] == pytest.approx(calls[0]["metrics"][env]["success_rate"])
        assert figures["episodes"] == calls[0]["metrics"][env]["episodes"] and len(figures["success_ci95"]) == 2
    assert set(summary["summaries"]) == {"Maze", "Wordle"}


def test_a_hand_edited_summaries_entry_is_dropped_on_reading_not_a_crash():
    from pytest_agentgym.results.records import RunInfo

    base = dict(run_id="r", started_at="2026-01-01T00:00:00Z", node="n", model="m", endpoint="e",
                endpoint_kind="reference", environments=["Maze"], command="pytest")
    assert RunInfo.from_dict({**base, "summaries": ["not", "a", "mapping"]}).summaries == {}
    kept = RunInfo.from_dict({**base, "summaries": {"Maze": {"mean_reward": 0.5}, "Wordle": 3}})
    assert kept.summaries == {"Maze": {"mean_reward": 0.5}}


def test_an_unknown_option_names_the_known_ones():
    import pytest_agentgym

    with pytest.raises(TypeError, match=r"unknown option\(s\) nodes; it takes the plugin's options by name "
                                        r"\(.*node.*\), and any other flag in pytest_args"):
        pytest_agentgym.evaluate("suites", nodes="4090")


def test_keywords_become_the_plugins_flags(monkeypatch):
    """Values as ``--agentgym-<name>=value``, flags as bare ``--agentgym-<name>``, None and False left out."""
    import pytest_agentgym.plugin.evaluate as module

    seen = {}

    def main(args, plugins):  # pytest.main, standing in: what the run would be given
        seen["args"] = args
        return 0

    monkeypatch.setattr(module.pytest, "main", main)
    result = module.evaluate("suites", node="4090", max_rounds=10, stop_when_decided=True, baseline=None,
                             strict_gates=False, pytest_args=["-k", "Maze"])
    assert seen["args"] == ["suites", "--agentgym-node=4090", "--agentgym-max-rounds=10",
                            "--agentgym-stop-when-decided", "-q", "-k", "Maze"]
    assert result.exit_code == 0 and result.run_dir is None and result.metrics() == {}


QUIET_SCRIPT = """
import json, os, sys, tempfile
import pytest_agentgym

def captured(**kwargs):
    '''One evaluate() call with file descriptors 1 and 2 on files of their own: all it prints.'''
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        try:
            result = pytest_agentgym.evaluate("suites", pytest_args=["-p", "no:cacheprovider"], **kwargs)
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        out.seek(0); err.seek(0)
        return {"exit": result.exit_code, "out": out.read().decode(), "err": err.read().decode(),
                "output": getattr(result, "output", None)}

node = sys.argv[1]
calls = {"passed": captured(node=node, run_id="passed"),
         "failed": captured(node=node, run_id="failed", max_rounds=1),
         "usage": captured(node="no-such-node"),
         "loud": captured(node=node, run_id="loud", quiet=False)}
print("RESULT " + json.dumps(calls))
"""


def test_quiet_prints_nothing_for_a_judged_run_and_the_reason_for_any_other(pytester):
    """``quiet`` (the default): a run that passed or failed prints nothing at all (issue 41:
    it printed 36 lines); a usage error still says what was wrong, on stderr; ``quiet=False``
    prints what pytest prints."""
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\ngates: ['success_rate >= 0.5']\n")
    calls = script_result(pytester, QUIET_SCRIPT, node)
    assert [calls[k]["exit"] for k in ("passed", "failed", "usage", "loud")] == [0, 1, 4, 0]
    for judged in ("passed", "failed"):
        assert (calls[judged]["out"], calls[judged]["err"]) == ("", ""), calls[judged]
    assert "GATE FAILED: Maze success_rate >= 0.5" in calls["failed"]["output"]  # kept for the caller
    assert calls["usage"]["out"] == ""
    assert "--agentgym-node=no-such-node: unknown node" in calls["usage"]["err"]
    assert "GATE PASSED: Maze success_rate >= 0.5" in calls["loud"]["out"] and calls["loud"]["output"] == ""

"""Whole trajectories on disk and ``pytest-agentgym export``: a run's records rebuild the
exact conversations the model was sent.

The round trips use a real endpoint that keeps every conversation it was sent
(tests/helpers/logprob_model.py, ``GET /requests``): a pytest run, the rollout
service and an AgentBench run (whose task server rewrites earlier turns) write their
run directories, export writes them as training data, and what is loaded back is
compared with what the endpoint received, request for request.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import subprocess
import sys
from collections import Counter

import httpcore._backends.sync  # noqa: F401  (see below)
import httpx
import pytest
from helpers import TESTS, pythonpath
from helpers.agentbench_server import command as agentbench_command
from helpers.logprob_model import MODEL
from helpers.projects import make_project, run, suite
from helpers.rollout_services import post, reference_agent, rollout_server

from pytest_agentgym.cli import main as cli
from pytest_agentgym.model.endpoints import PROOF_MESSAGES
from pytest_agentgym.model.reference import tokens as T
from pytest_agentgym.process.managed import ManagedServer, free_port
from pytest_agentgym.results.conversation import PROMPTS_FILE, TOKENS_FILE
from pytest_agentgym.results.export import export_run

pytestmark = pytest.mark.heavy

# pytester restores sys.modules after each test, so what httpx imports on its first connection
# is imported here, before: else a later test's refused connection raises another ConnectError
# class than the one httpx maps (and the health probe lets it through).

TOKENS = "--agentgym-sampling=return_token_ids=true,logprobs=true"


def recording_model(log_dir, **env) -> ManagedServer:
    return ManagedServer("logprob-model", command=[sys.executable, str(TESTS / "helpers" / "logprob_model.py"),
                                                   "{port}"],
                         port=free_port(), log_path=log_dir / "logprob-model.log", startup_timeout=60,
                         env={"PYTHONPATH": pythonpath(TESTS.parent, TESTS), **env}).start()


def sent_to(model: ManagedServer) -> Counter:
    """Every conversation the endpoint was sent for an episode, as a multiset (not the one-token
    chat that proves the route before the first episode: model/endpoints.py PROOF_MESSAGES)."""
    return Counter(json.dumps(m) for m in httpx.get(f"{model.url}/requests", timeout=10).json()
                   if m != list(PROOF_MESSAGES))


def export(run_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "export", str(run_dir), *args],
                          capture_output=True, text=True, timeout=120)


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def plain(row: dict) -> list[dict]:
    """A row's ``messages`` as they were sent: without the training ``weight`` of each."""
    return [{"role": m["role"], "content": m["content"]} for m in row["messages"]]


def test_a_pytest_run_exports_the_conversations_its_model_was_sent(pytester, tmp_path):
    model = recording_model(tmp_path)
    try:
        node = make_project(pytester)
        suite(pytester, "maze", "environment: Maze\ntasks: 0-2\n")
        suite(pytester, "wordle", "environment: Wordle\ntasks: 0-1\n")
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=r1",
                     f"--agentgym-base-url={model.url}/v1", f"--agentgym-model={MODEL}", TOKENS)
        assert result.ret == 0, result.stdout.str()[-2000:]
        sent = sent_to(model)
    finally:
        model.stop()
    run_dir = pytester.path / "reports" / "r1"
    # each opening once, by hash: two environments, two openings
    assert len(rows(run_dir / PROMPTS_FILE)) == 2
    assert len(rows(run_dir / TOKENS_FILE)) == 5

    done = export(run_dir, "--format", "turns-jsonl")
    assert done.returncode == 0, done.stderr
    turns = rows(run_dir / "export" / "turns-jsonl.jsonl")
    assert Counter(json.dumps(r["prompt"]) for r in turns) == sent  # request for request
    assert all(r["completion_ids"] and len(r["logprobs"]) == len(r["completion_ids"]) for r in turns)

    done = export(run_dir)  # chat-jsonl: the last conversation of each episode and its reply
    assert done.returncode == 0 and "5 episodes written" in done.stdout, done.stderr
    chats = rows(run_dir / "export" / "chat-jsonl.jsonl")
    assert len(chats) == 5 and all(sent[json.dumps(plain(r)[:-1])] == 1 for r in chats)
    assert all(r["messages"][-1]["role"] == "assistant" and r["tokens"]["completion_ids"] for r in chats)


def test_an_hf_dataset_export_loads_back_with_datasets(pytester, tmp_path):
    pytest.importorskip("datasets")
    node = make_project(pytester)
    suite(pytester, "textcraft", "environment: TextCraft\ntasks: 0-3\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=hf")
    assert result.ret == 0, result.stdout.str()[-2000:]
    run_dir = pytester.path / "reports" / "hf"
    assert export(run_dir).returncode == 0
    out = tmp_path / "dataset"
    done = export(run_dir, "--format", "hf-dataset", "--only", "success", "-o", str(out))
    assert done.returncode == 0, done.stderr
    # loaded in a child: importing datasets changes httpx's transport in the importing process
    script = ("import datasets, json, sys; d = datasets.load_dataset(sys.argv[1], split='train'); "
              "print(json.dumps([r['messages'] for r in d]))")
    loading = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=300)
    assert loading.returncode == 0, loading.stderr[-2000:]
    loaded = json.loads(loading.stdout.splitlines()[-1])
    chats = rows(run_dir / "export" / "chat-jsonl.jsonl")
    assert loaded == [r["messages"] for r in chats if r["success"]]
    assert len(loaded) == sum(r["success"] for r in chats) > 0


def test_rollout_service_records_keep_tokens_batch_and_sample_and_export_them(tmp_path):
    agent = reference_agent(tmp_path)
    service = rollout_server(tmp_path / "service", "--node", "local", "--concurrency", "4", "--allow-base-url",
                             agent.url)
    try:
        body = {"env": "maze", "model": "reference", "base_url": agent.url, "ids": [0, 1], "n": 2,
                "sampling": {"temperature": 1.0, "return_token_ids": True, "logprobs": True}}
        first, second = (post(service, body).json()["rollouts"] for _ in range(2))
    finally:
        service.stop()
        agent.stop()
    answers = first + second
    assert {r["batch"] for r in first} != {r["batch"] for r in second} and len({r["batch"] for r in first}) == 1
    run_dir = tmp_path / "service" / "reports" / "rollouts"
    done = export(run_dir)
    assert done.returncode == 0, done.stderr
    exported = {r["episode_id"]: r for r in rows(run_dir / "export" / "chat-jsonl.jsonl")}
    assert len(exported) == len(answers) == 8
    for answer in answers:
        row = exported[answer["episode_id"]]
        assert plain(row) == answer["messages"][:-1]  # the answer ends with the last feedback
        assert (row["batch"], row["sample"], row["tokens"]) == (answer["batch"], answer["sample"], answer["tokens"])
        view = answer["tokens"]
        assert view["rerendered"] is None
        policy = [m["content"] for m in answer["messages"] if m["role"] == "assistant"][1:]  # after the ack
        spans = [T.decode(view["completion_ids"][a:b]) for a, b in view["turns"]]
        assert spans == [reply + "<|im_end|>" for reply in policy]
        assert answer["turn_rewards"][-1] == answer["reward"]


def test_a_server_that_rewrites_earlier_turns_is_exported_as_it_was_sent(pytester, monkeypatch, tmp_path):
    """AgentBench's ALFWorld task drops earlier action lists: each turn's conversation is
    not the previous one plus reply and feedback, and the record keeps what was sent."""
    monkeypatch.setenv("AGENTGYM_REFERENCE_POLICIES", "helpers.agentbench_policy:HOUSE")
    model = recording_model(tmp_path, AGENTGYM_REFERENCE_POLICIES="helpers.agentbench_policy:HOUSE")
    try:
        node = make_project(pytester)
        overrides = {"AgentBench-ALFWorld": {"command": shlex.join(agentbench_command("--max-step", "12")),
                                             "tasks": "0-2"}}
        node.write_text(node.read_text().replace(
            "envs: {servers: spawn}", "envs: {servers: spawn, overrides: " + json.dumps(overrides) + "}"))
        suite(pytester, "house", "environment: AgentBench-ALFWorld\ntasks: 0-2\n")
        monkeypatch.setenv("PYTHONPATH", pythonpath(TESTS))
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=ab",
                     f"--agentgym-base-url={model.url}/v1", f"--agentgym-model={MODEL}")
        assert result.ret == 0, result.stdout.str()[-2000:]
        sent = sent_to(model)
    finally:
        model.stop()
    run_dir = pytester.path / "reports" / "ab"
    records = rows(run_dir / "episodes.jsonl")
    assert any(turn["sent"] for record in records for turn in record["turns"])  # it did rewrite
    assert export(run_dir, "--format", "turns-jsonl").returncode == 0
    turns = rows(run_dir / "export" / "turns-jsonl.jsonl")
    assert Counter(json.dumps(r["prompt"]) for r in turns) == sent


def test_export_says_what_is_wrong_and_leaves_out_what_it_cannot_rebuild(tmp_path):
    not_run = export(tmp_path)
    assert not_run.returncode == 2 and "has no run.json" in not_run.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest_agentgym", "export", str(tmp_path), "--format", "xlsx"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'xlsx'" in bad.stderr


# --------------------------------------------------------------------------- --format csv


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def csv_run(root):
    """Five episodes written in the order they finished (not task order); one errored with a
    message of two lines after a retry, one resumed from an error to a pass (generation 2)."""
    from dataclasses import replace

    from pytest_agentgym.results.records import ErrorInfo

    from helpers.report_fixtures import make_episode, make_info, write_run

    error = ErrorInfo("EnvHTTPError", "POST /step answered 502 Bad Gateway\nTraceback (most recent call last): ...",
                      "env")
    retried = (ErrorInfo("EndpointTimeout", "no answer in 60 s", "model"),)
    first = make_episode("BabyAI", 1, outcome="error", error=ErrorInfo("EnvUnreachable", "refused", "env"))
    episodes = [make_episode("Maze", 1, outcome="unsolved"),
                make_episode("BabyAI", 2, outcome="error", error=error, retried=retried),
                first, make_episode("BabyAI", 0, outcome="passed"), make_episode("BabyAI", 1, repeat=1, outcome="failed"),
                replace(make_episode("BabyAI", 1, outcome="passed"), generation=2)]
    # resumed once: run.json is at generation 2 (a record beyond the run's generation is no record of it)
    return write_run(root, make_info(environments=("BabyAI", "Maze"), generation=2), episodes)


def test_csv_has_a_row_per_episode_in_task_order_errors_included(tmp_path, capsys):
    run = csv_run(tmp_path)
    assert cli(["export", str(run.path), "--format", "csv"]) == 0
    target = run.path / "export" / "episodes.csv"
    assert capsys.readouterr().out.strip() == f"5 episodes written to {target}"
    text = target.read_text(encoding="utf-8")
    assert text.splitlines()[0] == (
        "run_id,episode_id,env,task_index,repeat,generation,outcome,success,reward,score,min_reward,rounds,"
        "max_rounds,stop_reason,duration_s,attempts,error_type,error_where,error_message,model,checkpoint,node,"
        "worker,started_at,prompt_tokens,completion_tokens,nodeid")
    rows = csv_rows(text)
    assert [(r["env"], r["task_index"], r["repeat"]) for r in rows] == [
        ("BabyAI", "0", "0"), ("BabyAI", "1", "0"), ("BabyAI", "1", "1"), ("BabyAI", "2", "0"), ("Maze", "1", "0")]
    assert [r["outcome"] for r in rows] == ["passed", "passed", "failed", "error", "unsolved"]
    passed, resumed, _, errored, unsolved = rows
    assert (resumed["generation"], resumed["error_type"]) == ("2", "")  # the newest generation, once
    # make_episode: task 0 takes 4.5 s; turns of 300 + 340 prompt and 45 + 45 completion tokens
    assert {k: passed[k] for k in ("run_id", "success", "reward", "rounds", "stop_reason", "duration_s", "attempts",
                                   "model", "checkpoint", "node", "started_at", "prompt_tokens",
                                   "completion_tokens", "error_message")} == {
        "run_id": "20261121-120000-abcd", "success": "true", "reward": "1.0", "rounds": "2", "stop_reason": "done",
        "duration_s": "4.5", "attempts": "1", "model": "qwen3.5-9b", "checkpoint": "ckpt/step-1200", "node": "4090",
        "started_at": "2026-11-21T12:01:00+00:00", "prompt_tokens": "640", "completion_tokens": "90",
        "error_message": ""}
    assert {k: errored[k] for k in ("success", "reward", "stop_reason", "attempts", "error_type", "error_where",
                                    "error_message")} == {
        "success": "false", "reward": "", "stop_reason": "error", "attempts": "2", "error_type": "EnvHTTPError",
        "error_where": "env", "error_message": "POST /step answered 502 Bad Gateway"}  # its first line
    assert (unsolved["success"], unsolved["reward"]) == ("false", "0.0")


def test_csv_only_and_standard_output(tmp_path, capsys):
    run = str(csv_run(tmp_path).path)
    assert cli(["export", run, "--format", "csv", "--only", "scored", "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert [r["outcome"] for r in csv_rows(out)] == ["passed", "passed", "failed", "unsolved"]
    assert err.strip() == "4 episodes written to standard output; left out: 1 with an infrastructure error"
    assert not (tmp_path / "export").exists() and not list(tmp_path.rglob("episodes.csv"))

    mine = tmp_path / "mine.csv"
    assert cli(["export", run, "--format", "csv", "--only", "success", "--output", str(mine)]) == 0
    assert [r["task_index"] for r in csv_rows(mine.read_text())] == ["0", "1"]
    assert "left out: 2 not successful, 1 with an infrastructure error" in capsys.readouterr().out

    for args, says in ((["--only", "all"], "--only all is for --format csv"),
                       (["--format", "hf-dataset", "-o", "-"], "cannot take --format hf-dataset")):
        assert cli(["export", run, *args]) == 2, args
        assert says in capsys.readouterr().err, args


def test_csv_cells_are_text_never_formulas_and_unreported_tokens_are_empty(tmp_path):
    from pytest_agentgym.results.records import ErrorInfo, Turn

    from helpers.report_fixtures import make_episode, make_info, write_run

    untold = (Turn(0, "You see a wall.", "Action:\nturn left", "turn left", "You turned left.", 0.0, True, 0.5, 0.1),)
    episodes = [make_episode("Maze", 0, outcome="error", error=ErrorInfo(
                    "EnvBadResponse", '=HYPERLINK("http://127.0.0.1:9/x","open") in the answer, field "reward"', "env")),
                make_episode("Maze", 1, turns=untold)]
    run = write_run(tmp_path, make_info(environments=("Maze",)), episodes)
    # one way a spreadsheet program reads cells: a leading =, +, - or @ starts a formula
    errored, quiet = csv_rows((export_run(run.path, format="csv").path).read_text(encoding="utf-8"))
    assert errored["error_message"] == '\'=HYPERLINK("http://127.0.0.1:9/x","open") in the answer, field "reward"'
    assert (quiet["prompt_tokens"], quiet["completion_tokens"]) == ("", "")  # the endpoint reported no usage
    assert quiet["reward"] == "1.0" and quiet["model"] == "qwen3.5-9b"

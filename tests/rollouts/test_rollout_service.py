"""The rollout service end to end, with real processes: the service
(`pytest-agentgym rollout-server`, node local: embedded servers it spawns),
the reference agent, and a test endpoint that sends logprobs and token ids."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import httpx
import pytest
from helpers import REPO
from helpers.logprob_model import MODEL, token_data_for
from helpers.rollout_services import logprob_model, post, reference_agent, rollout_server
from helpers.run_dirs import read_episodes

from pytest_agentgym.rollouts.request import episode_seed

pytestmark = pytest.mark.heavy

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there
ISSUE_BODY = {"env": "textcraft", "model": "reference", "base_url": None, "ids": [0, 1, 2, 3], "max_round": 10}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """(service, reference agent, logprob endpoint, the service's run directory)."""
    base = tmp_path_factory.mktemp("rollouts")
    agent = reference_agent(base)
    model = logprob_model(base)
    # the service calls only the endpoints it was started with (3: a closed port, for the 400 of an unreachable one)
    service = rollout_server(base / "service", "--node", "local", "--concurrency", "4", "--allow-base-url",
                             agent.url, "--allow-base-url", model.url, "--allow-base-url", UNREACHABLE)
    yield service, agent, model, base / "service" / "reports" / "rollouts"
    for server in (service, model, agent):
        server.stop()


def _body(agent, **changes):
    return {**ISSUE_BODY, "base_url": agent.url, **changes}


def test_the_issue_body_gives_the_rewards_of_a_pytest_run(stack, pytester):
    service, agent, _, run_dir = stack
    answer = post(service, _body(agent))
    assert answer.status_code == 200, answer.text
    rollouts = answer.json()["rollouts"]
    assert [(r["id"], r["sample"]) for r in rollouts] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    babyai = post(service, _body(agent, env="BabyAI", ids=[0, 5, 7], max_round=10)).json()["rollouts"]

    # the same episodes in a pytest run on the same node
    (pytester.path / "textcraft.yaml").write_text("environment: TextCraft\ntasks: 0-3\n")
    (pytester.path / "babyai.yaml").write_text("environment: BabyAI\ntasks: [0, 5, 7]\n")
    result = pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "textcraft.yaml",
                          "babyai.yaml", "--agentgym-node=local", "--agentgym-max-rounds=10",
                          "--agentgym-run-id=pytest-run", timeout=300)
    assert result.ret == 0, result.stdout.str()[-3000:]
    played = {(r["env"], r["task_index"]): r for r in read_episodes(pytester.path / "reports" / "pytest-run")}
    assert len(played) == 7
    for rollout in rollouts + babyai:
        record = played[(rollout["env"], rollout["id"])]
        assert rollout["error"] is None
        assert (rollout["reward"], rollout["success"], rollout["rounds"], rollout["stop_reason"]) == \
               (record["reward"], record["success"], record["rounds"], record["stop_reason"])
        assert rollout["actions"] == [t["action"] for t in record["turns"]]
        replies = [m["content"] for m in rollout["messages"] if m["role"] == "assistant"][1:]  # after the ack
        assert replies == [t["reply"] for t in record["turns"]]
    # BabyAI's reward depends on the steps taken: the rewards differ, and still agree
    assert len({r["reward"] for r in babyai}) > 1
    # each rollout is a scored conversation, also kept in the service's run directory
    first = rollouts[0]
    assert first["messages"][0]["role"] == "user" and "craft" in first["messages"][0]["content"].lower()
    assert first["messages"][-1]["role"] == "user" and first["usage"]["completion_tokens"] > 0
    kept = {r["episode_id"]: r for r in read_episodes(run_dir)}
    assert all(kept[r["episode_id"]]["reward"] == r["reward"] for r in rollouts + babyai)


def test_n_gives_n_samples_per_id_with_their_own_seeds(stack):
    service, agent, _, run_dir = stack
    answer = post(service, _body(agent, model="random", ids=[4, 9], n=4, seed=11, max_round=4,
                                 sampling={"temperature": 1.0}))
    assert answer.status_code == 200, answer.text
    rollouts = answer.json()["rollouts"]
    assert [(r["id"], r["sample"]) for r in rollouts] == [(i, s) for i in (4, 9) for s in range(4)]
    # each rollout its own stream: the batch seed, the entry's position in ids, the sample
    assert [r["sampling"]["seed"] for r in rollouts] == [episode_seed(11, e, k) for e in range(2) for k in range(4)]
    assert [(r["seed"]["entry"], r["seed"]["sample"]) for r in rollouts] == [(e, k) for e in range(2) for k in range(4)]
    assert all(r["sampling"]["temperature"] == 1.0 for r in rollouts)
    assert len({r["episode_id"] for r in rollouts}) == 8  # each its own record
    # the random policy draws from the request's seed: the samples of one id differ
    assert len({tuple(r["actions"]) for r in rollouts if r["id"] == 4}) > 1
    kept = [r for r in read_episodes(run_dir) if r["episode_id"] in {x["episode_id"] for x in rollouts}]
    assert sorted(r["repeat"] for r in kept if r["task_index"] == 4) == [1, 2, 3, 4]


def test_logprobs_and_token_ids_are_passed_through_untouched(stack):
    service, _, model, run_dir = stack
    asked = {"logprobs": True, "top_logprobs": 2, "return_token_ids": True}
    answer = post(service, {"env": "TextCraft", "model": MODEL, "base_url": model.url, "ids": [1, 2],
                            "max_round": 6, "sampling": asked})
    assert answer.status_code == 200, answer.text
    sent = httpx.get(f"{model.url}/requests").json()
    for rollout in answer.json()["rollouts"]:
        assert rollout["error"] is None and rollout["rounds"] >= 2
        assert len(rollout["token_data"]) == rollout["rounds"]
        messages = rollout["messages"]
        for turn, data in enumerate(rollout["token_data"]):
            shown = messages[:3 + 2 * turn]  # what the model was sent for this turn
            reply = messages[3 + 2 * turn]["content"]
            assert shown in sent  # the conversation is exactly what the endpoint saw
            made = token_data_for(reply, shown, logprobs=True, top=2, token_ids=True)
            # the endpoint's fields, and the route the turn took (this endpoint has no /tokenize)
            assert data == {**made["choice"], **made["body"], "token_in": False}
            assert len(data["logprobs"]["content"][0]["top_logprobs"]) == 2
    # the run directory keeps the rollouts without their per-token data
    kept = [r for r in read_episodes(run_dir) if r["model"] == MODEL]
    assert kept and all(t["token_data"] is None for r in kept for t in r["turns"])

    plain = post(service, {"env": "TextCraft", "model": MODEL, "base_url": model.url, "ids": [1], "max_round": 3})
    assert plain.json()["rollouts"][0]["token_data"] == [None] * plain.json()["rollouts"][0]["rounds"]


@pytest.mark.parametrize(("change", "expected"), [
    ({"env": "NoSuchEnv"}, "unknown environment 'NoSuchEnv'; known on node local: BabyAI, TextCraft, Maze, Wordle"),
    ({"env": "SciWorld"}, "environment 'SciWorld' is skipped on node local"),
    ({"ids": [0, 544]}, "id(s) 544 out of range: TextCraft has tasks 0-543"),
    ({"ids": []}, "'ids' must be a non-empty list"),
    ({"n": 0}, "'n' must be a whole number >= 1"),
    ({"n": 4}, "n 4 with temperature 0 (from node local's default sampling) samples 4 identical rollouts"),
    ({"max_rounds": 3}, "unknown key(s) max_rounds"),
    ({"sampling": {"temprature": 1}}, "sampling: unknown key(s) temprature"),
    ({"model": "gpt-4o"}, "model 'gpt-4o' is not served at"),
    ({"base_url": UNREACHABLE}, f"base_url {UNREACHABLE}/v1 is unreachable"),
    ({"base_url": "ftp://example"}, "'base_url' must start with http:// or https://"),
])
def test_bad_batches_are_400_with_what_to_fix(stack, change, expected):
    service, agent, _, _ = stack
    answer = post(service, _body(agent, **change), timeout=30)
    assert answer.status_code == 400
    assert expected in answer.json()["error"]


def test_a_body_that_is_not_json_is_400(stack):
    answer = post(stack[0], "{env: textcraft")
    assert answer.status_code == 400 and "the body is not JSON" in answer.json()["error"]


def test_jobs_and_json_lines_answer_large_batches(stack):
    service, agent, _, _ = stack
    body = _body(agent, env="Maze", ids=[0, 1, 2, 3, 4], max_round=8)
    started = post(service, body, query="?async=1")
    assert started.status_code == 202, started.text
    job = started.json()
    assert job["status"] == "running" and job["total"] == 5
    view = httpx.get(f"{service.url}{job['url']}", params={"wait": 60}, timeout=90).json()
    assert view["status"] == "done" and view["finished"] == 5
    assert sorted(r["id"] for r in view["rollouts"]) == [0, 1, 2, 3, 4]

    with httpx.stream("POST", f"{service.url}/rollouts?stream=1", json=body, timeout=90) as lines:
        assert lines.headers["content-type"].startswith("application/x-ndjson")
        rows = [json.loads(line) for line in lines.iter_lines() if line]
    assert rows[-1] == {"done": True, "rollouts": 5, "run_id": "rollouts", "env": "Maze", "model": "reference"}
    assert sorted(r["id"] for r in rows[:-1]) == [0, 1, 2, 3, 4]
    # the same episodes, the same rewards, however they were asked for
    assert {r["id"]: r["reward"] for r in rows[:-1]} == {r["id"]: r["reward"] for r in view["rollouts"]}
    assert httpx.get(f"{service.url}/rollouts/job-0-none").status_code == 404


def test_health_then_shutdown_leaves_a_finished_run_with_its_report(stack, tmp_path):
    service, agent, _, _ = stack
    health = httpx.get(f"{service.url}/health").json()
    assert health["status"] == "ok" and health["in_flight"] == 0 and health["rollouts_finished"] > 0
    assert set(health["servers"]) >= {"TextCraft"}

    # a second service of its own, stopped with SIGTERM as a process manager would
    other = rollout_server(tmp_path, "--allow-base-url", agent.url, run_id="stopped")
    played = post(other, _body(agent, ids=[0, 1]))
    assert played.status_code == 200, played.text
    other.proc.send_signal(signal.SIGTERM)
    assert other.proc.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises it after shutting down
    run_dir = tmp_path / "reports" / "stopped"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["counts"] == {"episodes": 2, "errors": 0, "duplicates": 0}
    assert info["model"] == "reference" and info["environments"] == ["TextCraft"]
    assert "TextCraft" in (run_dir / "report.html").read_text()
    other.stop()


def test_the_banner_comes_once_the_port_accepts(tmp_path):
    """The URL it prints answers at once: a process manager or a trainer that waits for the
    line and connects needs no retry loop. Port 0: the banner names the port the system gave."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest_agentgym", "rollout-server", "--port", "0",
                             "--run-id", "banner"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    try:
        said = []
        while not said or not said[-1].startswith("rollout service on "):
            line = lines.get(timeout=60)
            assert line is not None, f"the service ended (exit {proc.wait()}) before its banner: {''.join(said)}"
            said.append(line)
        url = said[-1].split()[3]
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        answer = httpx.get(f"{url}/health", timeout=10)  # right away, once
        assert answer.status_code == 200 and answer.json()["run_id"] == "banner"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

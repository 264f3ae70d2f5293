"""A model endpoint that goes away mid-run, as a gateway does when it is restarted
(docs/outages.md): with ``model.outage.policy: wait`` the run pauses and goes on when
it is back, every episode scored; a wait that runs out errors the episodes, saying how
long it waited; ``failover`` moves to the next endpoint of the chain, the records name
both models and the gate refuses to judge the mix. The endpoint is a real reference
agent process that the test starts, kills (SIGKILL) and starts again on its port, as a
user's own endpoint: the plugin never restarts it."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers.owned_agent import agents  # noqa: F401  (a fixture)
from helpers.projects import episodes, run, run_json, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until
from pytest_agentgym.config.profile import DEFAULT_OUTAGE_WAIT_S, NodeProfile, OutagePolicy, ProfileError
from pytest_agentgym.process.health import free_port

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

TASKS = 8

NODE = """\
name: outagenode
model:
  endpoints:
{endpoints}
  retries: 1
  outage: {outage}
limits: {{max_rounds: 15, episode_timeout: 60, concurrency: 2}}
envs: {{servers: spawn}}
"""


def project(pytester: pytest.Pytester, endpoints: list[tuple[str, str]], outage: str, gates: str = "") -> Path:
    listed = "\n".join(f"    - {{kind: openai, url: '{url}/v1', model: {model}}}" for url, model in endpoints)
    node = pytester.path / "outagenode.yaml"
    node.write_text(NODE.format(endpoints=listed, outage=outage))
    (pytester.path / "suites").mkdir()
    suite(pytester, "maze", f"environment: Maze\ntasks: 0-{TASKS - 1}\n{gates}")
    return node


def start_run(pytester: pytest.Pytester, node: Path, run_id: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", f"--agentgym-run-id={run_id}", "--agentgym-progress=each"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def harness_log(run_dir: Path) -> str:
    path = run_dir / "logs" / "harness.log"
    return path.read_text() if path.is_file() else ""


def finish(proc: subprocess.Popen) -> str:
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return output.decode(errors="replace")


# -- the policy in the node profile ------------------------------------------------------------


def test_the_field_node_waits_ten_minutes_and_other_nodes_error_as_before(tmp_path):
    field = NodeProfile.load("4090", tmp_path)
    assert field.outage == OutagePolicy(policy="wait", wait_s=600.0, probe_every_s=2.0)
    assert DEFAULT_OUTAGE_WAIT_S == 600.0
    assert NodeProfile.load("local", tmp_path).outage.policy == "fail"
    field.model_settings()  # the model section's own reader takes the key


@pytest.mark.parametrize("outage, says", [
    ("{policy: pause}", "model.outage.policy is 'pause'; use 'fail'"),
    ("{policy: wait, wait_s: 0}", "model.outage.wait_s must be a number of seconds above 0"),
    ("{policy: wait, wait: 60}", "model.outage has unknown key(s) wait; it takes policy, wait_s, probe_every_s"),
    ("wait", "model.outage must be a mapping, e.g. outage: {policy: wait, wait_s: 600}"),
    ("{policy: failover}", "model.outage.policy is failover, but model.endpoints lists one endpoint"),
])
def test_a_bad_outage_section_names_the_key_and_the_fix(tmp_path, outage, says):
    node = tmp_path / "bad.yaml"
    node.write_text(NODE.format(endpoints="    - {kind: openai, url: 'http://127.0.0.1:9/v1', model: m}",
                                outage=outage))
    with pytest.raises(ProfileError) as raised:
        NodeProfile.load(str(node), tmp_path)
    assert str(node) in str(raised.value) and says in str(raised.value)


# -- wait -------------------------------------------------------------------------------------------


def test_an_endpoint_killed_and_restarted_mid_run_is_waited_for_and_every_episode_scored(pytester, agents):
    agent = agents()
    node = project(pytester, [(agent.url, "reference")], "{policy: wait, wait_s: 120, probe_every_s: 0.2}")
    run_dir = pytester.path / "reports" / "waited"
    proc = start_run(pytester, node, "waited")
    wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 2, 120, "2 episodes recorded", procs=(proc,))
    agent.kill()
    wait_until(lambda: "new episodes paused" in harness_log(run_dir), 60, "the run pauses", procs=(proc,))
    paused_at = written_lines(run_dir / "episodes.jsonl")
    agents(agent.port)  # back on the same port
    text = finish(proc)

    assert proc.returncode == 0, text
    records = episodes(pytester, "waited")
    assert sorted(r["task_index"] for r in records) == list(range(TASKS))
    assert all(r["error"] is None and r["reward"] is not None for r in records), text
    assert paused_at < TASKS  # the kill did land mid-run
    retried = [r for r in records if r["retried"]]
    # the episodes in flight at the kill (2 at most) were played again, once each
    assert 1 <= len(retried) <= 2 and all(len(r["retried"]) == 1 for r in retried), retried
    assert {(e["where"], e["type"]) for r in retried for e in r["retried"]} == {("model", "EndpointDown")}
    log = harness_log(run_dir)
    assert f"model endpoint openai reference at {agent.url}/v1 unreachable (connection refused): new episodes " \
           "paused; probing it every 0.2 s for up to 120 s (model.outage.wait_s)" in log
    assert "answers again after" in log and "episodes resumed; those it cut short are played again" in log
    assert "agentgym: model endpoint openai reference at" in text and "new episodes paused" in text
    assert text.count("answers again after") >= 1, text
    info = run_json(pytester, "waited")
    assert info["status"] == "finished"
    assert any("new episodes paused" in note for note in info["notes"])
    assert any("answers again after" in note for note in info["notes"])


def test_a_wait_that_runs_out_errors_the_episodes_saying_how_long_it_waited(pytester, agents):
    agent = agents()
    node = project(pytester, [(agent.url, "reference")], "{policy: wait, wait_s: 1.5, probe_every_s: 0.2}")
    run_dir = pytester.path / "reports" / "gone"
    proc = start_run(pytester, node, "gone")
    wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 2, 120, "2 episodes recorded", procs=(proc,))
    agent.kill()
    text = finish(proc)

    assert proc.returncode == 1, text
    records = episodes(pytester, "gone")
    assert sorted(r["task_index"] for r in records) == list(range(TASKS))
    errored = [r for r in records if r["error"] is not None]
    assert errored, text
    assert all(r["error"]["type"] == "EndpointDown" for r in errored)
    messages = [r["error"]["message"] for r in errored]
    assert any("waited 2 s for the endpoint to come back (model.outage.wait_s: 1.5); it did not "
               "(connection refused)" in m for m in messages), messages
    assert all("model.outage.wait_s" in m for m in messages), messages
    assert "still unreachable after waiting 2 s" in harness_log(run_dir)

    # the endpoint still down: the resume says so (not "another model"), and records nothing
    before = written_lines(run_dir / "episodes.jsonl")
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=gone")
    said = refused.stdout.str() + refused.stderr.str()
    assert refused.ret == 3, said  # infrastructure, as a run with no endpoint: not a usage error
    assert "agentgym: NOT PLAYED: cannot resume run gone" in said and "'none' now" not in said, said
    assert (f"now: no model endpoint is available: primary openai at {agent.url}/v1 unhealthy (connection "
            "refused). Start one of them, or change model.endpoints in the node profile. Its episodes were "
            "played by model 'reference' (openai); nothing was played or recorded. Once that endpoint "
            "answers, resume again: ") in said, said
    assert written_lines(run_dir / "episodes.jsonl") == before

    # the endpoint back, the same model: resuming plays the errored episodes again
    agents(agent.port)
    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=gone")
    assert resumed.ret == 0, resumed.stdout.str()
    newest = {}
    for r in episodes(pytester, "gone"):  # the newest generation of each episode counts
        if r["generation"] >= newest.get(r["task_index"], {"generation": 0})["generation"]:
            newest[r["task_index"]] = r
    assert sorted(newest) == list(range(TASKS))
    assert all(r["error"] is None and r["model"] == "reference" for r in newest.values())
    assert {r["generation"] for r in newest.values() if r["task_index"] in {e["task_index"] for e in errored}} == {2}
    assert run_json(pytester, "gone")["status"] == "finished"


# -- failover ---------------------------------------------------------------------------------------


def test_failover_moves_to_the_next_endpoint_and_the_gate_is_not_judged_on_two_models(pytester, agents):
    first, second = agents(), agents()  # the second serves its other model, "random"
    node = project(pytester, [(first.url, "reference"), (second.url, "random")],
                   "{policy: failover}", gates="gates: [success_rate >= 0.0]\n")
    run_dir = pytester.path / "reports" / "moved"
    proc = start_run(pytester, node, "moved")
    wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 2, 120, "2 episodes recorded", procs=(proc,))
    first.kill()
    text = finish(proc)

    records = episodes(pytester, "moved")
    assert sorted(r["task_index"] for r in records) == list(range(TASKS))
    assert all(r["error"] is None for r in records), text
    models = {r["model"] for r in records}
    assert models == {"reference", "random"}, models
    cut_short = [r for r in records if r["retried"]]
    assert cut_short and all(r["model"] == "random" for r in cut_short)  # the model of the attempt that counts
    log = harness_log(run_dir)
    assert f"failed over to openai random at {second.url}/v1 (model.outage.policy: failover)" in log
    (gate,) = run_json(pytester, "moved")["gates"]
    assert gate["outcome"] == "error" and gate["value"] is None
    n_ref = sum(r["model"] == "reference" for r in records)
    assert gate["detail"].startswith(f"not judged: episodes of two models: random ({TASKS - n_ref}), "
                                     f"reference ({n_ref})"), gate
    assert "GATE ERROR" in text and "episodes of two models" in text, text
    assert proc.returncode == 1, text
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_failover_passes_over_an_endpoint_that_answers_health_but_cannot_chat(pytester, agents):
    """The chain's next endpoint answers /v1/models but 404s on chat completions: failover proves
    each candidate with the one-token chat the start uses, passes over it and moves to the one
    after; the skipped endpoint is named with the reason."""
    from helpers.model_faults import FakeEndpoint, status

    first, third = agents(), agents()  # the third serves its other model, "random"
    with FakeEndpoint(script=[status(404)]) as health_only:
        node = project(pytester, [(first.url, "reference"), (health_only.url, "fake-model"), (third.url, "random")],
                       "{policy: failover}")
        run_dir = pytester.path / "reports" / "passed"
        proc = start_run(pytester, node, "passed")
        wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 2, 120, "2 episodes recorded", procs=(proc,))
        first.kill()
        text = finish(proc)
        proofs = [r.body for r in health_only.chat_requests()]

    records = episodes(pytester, "passed")
    assert sorted(r["task_index"] for r in records) == list(range(TASKS))
    assert all(r["error"] is None for r in records), text
    assert {r["model"] for r in records} == {"reference", "random"}, text
    assert proofs and all(p["max_tokens"] == 1 for p in proofs)  # only route proofs reached it, no episode
    log = harness_log(run_dir)
    assert f"failed over to openai random at {third.url}/v1 (model.outage.policy: failover)" in log, log
    assert proc.returncode == 0, text


# -- what counts as an outage -----------------------------------------------------------------------


class _Answers503(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": {"message": "upstream gone"}}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("query", ["", "?x=1"], ids=["direct route", "through the SDK"])
def test_only_an_endpoint_that_takes_no_exchange_is_an_outage(query):
    import asyncio
    import pickle

    from pytest_agentgym.model.call_settings import RetryPolicy
    from pytest_agentgym.model.client import EndpointClient, EndpointDown

    async def ask(base_url: str) -> EndpointDown:
        async with EndpointClient(base_url, "m", retry=RetryPolicy(retries=1, backoff_base=0.01)) as client:
            with pytest.raises(EndpointDown) as raised:
                await client.chat([{"role": "user", "content": "hi"}], budget=10)
        return raised.value

    closed = free_port()  # nothing listens there: refused
    refused = asyncio.run(ask(f"http://127.0.0.1:{closed}/v1{query}"))
    assert refused.unreachable and "connection error" in str(refused)
    assert pickle.loads(pickle.dumps(refused)).unreachable  # as an xdist worker sends it

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        there = asyncio.run(ask(f"http://127.0.0.1:{server.server_address[1]}/v1{query}"))
    finally:
        server.shutdown()
        server.server_close()
    assert not there.unreachable and "HTTP 503" in str(there)

"""The rollout service against an adversarial caller, with real processes: its API key
reaches only allow-listed endpoints (endpoints that write down the headers they get),
callers without the token are turned away, a non-loopback host needs authentication,
the queue has a cap, bodies have a size limit, errors echo nothing long, and SIGTERM
with work queued ends the run `interrupted` without a traceback."""

from __future__ import annotations

import json
import signal
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from helpers.header_log import MODEL
from helpers.rollout_guards import guarded_service, header_log, logged, slow_agent, start_refused
from helpers.rollout_services import post
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

KEY = f"sk-guarded-{uuid.uuid4().hex}"
TOKEN = uuid.uuid4().hex
BODY = {"env": "textcraft", "model": MODEL, "ids": [0], "max_round": 2}


def _with_key(entries: list[dict]) -> list[tuple[str, str]]:
    """(method, path) of the logged requests whose headers carry KEY anywhere."""
    return [(e["method"], e["path"]) for e in entries if any(KEY in value for value in e["headers"].values())]


def test_the_key_reaches_only_allow_listed_endpoints(tmp_path):
    default = header_log(tmp_path, "default-endpoint")  # the service's --base-url
    allowed = header_log(tmp_path, "allowed-endpoint")  # given with --allow-base-url
    other = header_log(tmp_path, "other-endpoint")  # neither: a caller's own server
    service = guarded_service(tmp_path / "service", "--api-key-env", "ROLLOUT_TEST_KEY", "--base-url", default.url,
                              "--allow-base-url", allowed.url, env={"ROLLOUT_TEST_KEY": KEY})
    try:
        assert post(service, BODY).status_code == 200  # no base_url: the service's own
        answer = post(service, {**BODY, "base_url": f"{allowed.url}/v1"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["rollouts"][0]["error"] is None

        # the other endpoint, plainly and in disguise (a user part that looks like the allowed
        # host, a path that climbs out of the allowed one's): refused, naming the fix
        for base_url in (other.url, f"http://127.0.0.1:{allowed.port}@127.0.0.1:{other.port}"):
            refused = post(service, {**BODY, "base_url": base_url})
            assert refused.status_code == 403, (base_url, refused.text)
            assert "--allow-base-url" in refused.json()["error"] and KEY not in refused.text
        sneaky = post(service, {**BODY, "base_url": f"http://127.0.0.1:{allowed.port}/v1/../../v1"})
        assert sneaky.status_code == 403  # dot segments are never taken for a path under an allowed one
    finally:
        service.stop()
    for endpoint in (default, allowed):
        seen = _with_key(logged(endpoint))
        assert ("GET", "/v1/models") in seen and ("POST", "/v1/chat/completions") in seen
    assert [e for e in logged(other) if e["path"] != "/"] == []  # not even asked, keyed or not
    for endpoint in (default, allowed, other):
        endpoint.stop()


def test_a_service_without_a_key_plays_an_allow_listed_endpoint_with_none(tmp_path):
    """Without --api-key-env the service sends no key, also to an endpoint on its list (a base_url
    off the list is refused with or without a key: tests/rollouts/test_rollout_web_callers.py)."""
    other = header_log(tmp_path, "listed-endpoint")
    # the variable is in its environment, but nothing names it: the service holds no key
    service = guarded_service(tmp_path / "service", "--allow-base-url", other.url, env={"ROLLOUT_TEST_KEY": KEY})
    try:
        answer = post(service, {**BODY, "base_url": other.url})
        assert answer.status_code == 200, answer.text
    finally:
        service.stop()
    asked = [e for e in logged(other) if e["path"] != "/"]
    assert {(e["method"], e["path"]) for e in asked} == {("GET", "/v1/models"), ("POST", "/v1/chat/completions")}
    assert _with_key(asked) == []
    other.stop()


def test_callers_without_the_token_are_turned_away(tmp_path):
    service = guarded_service(tmp_path, "--auth-token-env", "ROLLOUT_TEST_TOKEN", env={"ROLLOUT_TEST_TOKEN": TOKEN})
    wrong_batch = {"env": "NoSuchEnv", "model": "m", "ids": [0], "base_url": "http://127.0.0.1:9"}
    try:
        for headers in ({}, {"Authorization": f"Bearer {TOKEN[:-1]}x"}, {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": TOKEN}):
            turned = httpx.post(f"{service.url}/rollouts", json=wrong_batch, headers=headers)
            assert turned.status_code == 401, headers
            assert turned.headers["www-authenticate"].startswith("Bearer")
            assert "--auth-token-env" in turned.json()["error"]
        for path in ("/rollouts/job-1", "/openapi.json", "/docs"):
            assert httpx.get(f"{service.url}{path}").status_code == 401, path
        assert httpx.get(f"{service.url}/health").json() == {"status": "ok"}  # a liveness probe, nothing more

        let_in = {"Authorization": f"Bearer {TOKEN}"}
        checked = httpx.post(f"{service.url}/rollouts", json=wrong_batch, headers=let_in)
        assert checked.status_code == 400 and "unknown environment 'NoSuchEnv'" in checked.json()["error"]
        assert httpx.get(f"{service.url}/rollouts/job-1", headers=let_in).status_code == 404
        assert "run_dir" in httpx.get(f"{service.url}/health", headers=let_in).json()
    finally:
        service.stop()


@pytest.mark.parametrize(("args", "env", "said"), [
    (["--host", "0.0.0.0"], {}, "--host 0.0.0.0 can be reached from other machines, and the service has no "
                                "authentication"),
    (["--host", "0.0.0.0"], {}, "or --allow-unauthenticated if only trusted machines can reach 0.0.0.0:8081"),
    (["--host", "0.0.0.0", "--auth-token-env", "ROLLOUT_UNSET_TOKEN"], {}, "the variable is not set or empty"),
    (["--auth-token-env", "ROLLOUT_TEST_TOKEN"], {"ROLLOUT_TEST_TOKEN": "short"}, "fewer than 16"),
    (["--allow-base-url", "ftp://model-host"], {}, "--allow-base-url 'ftp://model-host' is not a URL a key could "
                                                   "go to: give an http:// or https:// URL"),
    (["--max-queued", "0"], {}, "--max-queued must be at least 1"),
    (["--max-request-bytes", "100"], {}, "--max-request-bytes must be at least 1024"),
])
def test_a_start_that_would_be_unsafe_is_refused(tmp_path, args, env, said):
    # a node that does not exist: were these checks not made first, it would still stop before binding
    started = start_refused(tmp_path, "--node", str(tmp_path / "no-such-node.yaml"), *args, env=env)
    assert started.returncode == 2, started.stdout + started.stderr
    assert said in started.stderr
    assert not (tmp_path / "reports").exists()  # refused before anything was written


def test_the_queue_has_a_cap_and_a_full_one_says_when_to_come_back(tmp_path):
    agent = slow_agent(tmp_path, 500)  # one reply per half second: nothing finishes during the burst
    service = guarded_service(tmp_path / "service", "--max-queued", "60", "--concurrency", "1",
                              "--allow-base-url", agent.url)
    body = {**BODY, "model": "reference", "base_url": agent.url, "n": 20, "max_round": 3,
            "sampling": {"temperature": 1.0}}
    seen = []
    try:
        def fire(index: int) -> httpx.Response:
            return post(service, {**body, "ids": [index]}, query="?async=1", timeout=60)

        with ThreadPoolExecutor(10) as pool:  # ten batches of 20 at once, racing for 60 places
            answers = list(pool.map(fire, range(10)))
            seen.append(httpx.get(f"{service.url}/health").json())
        accepted = [a for a in answers if a.status_code == 202]
        full = [a for a in answers if a.status_code == 429]
        assert len(accepted) + len(full) == 10, [a.text for a in answers]
        assert 1 <= len(accepted) <= 3 and len(full) >= 7
        for answer in full:
            assert 1 <= int(answer.headers["retry-after"]) <= 300
            error = answer.json()
            assert error["max_queued"] == 60 and error["asked"] == 20 and error["queued"] + 20 > 60
            assert f"{error['queued']} rollouts are queued or playing" in error["error"]
            assert "at most 60 at once (--max-queued)" in error["error"]
        too_big = post(service, {**body, "n": 61})
        assert too_big.status_code == 400 and "split the batch" in too_big.json()["error"]
        seen.append(httpx.get(f"{service.url}/health").json())
        assert all(h["queued"] <= 60 and h["queued_peak"] <= 60 and h["max_queued"] == 60 for h in seen), seen
    finally:
        service.stop()
        agent.stop()


def test_sigterm_with_work_queued_ends_interrupted_without_a_traceback(tmp_path):
    agent = slow_agent(tmp_path, 300)
    service = guarded_service(tmp_path / "service", "--concurrency", "1", "--allow-base-url", agent.url,
                              run_id="stopped")
    body = {**BODY, "model": "reference", "base_url": agent.url, "max_round": 3, "sampling": {"temperature": 1.0}}
    waiting: dict[str, object] = {}
    try:
        assert post(service, {**body, "ids": list(range(50)), "n": 4}, query="?async=1").status_code == 202

        def held() -> None:  # a caller waiting on its batch when the service is stopped
            waiting["answer"] = post(service, {**body, "ids": [1, 2, 3]}, timeout=60)

        def streamed() -> None:
            with httpx.stream("POST", f"{service.url}/rollouts?stream=1", json={**body, "ids": [4, 5]},
                              timeout=60) as lines:
                waiting["rows"] = [json.loads(line) for line in lines.iter_lines() if line]

        callers = [threading.Thread(target=held), threading.Thread(target=streamed)]
        for caller in callers:
            caller.start()
        def all_queued() -> bool:
            health = httpx.get(f"{service.url}/health").json()
            return health["queued"] + health["rollouts_finished"] == 205 and health["queued"] > 100

        wait_until(all_queued, 30, "the three batches queued", procs=[service.proc])
        service.proc.send_signal(signal.SIGTERM)
        assert service.proc.wait(timeout=60) == -signal.SIGTERM  # uvicorn raises it again once shut down
        for caller in callers:
            caller.join(timeout=30)
    finally:
        service.stop()
        agent.stop()
    answer = waiting["answer"]
    assert answer.status_code == 200
    assert {r["error"]["type"] for r in answer.json()["rollouts"] if r["error"]} <= {"Cancelled"}
    assert waiting["rows"][-1]["done"] is True and len(waiting["rows"]) == 3
    run_dir = tmp_path / "service" / "reports" / "stopped"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "interrupted" and info["ended_at"]
    log = (tmp_path / "service" / "rollout-server-stopped.log").read_text()
    for trouble in ("Traceback", "RuntimeError", "Task was destroyed", "ERROR"):
        assert trouble not in log, log[-3000:]


def test_bodies_have_a_limit_and_errors_echo_only_a_prefix(tmp_path):
    endpoint = header_log(tmp_path, "listing-endpoint")  # lists its one model
    service = guarded_service(tmp_path / "service", "--allow-base-url", endpoint.url)
    try:
        huge = json.dumps({**BODY, "model": "x" * 10_000_000, "base_url": endpoint.url})
        said = post(service, huge)  # Content-Length says it at once
        assert said.status_code == 413 and len(said.content) < 1000
        assert f"has {len(huge)} bytes" in said.json()["error"] and "--max-request-bytes" in said.json()["error"]

        def chunks():  # no Content-Length: read until the limit, then no further
            for start in range(0, 3_000_000, 65536):
                yield huge[start:start + 65536].encode()

        chunked = httpx.post(f"{service.url}/rollouts", content=chunks(), timeout=60)
        assert chunked.status_code == 413 and "is longer than that" in chunked.json()["error"]

        long_name = "m" * 500_000  # under the limit: an answer that names it names a prefix
        for change in ({"model": long_name}, {"env": long_name}, {"ids": long_name}, {"n": long_name},
                       {"sampling": {long_name: 1}}, {"sampling": {"temperature": long_name}},
                       {long_name: 1}, {"base_url": "http://" + long_name}):
            answer = post(service, {**BODY, "base_url": endpoint.url, **change})
            assert answer.status_code == 400, change.keys()
            assert len(answer.content) < 1500 and "m" * 60 in answer.text, (change.keys(), answer.text[:2000])
        assert "(500000 characters)" in post(service, {**BODY, "base_url": endpoint.url,
                                                       "model": long_name}).json()["error"]
        job = httpx.get(f"{service.url}/rollouts/{'j' * 20_000}")
        assert job.status_code == 404 and len(job.content) < 1000
    finally:
        service.stop()
        endpoint.stop()

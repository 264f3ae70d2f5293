"""The rollout service shares the engine's outage guard: with the node's ``model.outage``
set, a trainer's endpoint that goes away mid-batch (killed, then started again on its port)
is waited for, and every rollout of the batch comes back scored, none an error."""

from __future__ import annotations

import threading

import pytest

from helpers.owned_agent import agents  # noqa: F401  (a fixture)
from helpers.rollout_services import post, rollout_server
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

NODE = """\
name: rolloutoutage
model:
  endpoints:
    - {kind: reference}
  outage: {policy: wait, wait_s: 120, probe_every_s: 0.2}
limits: {max_rounds: 15, episode_timeout: 60, concurrency: 2}
envs: {servers: spawn}
"""


def test_a_trainers_endpoint_killed_mid_batch_is_waited_for(tmp_path, agents):  # noqa: F811
    agent = agents()
    (tmp_path / "node.yaml").write_text(NODE)
    service = rollout_server(tmp_path / "service", "--node", str(tmp_path / "node.yaml"), "--allow-base-url",
                             agent.url, run_id="outage")
    run_dir = tmp_path / "service" / "reports" / "outage"
    answers: list = []
    try:
        batch = {"env": "maze", "model": "reference", "base_url": agent.url, "ids": list(range(8)), "max_round": 15}
        poster = threading.Thread(target=lambda: answers.append(post(service, batch, timeout=300)))
        poster.start()
        wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 2, 120, "2 rollouts recorded")
        agent.kill()
        harness_log = run_dir / "logs" / "harness.log"
        wait_until(lambda: harness_log.is_file() and "new episodes paused" in harness_log.read_text(), 60,
                   "the service pauses")
        agents(agent.port)  # back on the same port
        poster.join(timeout=300)
    finally:
        service.stop()
    assert answers and answers[0].status_code == 200, answers and answers[0].text[:2000]
    rollouts = answers[0].json()["rollouts"]
    assert sorted(r["id"] for r in rollouts) == list(range(8))
    assert all(r.get("error") is None for r in rollouts), [r.get("error") for r in rollouts]
    assert "answers again after" in harness_log.read_text()

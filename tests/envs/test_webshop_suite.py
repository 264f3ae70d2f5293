"""`pytest suites/moderate --agentgym-envs=WebShop` on the local node, end to end: the
embedded WebShop server (project catalogue) and the reference agent spawned as real
processes; the run is labelled as played on the project catalogue, not WebShop's data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("thefuzz", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")
pytest.importorskip("nltk", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")

from helpers.embedded_servers import run_killing_a_server  # noqa: E402
from helpers.projects import copy_shipped_suite, episodes, run  # noqa: E402

pytestmark = pytest.mark.heavy

NOTE = "WebShop plays the project catalogue: not comparable with published WebShop scores"


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("AGENTENV_WEBSHOP_DATA", raising=False)
    copy_shipped_suite(pytester, "suites/moderate/webshop.yaml")
    return pytester


def test_the_moderate_suite_runs_webshop_on_the_local_node(project):
    result = run(project, "suites/moderate", "--agentgym-envs=WebShop", "--agentgym-run-id=shop")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"agentgym: {NOTE}*", "GATE PASSED: WebShop success_rate >= 0.7: success_rate = 0.8*"])
    records = episodes(project, "shop")
    assert sorted(r["task_index"] for r in records) == list(range(50))
    assert all(r["error"] is None for r in records)
    solved = [r for r in records if r["reward"] == 1.0]
    assert len(solved) == 40
    bought = solved[0]["turns"][-1]
    assert bought["action"] == "click[buy now]" and bought["done"]
    assert "Thank you for shopping with us!" in bought["feedback"]
    run_dir = project.path / "reports" / "shop"
    info = json.loads((run_dir / "run.json").read_text())
    assert any(note.startswith(NOTE) for note in info["notes"])
    assert NOTE in (run_dir / "report.html").read_text()


LATE_NOTE_NODE = """\
name: busy
model:
  endpoints: [{{kind: reference, policy: reference}}]
limits: {{max_rounds: 10, episode_timeout: 60, concurrency: 2}}
envs:
  servers: spawn
  WebShop: {{embedded: null, command: "{command}"}}
"""


def test_a_note_that_comes_late_is_still_recorded_everywhere(project):
    """On a busy machine the shop's note about its data can come back after seconds: the run
    waits for it (up to the server's start-up timeout) and records it in run.json, the header
    and the report, as on a quiet machine. The server here is the real embedded WebShop with
    its GET /embedded/data held back 8 s."""
    from helpers.slow_data_webshop import command

    (project.path / "busy.yaml").write_text(LATE_NOTE_NODE.format(command=command(delay=8)))
    result = run(project, "suites/moderate", "--agentgym-node=busy.yaml", "--agentgym-envs=WebShop",
                 "--agentgym-tasks=0-1", "--agentgym-run-id=late")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"agentgym: {NOTE}*"])
    run_dir = project.path / "reports" / "late"
    info = json.loads((run_dir / "run.json").read_text())
    assert sum(note.startswith(NOTE) for note in info["notes"]) == 1, info["notes"]
    assert NOTE in (run_dir / "report.html").read_text()


def test_the_random_policy_fails_the_gate(project):
    result = run(project, "suites/moderate", "--agentgym-envs=WebShop", "--agentgym-tasks=0-19",
                 "--agentgym-model=random", "--agentgym-run-id=random")
    assert result.ret == 1, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["GATE FAILED: WebShop success_rate >= 0.7: success_rate = 0.000*"])
    records = episodes(project, "random")
    assert len(records) == 20 and all(r["error"] is None and not r["success"] for r in records)


def test_the_rollout_service_plays_webshop_and_records_the_note(tmp_path, monkeypatch):
    from helpers.rollout_services import post, reference_agent, rollout_server

    monkeypatch.delenv("AGENTENV_WEBSHOP_DATA", raising=False)
    agent = reference_agent(tmp_path)
    service = rollout_server(tmp_path / "service", "--node", "local", "--allow-base-url", agent.url,
                             run_id="shop-rollouts")
    try:
        answer = post(service, {"env": "WebShop", "model": "reference", "base_url": agent.url, "ids": [0, 1, 2]})
        assert answer.status_code == 200, answer.text
        rollouts = answer.json()["rollouts"]
        assert [r["error"] for r in rollouts] == [None] * 3 and all(r["reward"] > 0 for r in rollouts)
        info = json.loads((tmp_path / "service" / "reports" / "shop-rollouts" / "run.json").read_text())
        assert sum(note.startswith(NOTE) for note in info["notes"]) == 1
    finally:
        service.stop()
        agent.stop()


@pytest.mark.faults
def test_a_webshop_server_killed_mid_run_is_restarted_and_the_run_scores_as_an_unbroken_one(project):
    """SIGKILL the embedded WebShop server after a few records: the pool restarts it (it builds
    the same shop again: the catalogue and the goal order are deterministic), the episodes it
    cut short are played again, and the run solves the same 40 of 50 goals as an unbroken one."""
    run_dir = project.path / "reports" / "killed"

    def the_server(folder: Path) -> Path:
        (log,) = folder.glob("WebShop-*.log")
        return log

    killed = run_killing_a_server(project.path, ["suites/moderate", "--agentgym-envs=WebShop", "--agentgym-run-id=killed"],
                                  run_dir, after_records=3, pick=the_server)
    text, killed_at, log = killed.output, killed.killed_at, killed.log
    assert killed.returncode == 0, text
    assert killed_at < 50
    records = episodes(project, "killed")
    assert sorted(r["task_index"] for r in records) == list(range(50))
    assert all(r["error"] is None for r in records), text
    assert any(r["retried"] for r in records), "no episode was in flight when the server was killed"
    assert sum(r["reward"] == 1.0 for r in records) == 40
    assert log.read_text().count(" starting: ") == 2

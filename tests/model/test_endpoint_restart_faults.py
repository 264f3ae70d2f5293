"""A model endpoint that dies mid-run (issue 22, point 7): the one the plugin launched
(the reference agent) is restarted with back-off, like an environment server, and the
episodes it cut short are retried; one the plugin did not launch is never restarted.
Every run is a real pytest process with the real reference agent and embedded servers;
the agent is killed with a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from helpers.checkpoints import write_checkpoint
from helpers.projects import episodes, make_project, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

TASKS = 10
#: episodes in flight at once (the test node's concurrency)
IN_FLIGHT = 2


def start_run(pytester: pytest.Pytester, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", *args],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def agent_processes(root: int) -> list[psutil.Process]:
    """The reference agents among ``root``'s descendants."""
    found = []
    for child in psutil.Process(root).children(recursive=True):
        try:
            if "reference-agent" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def test_a_launched_reference_agent_killed_mid_run_is_restarted_and_its_episodes_retried(pytester):
    node = make_project(pytester, latency_ms=60)
    suite(pytester, "maze", f"environment: Maze\ntasks: 0-{TASKS - 1}\n")
    run_dir = pytester.path / "reports" / "agent-killed"
    proc = start_run(pytester, f"--agentgym-node={node}", "--agentgym-run-id=agent-killed")
    try:
        wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 3, 120, "3 episodes recorded",
                   procs=(proc,))
        (agent,) = agent_processes(proc.pid)
        first = agent.pid
        os.kill(first, signal.SIGKILL)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = output.decode(errors="replace")
    assert proc.returncode == 0, text

    records = episodes(pytester, "agent-killed")
    assert sorted(r["task_index"] for r in records) == list(range(TASKS))
    assert all(r["error"] is None and r["reward"] is not None for r in records), text
    retried = [r for r in records if r["retried"]]
    # only the episodes in flight when it died (or started before it was back) failed, once each
    assert 1 <= len(retried) <= IN_FLIGHT, [(r["task_index"], r["retried"]) for r in retried]
    assert all(len(r["retried"]) == 1 for r in retried)
    assert {(e["where"], e["type"]) for r in retried for e in r["retried"]} == {("model", "EndpointDown")}

    harness = (run_dir / "logs" / "harness.log").read_text()
    assert "reference agent died (it was killed by SIGKILL); restarting it on http://127.0.0.1:" in harness
    assert "reference agent restarted at http://127.0.0.1:" in harness
    agent_log = (run_dir / "logs" / "reference-agent.log").read_text()
    assert agent_log.count(" starting: ") == 2, agent_log
    assert "restarting: it was killed by SIGKILL" in agent_log
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE


@pytest.fixture
def their_agent(tmp_path):
    """A reference agent this test runs, as a user runs an endpoint of their own. (Set up
    before ``pytester``, whose snapshot of sys.modules would drop what its first probe imports.)"""
    from pytest_agentgym.model.endpoint_settings import EndpointConfig
    from pytest_agentgym.model.launcher import reference_agent

    agent = reference_agent(EndpointConfig(kind="reference", url=None, model="reference", latency_ms=60),
                            tmp_path)
    agent.start()
    yield agent
    agent.stop()


def test_an_endpoint_the_plugin_did_not_launch_is_never_restarted(their_agent, pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-5\n")
    run_dir = pytester.path / "reports" / "attached"
    proc = start_run(pytester, f"--agentgym-node={node}", "--agentgym-run-id=attached",
                     f"--agentgym-base-url={their_agent.url}/v1", "--agentgym-model=reference")
    try:
        wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 2, 120, "2 episodes recorded",
                   procs=(proc,))
        assert agent_processes(proc.pid) == []  # the run uses theirs, launches none
        os.kill(their_agent.pid, signal.SIGKILL)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = output.decode(errors="replace")
    assert proc.returncode == 1, text
    assert their_agent.poll() == -signal.SIGKILL  # nobody started it again
    records = episodes(pytester, "attached")
    errored = [r for r in records if r["error"] is not None]
    assert errored and all(r["error"]["where"] == "model" for r in errored)
    assert all(r["retried"] for r in errored)  # retried once, against the endpoint as it is
    harness = (run_dir / "logs" / "harness.log").read_text()
    assert "died (" not in harness and " restarted at " not in harness


def test_a_launched_vllm_that_died_is_revived_on_its_port_and_an_attached_endpoint_never(tmp_path):
    from helpers import fake_vllm
    from pytest_agentgym.model.endpoint_settings import ChosenEndpoint, EndpointConfig, ModelSettings
    from pytest_agentgym.model.endpoints import choose_endpoint

    checkpoint = write_checkpoint(tmp_path / "ckpt")
    python = fake_vllm.install(tmp_path / "venv", "serve")  # vLLM played by the reference agent
    settings = ModelSettings.from_mapping({"endpoints": [{"kind": "vllm", "model": "reference"}]},
                                          vllm={"python": str(python), "startup_timeout": 60}
                                          ).with_checkpoint(checkpoint)
    chosen = choose_endpoint(settings, log_dir=tmp_path / "logs")
    try:
        process = chosen.process.process
        first, url = process.pid, process.url
        assert chosen.revive() is None  # alive: nothing done
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: process.died() is not None, 30, "the killed vLLM is seen dead")
        line = chosen.revive()
        assert line in (f"vLLM on {checkpoint} died mid-run (it was killed by SIGKILL) and was restarted at {url}",
                        f"vLLM on {checkpoint} died mid-run ({url} refuses connections while process {first} is "
                        f"still there (killed, or its listener closed)) and was restarted at {url}")
        assert process.pid != first and process.url == url and process.died() is None
        assert (tmp_path / "logs" / "vllm.log").read_text().count(" starting: ") == 2
    finally:
        chosen.close()

    theirs = ChosenEndpoint(EndpointConfig(kind="openai", url=url, model="reference"), url + "/v1", "reference")
    assert theirs.revive() is None  # not launched here: nothing to restart, whatever its state

"""A launched vLLM leaves nothing behind, however the run ends: no process of its family
and none of the shared memory it made in /dev/shm (docs/vllm-cpu.md, "Shutting down").

vLLM is played by tests/helpers/fake_vllm.py as a family: the launched process creates a
segment in /dev/shm and never deletes it (as when vLLM's own deleter is killed), a child
keeps it mapped, another child serves as the model, and the launched process holds on
after SIGTERM. Runs are real pytest processes stopped with real signals; segment names
carry this process's pid and the test's name."""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from helpers import fake_vllm
from helpers.projects import suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until
from pytest_agentgym.model.vllm import VLLMServer
from pytest_agentgym.model.vllm_options import VLLMOptions

pytestmark = [pytest.mark.heavy, pytest.mark.faults,
              pytest.mark.skipif(not Path("/dev/shm").is_dir() or not Path("/proc/self/maps").exists(),
                                 reason="needs Linux's /dev/shm and /proc")]

#: how long the fake vLLM holds on after SIGTERM in the runs (below the 15 s grace)
HOLD = 3.0


def checkpoint(root: Path) -> Path:
    """A checkpoint directory the launcher accepts (the fake does not read it)."""
    directory = root / "ckpt"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                                       "max_position_embeddings": 512}))
    header = json.dumps({"__metadata__": {}}).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    (directory / "tokenizer.json").write_text("{}")
    return directory


@pytest.fixture
def shm(request):
    """``shm(label)``: a /dev/shm name of this test's own; every one is deleted after it."""
    made = []
    test = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")

    def name(label: str) -> str:
        made.append(f"agentgym-test-{os.getpid()}-{test}-{label}")
        return made[-1]

    yield name
    for each in made:
        fake_vllm.segment_path(each).unlink(missing_ok=True)


@pytest.fixture
def family():
    """The processes a test saw in vLLM's family; any still running afterwards is killed."""
    seen: list[psutil.Process] = []
    yield seen
    for proc in seen:
        try:
            proc.kill()
        except psutil.Error:
            pass


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    return alive


def members_of(root: int) -> list[psutil.Process]:
    """The fake vLLM's processes and the reaper among ``root``'s descendants (the stand-in
    processes of the test's own, run by ``holder_of``, are not among them when this is called)."""
    found = []
    for proc in psutil.Process(root).children(recursive=True):
        try:
            line = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "fake_vllm.py" in line or "reference-agent" in line or "pytest_agentgym.process.reaper" in line:
            found.append(proc)
    return found


def holder_of(names: list[str]) -> subprocess.Popen:
    """A process of the test's own (not vLLM's) that maps ``names`` until it is killed."""
    proc = subprocess.Popen([sys.executable, fake_vllm.__file__, "hold", json.dumps(names)], stdout=subprocess.PIPE)
    assert b"maps" in proc.stdout.readline()
    return proc


def test_a_vllm_killed_after_its_grace_leaves_only_what_is_not_its_own(tmp_path, shm, family):
    ours, before, shared, stranger = shm("ours"), shm("before"), shm("shared"), shm("stranger")
    fake_vllm.segment_path(before).write_bytes(b"x" * 4096)  # there before the launch; the family maps it too
    python = fake_vllm.install(tmp_path / "venv", "serve", segments=[ours, shared], also_map=[before], hold_term=60)
    server = VLLMServer(checkpoint(tmp_path), VLLMOptions(python=str(python), startup_timeout=60),
                        log_path=tmp_path / "vllm.log").start()
    others = holder_of([shared])  # a live process not of the family maps one of the family's segments
    try:
        fake_vllm.segment_path(stranger).write_bytes(b"x" * 4096)  # made after the launch, by someone else
        family.extend([psutil.Process(server.process.pid), *psutil.Process(server.process.pid).children(True)])
        assert len(family) == 3 and fake_vllm.segment_path(ours).exists()
        assert server.stop(grace=1) == -signal.SIGKILL  # it held on past the grace
        wait_until(lambda: not running(family), 30, lambda: f"vLLM's family gone; left: {running(family)}")
        assert not fake_vllm.segment_path(ours).exists()
        for kept in (before, shared, stranger):
            assert fake_vllm.segment_path(kept).exists(), kept
    finally:
        others.kill()
        others.wait()
    log = (tmp_path / "vllm.log").read_text()
    assert f"reaper: the server stopped; deleted /dev/shm/{ours} (1.0 MiB)" in log, log


def test_a_vllm_that_stops_in_its_grace_keeps_nothing_and_the_reaper_exits(tmp_path, shm, family):
    ours = shm("ours")
    python = fake_vllm.install(tmp_path / "venv", "serve", segments=[ours], hold_term=0.5)
    server = VLLMServer(checkpoint(tmp_path), VLLMOptions(python=str(python), startup_timeout=60),
                        log_path=tmp_path / "vllm.log").start()
    family.extend(members_of(os.getpid()))
    assert len(family) == 4, family  # the fake vLLM, its holder and agent, the reaper
    assert server.stop() == 0
    assert not running(family) and not fake_vllm.segment_path(ours).exists()


EXITS = {
    "sigint": [signal.SIGINT],
    "sigint-twice": [signal.SIGINT, signal.SIGINT],
    "sigterm": [signal.SIGTERM],
    "sigkill": [signal.SIGKILL],
}


@pytest.mark.parametrize("signals", list(EXITS.values()), ids=list(EXITS))
def test_a_run_ended_by_a_signal_leaves_no_process_and_no_shared_memory(pytester, monkeypatch, shm, family,
                                                                        signals):
    ours = shm("ours")
    python = fake_vllm.install(pytester.path / "venv", "serve", segments=[ours], hold_term=HOLD, latency_ms=150)
    monkeypatch.setenv("AGENTGYM_VLLM_PYTHON", str(python))
    (pytester.path / "suites").mkdir()
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-40\n")
    run_dir = pytester.path / "reports" / "stopped"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=cpu",
                             f"--agentgym-checkpoint={checkpoint(pytester.path)}", "--agentgym-model=reference",
                             "--agentgym-run-id=stopped"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= 1, 120, "an episode recorded", procs=(proc,))
        family.extend(members_of(proc.pid))
        assert len(family) == 4, family  # the fake vLLM, its holder and agent, the reaper
        assert fake_vllm.segment_path(ours).exists()
        log = run_dir / "logs" / "vllm.log"
        for number, sig in enumerate(signals):
            if number:  # again while vLLM holds on after the SIGTERM of the first
                wait_until(lambda: "SIGTERM received" in log.read_text(), 60, "vLLM told to stop", procs=(proc,))
            proc.send_signal(sig)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    wait_until(lambda: not running(family) and not fake_vllm.segment_path(ours).exists(), 60,
               lambda: f"vLLM's family and segment gone; left: {running(family)}, "
                       f"segment there: {fake_vllm.segment_path(ours).exists()}; vllm.log:\n{log.read_text()}")
    text = log.read_text()
    if signals == [signal.SIGKILL]:
        assert f"reaper: the harness (pid {proc.pid}) is gone; stopped 3 process(es)" in text, text
    assert f"/dev/shm/{ours} (1.0 MiB)" in text, text
    if signals != [signal.SIGKILL]:  # and the run says it was interrupted
        assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted", output.decode()

"""Records survive a full disk, a file-size limit, torn lines, NaN and several writers.

The full disk is real: a 64 KiB tmpfs mounted for the test (root only; the
file-size limit test runs everywhere and covers the same code path with
EFBIG). The read-only reports directory is a tmpfs remounted read-only (root
bypasses permission bits), or a directory without write permission otherwise.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_agentgym.results.events import Event
from pytest_agentgym.results.jsonl import ResultsWriteError, append_line
from pytest_agentgym.publish.outbox import Outbox
from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.results.records import EpisodeRecord, RunInfo, Turn
from pytest_agentgym.results.store import RunDir, check_writable

pytestmark = pytest.mark.faults


def record(task: int, *, reward: float | None = 1.0, text_size: int = 2500, **changes) -> EpisodeRecord:
    turn = Turn(0, "o" * text_size, "Thought: go\nAction: move up", "move up", "f" * 100, 1.0, True, 0.1, 0.1)
    fields = dict(run_id="r1", env="Maze", task_index=task, repeat=0, reward=reward, success=True, rounds=1,
                  stop_reason="done", started_at="2026-01-01T00:00:00Z", duration_s=1.0, model="m",
                  turns=(turn,), outcome="passed")
    fields.update(changes)
    return EpisodeRecord(**fields)


def strict_json(line: str):
    """Parse with a parser that refuses NaN and Infinity tokens."""
    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(line, parse_constant=refuse)


def assert_whole_lines(path: Path, expected: int) -> None:
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the file ends in a torn line"
    lines = data.decode("utf-8").splitlines()
    assert len(lines) == expected
    for line in lines:
        strict_json(line)


def mount_tmpfs(directory: Path, size: str = "64k") -> None:
    directory.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'}); "
                    "test_a_file_size_limit_leaves_whole_lines covers the same path")


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 64 KiB filesystem."""
    mount = tmp_path / "tiny"
    mount_tmpfs(mount)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_with_episodes(run: RunDir, limit: int = 200) -> tuple[int, ResultsWriteError]:
    for appended in range(limit):
        try:
            run.append_episode(record(appended))
        except ResultsWriteError as exc:
            return appended, exc
    raise AssertionError(f"{limit} episodes fitted: the filesystem never filled")


def test_a_full_disk_leaves_only_whole_lines_and_says_what_to_do(tiny_fs):
    run = RunDir.create(tiny_fs, "r1")
    (tiny_fs / "filler").write_bytes(b"x" * 16 * 1024)
    appended, error = fill_with_episodes(run)
    assert appended > 3
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC
    message = str(error)
    assert f"could not write {run.episodes_file}: No space left on device (ENOSPC)" in message
    assert "the file holds only whole lines" in message
    assert f"Free space on the filesystem mounted at {tiny_fs}" in message
    assert f"resume with --agentgym-resume={run.path}" in message
    again = pickle.loads(pickle.dumps(error))  # crosses pytest-xdist's process boundary
    assert (type(again), str(again), again.errno, again.path) == (
        ResultsWriteError, message, errno.ENOSPC, str(run.episodes_file))
    assert_whole_lines(run.episodes_file, appended)
    records, skipped = run.read_episodes_report()
    assert ([r.task_index for r in records], skipped) == (list(range(appended)), [])
    # once there is room again, appending goes on where it stopped
    (tiny_fs / "filler").unlink()
    run.append_episode(record(999))
    assert [r.task_index for r in run.read_episodes()] == [*range(appended), 999]
    assert_whole_lines(run.episodes_file, appended + 1)


def test_a_full_disk_keeps_run_json_as_it_was(tiny_fs):
    run = RunDir.create(tiny_fs, "r1")
    info = RunInfo(run_id="r1", started_at="t0", node="n", model="m", endpoint="e", endpoint_kind="k",
                   environments=("Maze",), command="pytest")
    run.write_info(info)
    fill_with_episodes(run)
    with pytest.raises(ResultsWriteError, match="No space left on device .* run.json was left as it was"):
        run.write_info(RunInfo(**{**info.to_dict(), "notes": ("x" * 20000,)}))
    assert run.read_info() == info
    assert not run.run_file.with_suffix(".json.tmp").exists()


def test_a_full_disk_leaves_the_outbox_whole(tiny_fs):
    outbox = Outbox(tiny_fs / "r1" / "outbox.jsonl")
    sent = 0
    with pytest.raises(ResultsWriteError, match="ENOSPC") as caught:
        for sent in range(200):
            outbox.append(Event("agentgym.episode.completed.v1", f"r1:{sent}", {"text": "x" * 3000}))
    assert caught.value.errno == errno.ENOSPC and sent > 3
    events, problems = outbox.read()
    assert ([e.msg_id for e in events], problems) == ([f"r1:{n}" for n in range(sent)], [])
    assert_whole_lines(outbox.path, sent)


FSIZE_WRITER = """
import json, resource, signal, sys
from pytest_agentgym.results.jsonl import ResultsWriteError, append_line
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
for n in range(100):
    try:
        append_line(sys.argv[1], {"n": n, "text": "x" * 3001}, then="resume")
    except ResultsWriteError as exc:
        print(json.dumps({"appended": n, "errno": exc.errno, "message": str(exc)}))
        break
"""


def test_a_file_size_limit_leaves_whole_lines(tmp_path):
    target = tmp_path / "episodes.jsonl"
    done = subprocess.run([sys.executable, "-c", FSIZE_WRITER, str(target)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    line = len(json.dumps({"n": 0, "text": "x" * 3001})) + 1  # 3,022 bytes: 6 fit in 20,000, the 7th does not
    assert result["errno"] == errno.EFBIG and result["appended"] == 6
    assert "File too large (EFBIG)" in result["message"] and "ulimit -f" in result["message"]
    assert target.stat().st_size == 6 * line
    assert_whole_lines(target, 6)


def test_a_torn_last_line_is_skipped_reported_and_the_next_append_stays_whole(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    run.append_episode(record(0))
    run.append_episode(record(1))
    whole = json.dumps(record(2).to_dict())
    with run.episodes_file.open("a") as handle:
        handle.write(whole[: len(whole) // 2])  # what a SIGKILL mid-write leaves
    with pytest.warns(UserWarning, match="episodes.jsonl:3: skipped a torn last line"):
        records, skipped = run.read_episodes_report()
    assert [r.task_index for r in records] == [0, 1]
    assert [(s.line, s.torn) for s in skipped] == [(3, True)]
    assert skipped[0].path == str(run.episodes_file) and "no newline at the end" in skipped[0].reason
    assert run.skipped == skipped

    run.append_episode(record(3))
    with pytest.warns(UserWarning, match="episodes.jsonl:3: skipped an unreadable line"):
        records = run.read_episodes()
    assert [r.task_index for r in records] == [0, 1, 3]
    assert [(s.line, s.torn) for s in run.skipped] == [(3, False)]


def test_unreadable_lines_in_the_outbox_are_reported_with_file_and_line(tmp_path):
    outbox = Outbox(tmp_path / "outbox.jsonl")
    outbox.append(Event("agentgym.field.status.v1", "a", {"status": "started"}))
    with outbox.path.open("ab") as handle:
        handle.write(b'{"subject": 1, "msg_id": "b", "payload": {}}\n\xff\xfe\n{"subject": "s", "msg')
    events, problems = outbox.read()
    assert [e.msg_id for e in events] == ["a"]
    assert [p.split(": skipped")[0] for p in problems] == [f"{outbox.path}:{n}" for n in (2, 3, 4)]
    assert "torn last line" in problems[2] and "unreadable line" in problems[0]


def test_non_finite_numbers_are_written_as_strict_json_with_a_note(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    nan_turn = Turn(0, "o", "r", "a", "f", math.inf, True, 0.1, 0.1)
    run.append_episode(record(0, reward=math.nan, turns=(nan_turn,), duration_s=-math.inf))
    line = run.episodes_file.read_text().strip()
    data = strict_json(line)
    assert (data["reward"], data["duration_s"], data["turns"][0]["reward"]) == (None, None, None)
    assert data["non_finite"] == {"reward": "NaN", "duration_s": "-Infinity", "turns[0].reward": "Infinity"}
    assert run.read_episodes()[0].reward is None

    event = Event("agentgym.episode.completed.v1", "r1:0", {"reward": math.nan, "list": [math.inf]})
    assert strict_json(event.data().decode()) == {"reward": None, "list": [None]}
    Outbox(tmp_path / "outbox.jsonl").append(event)
    stored = strict_json((tmp_path / "outbox.jsonl").read_text())
    assert stored["payload"] == {"reward": None, "list": [None]}
    assert stored["non_finite"] == {"payload.reward": "NaN", "payload.list[0]": "Infinity"}

    run.write_info(RunInfo(run_id="r1", started_at="t", node="n", model="m", endpoint="e", endpoint_kind="k",
                           environments=(), command="c", settings={"max_drop": math.nan}))
    assert strict_json(run.run_file.read_text())["settings"]["max_drop"] is None


def test_half_a_surrogate_pair_is_written_as_its_escape_everywhere(tmp_path):
    """A reply cut inside an emoji (``"\\ud83d"`` from the model) has no UTF-8 form; every
    writer puts it down as that escape, and every reader gets the same string back."""
    from pytest_agentgym.queue import wire

    cut = "half \ud83d of 😀"
    run = RunDir.create(tmp_path, "r1")
    run.append_episode(record(0, turns=(Turn(0, "o", cut, "a", "f", 0.0, True, 0.1, 0.1),)))
    assert b"half \\ud83d of \xf0\x9f\x98\x80" in run.episodes_file.read_bytes()
    assert run.read_episodes()[0].turns[0].reply == cut and not run.skipped

    event = Event("agentgym.episode.completed.v1", "r1:0", {"reply": cut})
    assert json.loads(event.data().decode("utf-8")) == {"reply": cut}
    Outbox(tmp_path / "outbox.jsonl").append(event)
    assert [e.payload for e in Outbox(tmp_path / "outbox.jsonl").read()[0]] == [{"reply": cut}]
    data, headers = wire.encode({"reply": cut})
    assert wire.decode(data, headers) == {"reply": cut}


def lock_waiters(path: Path) -> int:
    """How many flock requests wait on ``path`` (lines "N: -> FLOCK ..." of /proc/locks)."""
    inode = os.stat(path).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and "FLOCK" in line and f":{inode} " in line)


def test_an_append_waits_for_the_lock_other_writers_hold(tmp_path):
    target = tmp_path / "episodes.jsonl"
    append_line(target, {"n": 0}, then="resume")
    holder = os.open(target, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another writer in the middle of its append
    writer = threading.Thread(target=append_line, args=(target, {"n": 1}), kwargs={"then": "resume"})
    try:
        writer.start()
        deadline = time.monotonic() + 10
        while lock_waiters(target) == 0:
            assert writer.is_alive(), "the append finished while another writer held the lock"
            assert time.monotonic() < deadline, "the append never queued for the lock"
            time.sleep(0.005)  # polling /proc/locks for the waiter, bounded by the deadline
        assert target.read_text() == '{"n": 0}\n'
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
        writer.join(10)
    assert target.read_text() == '{"n": 0}\n{"n": 1}\n'


WRITER = """
import sys
from pytest_agentgym.results.jsonl import append_line
for n in range(int(sys.argv[3])):
    append_line(sys.argv[1], {"writer": sys.argv[2], "n": n, "text": sys.argv[2] * 200_000}, then="resume")
"""


def test_several_processes_appending_at_once_leave_whole_lines(tmp_path):
    target = tmp_path / "episodes.jsonl"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), name, "20"]) for name in "abcd"]
    assert [w.wait(120) for w in writers] == [0, 0, 0, 0]
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert sorted((line["writer"], line["n"]) for line in lines) == sorted(
        (name, n) for name in "abcd" for n in range(20))
    assert all(line["text"] == line["writer"] * 200_000 for line in lines)


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody can write to, root included."""
    if os.geteuid() != 0:
        directory = tmp_path / "ro"
        directory.mkdir()
        directory.chmod(0o555)
        yield directory
        directory.chmod(0o755)
        return
    directory = tmp_path / "ro"
    mount_tmpfs(directory, "1m")
    subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
    yield directory
    subprocess.run(["umount", "-l", str(directory)], check=False)


def test_check_writable_finds_a_read_only_reports_directory(read_only_dir, tmp_path):
    reason = check_writable(read_only_dir / "reports")
    assert reason is not None
    assert reason.startswith(f"reports directory {read_only_dir / 'reports'} is not writable: could not write ")
    assert ("Read-only file system (EROFS)" in reason) or ("Permission denied (EACCES)" in reason)
    assert f"Make {read_only_dir} writable" in reason
    assert not list(read_only_dir.iterdir())
    assert check_writable(tmp_path / "fresh" / "reports") is None
    assert not (tmp_path / "fresh").exists()  # checking creates nothing
    (tmp_path / "file").write_text("x")
    assert "is not a directory" in check_writable(tmp_path / "file" / "reports")


def test_check_writable_finds_a_full_disk(tiny_fs):
    with pytest.raises(OSError):
        with (tiny_fs / "filler").open("wb") as handle:
            while True:
                handle.write(b"x" * 4096)
                handle.flush()
    reason = check_writable(tiny_fs)
    assert reason is not None and "No space left on device (ENOSPC)" in reason
    assert [p.name for p in tiny_fs.iterdir()] == ["filler"]


def test_the_report_lists_the_lines_it_skipped(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    run.write_info(RunInfo(run_id="r1", started_at="2026-01-01T00:00:00Z", node="n", model="m", endpoint="e",
                           endpoint_kind="k", environments=("Maze",), command="pytest"))
    run.append_episode(record(0))
    with run.episodes_file.open("a") as handle:
        handle.write('{"run_id": "r1", "env": "Ma')
    with pytest.warns(UserWarning, match="torn last line"):
        html = render_run_dir(run.path).read_text()
    assert '<div class="notice" id="skipped-lines"><p>1 line(s) of episodes.jsonl could not be read' in html
    assert f"{run.episodes_file}:2: skipped a torn last line" in html

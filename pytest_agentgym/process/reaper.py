"""A watcher that outlives the harness: it stops a launched server's whole family and
deletes the shared memory the family left in ``/dev/shm``.

Why: vLLM's processes talk through POSIX shared memory (``/dev/shm/psm_*``, hundreds
of MB), and the segments are deleted by one of vLLM's own processes (multiprocessing's
resource tracker) when the others are gone. A vLLM that holds on past the stop grace
gets SIGKILL with its whole process group, that process included, and the segments
stay with no owner until the machine reboots. And when the harness itself is killed
(SIGKILL, a second Ctrl-C while it stops), nothing in it can clean up at all.

So a launched vLLM comes with a reaper: ``python -m pytest_agentgym.process.reaper``,
started by :meth:`Reaper.watch` beside the server, in a session of its own (Ctrl-C in
the terminal does not reach it) and without a death signal (it must outlive us). It

* notes, every :data:`TICK` seconds, the family's members (the server's session and
  its descendants) and the ``/dev/shm`` files they map or hold open
  (``/proc/PID/maps``, ``/proc/PID/fd``): a segment is the family's when a member was
  seen using it;
* when the harness stops the server, scans once more before the first signal
  (:meth:`Reaper.stopping`) and, after the family is gone, deletes its segments
  (:meth:`Reaper.finish`);
* when the harness disappears instead (its end of the pipe closes, or the reaper's
  parent changes), stops the family itself (SIGTERM to the group, SIGKILL after the
  grace, then every member left) and deletes its segments.

A segment is deleted only when all of these hold: a family member was seen using it,
it was not in ``/dev/shm`` before the server was spawned (same name), it is still the
same file (inode), it belongs to this user, and no live process maps it or holds it
open. Whatever else is in ``/dev/shm`` is never touched. What the reaper did is
appended to the server's log. See docs/vllm-cpu.md ("Shutting down").
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Iterable

import psutil

from pytest_agentgym.process.children import session_members, signal_group, sweep

__all__ = ["Reaper", "SHM_DIR", "TICK", "segments_in_use", "shm_names", "sweep_segments"]

#: where POSIX shared memory (shm_open, multiprocessing.shared_memory) lives on Linux
SHM_DIR = Path("/dev/shm")
#: seconds between the reaper's looks at the family
TICK = 2.0


# -- shared memory: what is there, who uses it, deleting what is left ----------------------


def shm_names() -> set[str] | None:
    """The names in ``/dev/shm`` now; None where there is no ``/dev/shm`` or ``/proc``
    to attribute segments with (then no reaper is started)."""
    if not Path("/proc/self/maps").exists():
        return None
    try:
        return set(os.listdir(SHM_DIR))
    except OSError:
        return None


def segments_in_use(pids: Iterable[int]) -> dict[str, int]:
    """The ``/dev/shm`` files that ``pids`` map or hold open: name -> inode. Processes
    that are gone or not ours to read are left out."""
    found: dict[str, int] = {}
    prefix = f"{SHM_DIR}/"
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    if prefix not in line or line.endswith(" (deleted)\n"):
                        continue
                    fields = line.split(maxsplit=5)  # address perms offset device inode path
                    if len(fields) == 6 and fields[5].startswith(prefix):
                        found[fields[5].rstrip("\n")[len(prefix):]] = int(fields[4])
        except (OSError, ValueError):
            pass
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix) and not target.endswith(" (deleted)"):
                    found[target[len(prefix):]] = os.stat(f"/proc/{pid}/fd/{fd}").st_ino
            except OSError:
                pass
    return found


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def sweep_segments(seen: dict[str, int], before: set[str]) -> list[tuple[str, int]]:
    """Delete the segments of ``seen`` (name -> inode, used by the family) that were not
    in ``before``, are still that file, are ours, and that no live process maps or holds
    open. Returns (name, size) of each one deleted."""
    candidates = {}
    for name, inode in seen.items():
        if name in before or "/" in name:
            continue
        try:
            info = os.lstat(SHM_DIR / name)
        except OSError:
            continue  # deleted already (vLLM cleaned up after itself)
        if info.st_ino == inode and info.st_uid == os.getuid() and not os.path.islink(SHM_DIR / name):
            candidates[name] = info.st_size
    if not candidates:
        return []
    in_use = segments_in_use(pid for pid in _all_pids() if pid != os.getpid())
    deleted = []
    for name, size in candidates.items():
        if name in in_use:
            continue
        try:
            os.unlink(SHM_DIR / name)
            deleted.append((name, size))
        except OSError:
            pass
    return deleted


# -- the harness's side ---------------------------------------------------------------------


class Reaper:
    """The harness's handle on the reaper of one spawned server (see the module)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    @classmethod
    def watch(cls, pid: int, since: float, grace: float, before: set[str],
              log_path: Path | None) -> "Reaper":
        """Start the reaper of the server ``pid`` (spawned at ``since``, stopped with
        ``grace`` seconds before SIGKILL), ``before`` being ``/dev/shm`` just before it was
        spawned. Raises ``OSError`` when the reaper cannot be started."""
        log: IO[bytes] | int = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest_agentgym.process.reaper"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        finally:
            if not isinstance(log, int):
                log.close()
        config = {"harness": os.getpid(), "pid": pid, "since": since, "grace": grace,
                  "before": sorted(before), "log": str(log_path) if log_path is not None else None}
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        return cls(proc)

    def _say(self, word: str) -> bool:
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(word.encode() + b"\n")
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):  # it is gone
            return False

    def stopping(self, timeout: float = 5.0) -> None:
        """The server is about to be signalled: let the reaper note what the family
        uses now, and wait (at most ``timeout`` s) until it has."""
        if not self._say("scan") or self._proc.stdout is None:
            return
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        if ready:
            self._proc.stdout.readline()

    def finish(self, timeout: float = 30.0) -> int | None:
        """The family is stopped: the reaper deletes its segments and exits; wait for it
        (killed after ``timeout`` s). Returns its exit code."""
        self._say("done")
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait()


# -- the reaper's side ----------------------------------------------------------------------


class _Watch:
    """What the reaper knows of the family: its members and the segments they used."""

    def __init__(self, pid: int, since: float) -> None:
        self.pid = pid
        self.since = since
        self.members: dict[int, psutil.Process] = {}
        self.seen: dict[str, int] = {}
        try:
            self.members[pid] = psutil.Process(pid)
        except psutil.Error:
            pass

    def look(self, whole_session: bool = False) -> None:
        """Note the members alive now (descendants of the server; with ``whole_session``
        also its session) and the segments they use. Members are kept as psutil
        processes, so a member that left the tree is still known and a reused pid is not."""
        root = self.members.get(self.pid)
        try:  # through the object: psutil refuses a pid that now names another process
            found = root.children(recursive=True) if root is not None else []
        except psutil.Error:
            found = []
        if whole_session:
            found += session_members(self.pid, self.since)
        for proc in found:
            known = self.members.get(proc.pid)
            if known is None or not known.is_running():
                self.members[proc.pid] = proc
        alive = [p.pid for p in self.members.values() if p.is_running()]
        self.seen.update(segments_in_use(alive))

    def stop(self, grace: float) -> int:
        """Stop the family as the harness would have; returns how many were running."""
        self.look(whole_session=True)
        running = [p for p in self.members.values() if _running(p)]
        if not running:
            return 0
        root = self.members.get(self.pid)
        signal_group(self.pid, signal.SIGTERM)  # the group outlives its leader while a member is left
        if root is not None and root.is_running():
            try:
                root.terminate()  # it may have left its group
            except psutil.Error:
                pass
            if not _gone(root, grace):
                signal_group(self.pid, signal.SIGKILL)
                try:
                    root.kill()
                except psutil.Error:
                    pass
        sweep([p for p in running if p.pid != self.pid], grace)
        return len(running)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _gone(proc: psutil.Process, timeout: float) -> bool:
    """Whether ``proc`` ends within ``timeout`` s. Not our child: its exit is polled for
    (a zombie counts as gone, whoever is to reap it)."""
    deadline = time.monotonic() + timeout
    while _running(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)  # polling the process's state until the deadline
    return True


def _note(log: str | None, text: str) -> None:
    if log is None:
        return
    with open(log, "ab") as out:
        out.write(f"--- {time.strftime('%H:%M:%S')} reaper: {text}\n".encode())


def _said(deleted: list[tuple[str, int]]) -> str:
    if not deleted:
        return "no shared memory left behind"
    return "deleted " + ", ".join(f"/dev/shm/{name} ({size / 2**20:.1f} MiB)" for name, size in deleted)


class _Lines:
    """Lines from a file descriptor, read unbuffered so that ``select`` on it tells the
    truth (a buffered reader may hold the next line where ``select`` cannot see it)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""
        self.closed = False

    def next(self, timeout: float | None) -> bytes | None:
        """The next line without its newline; None after ``timeout`` s with no whole line,
        or once the writer has closed its end (then :attr:`closed`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            if self.closed:
                return None
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.closed = True
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line


def main() -> int:
    """Watch one server's family until the harness says it stopped it, or disappears."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the harness
    lines = _Lines(sys.stdin.fileno())
    first = lines.next(None)
    if first is None:
        return 0  # the harness died before it could say what to watch
    config = json.loads(first)
    harness, log = config["harness"], config["log"]
    watch = _Watch(config["pid"], config["since"])
    before = set(config["before"])
    while True:
        watch.look()
        word = lines.next(TICK)
        if word == b"scan":
            watch.look(whole_session=True)
            try:
                os.write(sys.stdout.fileno(), b"scanned\n")
            except OSError:
                pass
        elif word == b"done":
            deleted = sweep_segments(watch.seen, before)
            if deleted:
                _note(log, f"the server stopped; {_said(deleted)}")
            return 0
        elif lines.closed or os.getppid() != harness:  # the harness is gone
            stopped = watch.stop(config["grace"])
            deleted = sweep_segments(watch.seen, before)
            _note(log, f"the harness (pid {harness}) is gone; stopped {stopped} process(es) of the server's "
                       f"family; {_said(deleted)}")
            return 0


if __name__ == "__main__":
    sys.exit(main())

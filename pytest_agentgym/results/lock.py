"""One writer per run directory.

A process that writes a run (a pytest run, a resume, a shard, a merge into a
run directory, the rollout service) holds an exclusive lock on
``<run_dir>/.lock`` for as long as it writes. A second process that asks for the
same directory is refused at once with the holder's pid and host, whichever of
the two started first, including two started at the same instant: the lock is
taken before anything in the directory is read or written.

The lock is an ``flock`` on an open file, so the kernel lets go of it when its
process dies however it dies (SIGKILL included): a dead run's lock is taken
over by the next process without any clean-up, and that run is then found
``crashed`` from its run.json as before (:func:`~pytest_agentgym.results.ledger.settle_crashed`).
The file itself names the holder (JSON ``{pid, host, started, boot_id, start_ticks,
command}``) so that the refusal can say who holds it; the name is advice, the flock is the
lock. A clean release empties the file; a lock taken while the file still names a holder
was left by a process that died holding it, and the new holder says so
(``RunLock.taken_over``, which the ledger keeps in run.json's notes).

Whether a recorded process still runs (:func:`process_alive`, for run.json's ``running``
runs) is never told from its pid alone: a pid is reused (after a reboot, or when the
numbers wrap), so the process is the one recorded only when the machine has not rebooted
since (``boot_id``) and the pid's start, in clock ticks since boot (``start_ticks``, field
22 of ``/proc/<pid>/stat``), is the one recorded; where /proc is not there, its start time
(``started``) within a second.

xdist workers of a run append under the run's lock-holding controller and take
no lock of their own (their appends are serialised by
:mod:`pytest_agentgym.results.jsonl`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

LOCK_FILE = ".lock"


class RunDirBusy(ValueError):
    """Another live process writes this run directory; the message names it."""

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        self.path = path
        self.holder = holder
        who = (f"process {holder.get('pid', '?')} on host {holder.get('host', '?')}"
               if holder else "another process (it has not written its name yet)")
        command = f" ({holder['command']})" if holder.get("command") else ""
        super().__init__(
            f"{path} is in use by {who}{command}: one process writes a run directory at a time; "
            f"wait for it to end (or stop it)")


def _read_holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _boot_id() -> str | None:
    """This boot of the machine (Linux: a random id made at each boot); None elsewhere."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22);
    None when there is no such process or no /proc to ask."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rindex(b")") + 2:].split()[19])  # after "pid (comm) ": field 3 is [0]
    except (OSError, ValueError, IndexError):
        return None


def this_process() -> dict[str, Any]:
    """``{pid, host, started, boot_id, start_ticks}`` of the calling process (``started``: its
    start time; the last two where /proc has them): what run.json records of its writer, and
    the lock file of its holder. :func:`process_alive` tells from them whether it still runs."""
    import psutil

    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": round(psutil.Process().create_time(), 2),
          "boot_id": _boot_id(), "start_ticks": start_ticks(os.getpid())}
    return {key: value for key, value in me.items() if value is not None}


def process_alive(process: dict[str, Any]) -> bool | None:
    """Whether the process that ``process`` (:func:`this_process`, as run.json or a lock file
    recorded it) names still runs: True, False, or None when this cannot be told from here
    (another host, or no process recorded). A live process with that pid is another one when
    the machine rebooted since (``boot_id``) or it started at another time (``start_ticks``;
    without them, ``started`` within a second)."""
    import psutil

    if not process or process.get("host") != socket.gethostname():
        return None
    try:
        pid = int(process["pid"])
    except (KeyError, TypeError, ValueError):
        return False
    booted, ticks = _boot_id(), start_ticks(pid)
    if process.get("boot_id") and booted and process["boot_id"] != booted:
        return False
    if isinstance(process.get("start_ticks"), int) and process.get("boot_id") and booted:
        return ticks == process["start_ticks"]
    try:
        return abs(psutil.Process(pid).create_time() - float(process.get("started", 0))) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, TypeError, ValueError):
        return False


def _left_by(holder: dict[str, Any]) -> str | None:
    """What to say of a lock taken while its file still names ``holder``: it died holding it (the
    kernel let go of its flock). None when the holder is this process, or lives on (a version
    of the plugin that left its name when it let go)."""
    alive = process_alive(holder)
    if alive or (holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname()):
        return None
    pid, host = holder.get("pid", "?"), holder.get("host", "?")
    command = f" ({holder['command']})" if holder.get("command") else ""
    if alive is None:
        why = f"process {pid} on host {host}{command} held it; from here it cannot be asked, but its lock was free"
    elif isinstance(pid, int) and start_ticks(pid) is not None:
        why = (f"process {pid}{command} held it and is gone: pid {pid} now belongs to another process "
               f"(started at another time, or before a reboot)")
    else:
        why = f"process {pid}{command} held it and is gone"
    return f"took over the lock of {{path}} that a process which died left: {why}"


def _holder_of(path: Path, patience_s: float = 2.0) -> dict[str, Any]:
    """Who holds the lock of ``path``: a holder that has just taken it writes its name the
    moment after, so an empty file is read again for a little while."""
    deadline = time.monotonic() + patience_s
    while True:
        holder = _read_holder(path)
        if holder or time.monotonic() > deadline:
            return holder
        time.sleep(0.01)


def _command() -> str:
    """This process's command line as a user typed it (``pytest ...`` for ``python -m pytest``)."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    name = program.parent.name if program.name == "__main__.py" else program.name
    from pytest_agentgym.results.redact import redact_text

    return redact_text(" ".join([name, *sys.argv[1:]]))[:300]  # the lock file is as public as run.json


class RunLock:
    """The exclusive lock of one run directory, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None
        #: whether acquire() made the directory (release() then removes it when nothing was written)
        self._made_dir = False
        #: what the lock was taken from, when its file named a holder that died holding it
        self.taken_over: str | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        """Take the lock or raise :class:`RunDirBusy`. Idempotent for the holder."""
        if self._fd is not None:
            return self
        self._made_dir = not self.run_dir.exists()
        holder = {**this_process(), "command": _command()}  # ready before the lock: written at once after it
        while True:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise RunDirBusy(self.run_dir, _holder_of(self.path)) from None
            # the holder before us may have removed the file between our open and our
            # flock (release() of a directory it made and left empty): lock the file
            # that is there now, not the unlinked one
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        left = _read_holder(self.path)
        said = _left_by(left) if left else None
        self.taken_over = said.format(path=self.path) if said else None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let go of the lock (and remove the directory when acquire() made it and the run
        wrote nothing into it: a run of other tests leaves no empty run directory)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._made_dir and {p.name for p in self.run_dir.iterdir()} <= {LOCK_FILE}:
                self.path.unlink(missing_ok=True)
                self.run_dir.rmdir()
            else:
                os.ftruncate(fd, 0)  # released cleanly: the next holder finds no name left behind
        except OSError:
            pass
        finally:
            os.close(fd)

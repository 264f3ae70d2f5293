"""JSON Lines files that survive full disks, crashes and several writers.

Used for ``episodes.jsonl`` (:mod:`pytest_agentgym.results.store`) and the NATS outbox
(:mod:`pytest_agentgym.publish.outbox`).

Writing (:func:`append_line`): one record is one line, written whole or not
at all. The file is opened for appending and locked with ``flock`` for the
append, so pytest-xdist workers writing to the same file never interleave;
short writes are continued until the line is out; when the disk refuses
(ENOSPC, EDQUOT, EFBIG, EIO, ...) the file is cut back to its size before the
append and :class:`ResultsWriteError` says which file, what failed and what
to do. A file whose last line was torn by a killed writer gets a newline
before the next line, so the torn line stays alone and the new one is whole.

Encoding (:func:`encode_line`) is strict JSON: a float that JSON cannot carry
(NaN, Infinity) is written as ``null`` and the record gets a ``non_finite``
entry naming each such field and its value, e.g.
``"non_finite": {"reward": "NaN", "turns[3].reward": "Infinity"}``.

Reading (:func:`read_records`) skips a line that cannot be read and reports
it as a :class:`SkippedLine` (file, line number, reason); a torn last line
(no newline at the end, left by a writer killed mid-write) is reported as such.
A line is parsed by :func:`parse_line` (the standard library) or, where speed counts,
by :func:`parse_fast` (orjson, with parse_line for what orjson refuses): every reader of
episodes.jsonl uses the second (:mod:`pytest_agentgym.results.reading`).
"""

from __future__ import annotations

import errno as errno_codes
import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: appends are not serialised across processes
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

#: Key added to a record that held non-finite floats (see the module docstring).
NON_FINITE_KEY = "non_finite"
#: Errors that mean "no room": the advice is to free space.
_NO_ROOM = {errno_codes.ENOSPC, errno_codes.EDQUOT, errno_codes.EFBIG}
_NOT_ALLOWED = {errno_codes.EROFS, errno_codes.EACCES, errno_codes.EPERM}


class ResultsWriteError(OSError):
    """A line could not be appended (or a file written); nothing partial was left.

    ``errno`` is the cause's, ``path`` the file. The message names the file,
    the error and what to do, e.g. ``could not write reports/r1/episodes.jsonl:
    No space left on device (ENOSPC); the file keeps only whole lines. Free
    space on the filesystem mounted at /mnt/data (0 bytes free), then resume
    with --agentgym-resume=reports/r1``.
    """

    def __init__(self, message: str, errno: int | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errno = errno
        self.path = path

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (pytest-xdist)
        return type(self), (self.message, self.errno, self.path)


def mount_point(path: str | Path) -> Path:
    """The mount point of the filesystem holding ``path`` (or its nearest existing parent)."""
    current = Path(os.path.abspath(path))
    while not current.exists() and current != current.parent:
        current = current.parent
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def _free_space(path: Path) -> str:
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.1f} MiB free" if free >= 2**20 else f"{free} bytes free"


def describe_write_error(path: str | Path, exc: OSError, then: str, done: str = "") -> str:
    """``could not write PATH: <strerror> (<ERRNO>); <done>. <what to do>, then <then>``."""
    code = exc.errno
    name = errno_codes.errorcode.get(code, str(code)) if code is not None else "unknown error"
    reason = exc.strerror or str(exc)
    where = mount_point(path)
    if code in _NO_ROOM:
        fix = f"Free space on the filesystem mounted at {where} ({_free_space(where)})"
        if code == errno_codes.EFBIG:
            fix += " or raise the file-size limit (ulimit -f)"
    elif code in _NOT_ALLOWED:
        fix = f"Make {Path(path).parent} writable (the filesystem mounted at {where})"
    else:
        fix = f"Check the disk holding {where} (see the kernel log)"
    return f"could not write {path}: {reason} ({name}){'; ' + done if done else ''}. {fix}, then {then}"


# --------------------------------------------------------------------------- encoding


def finite_json(value: Any, path: str = "", notes: dict[str, str] | None = None) -> Any:
    """A copy of ``value`` with NaN and infinities replaced by None; each one
    replaced is noted in ``notes`` as ``{"turns[3].reward": "NaN"}``."""
    if isinstance(value, float) and not math.isfinite(value):
        if notes is not None:
            notes[path or "value"] = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return None
    if isinstance(value, dict):
        return {k: finite_json(v, f"{path}.{k}" if path else str(k), notes) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v, f"{path}[{i}]", notes) for i, v in enumerate(value)]
    return value


def strict_dumps(data: Any, **options: Any) -> str:
    """``json.dumps`` that never writes ``NaN``/``Infinity`` (see :func:`finite_json`);
    a dict that held some gets a ``non_finite`` entry naming them."""
    options.setdefault("ensure_ascii", False)
    try:
        return json.dumps(data, allow_nan=False, **options)
    except ValueError:
        notes: dict[str, str] = {}
        clean = finite_json(data, "", notes)
        if isinstance(clean, dict):
            clean[NON_FINITE_KEY] = {**clean.get(NON_FINITE_KEY, {}), **notes}
        return json.dumps(clean, allow_nan=False, **options)


def json_utf8(text: str) -> bytes:
    """JSON text (written with ``ensure_ascii=False``) as UTF-8 bytes. Half a surrogate
    pair (a reply cut inside an emoji arrives as ``"\\ud83d"``) has no UTF-8 form; it is
    written as that ``\\ud83d`` escape. Only a JSON string can hold one, so the
    bytes are valid JSON and read back as the same string."""
    return text.encode("utf-8", "backslashreplace")


def encode_line(data: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    """One strict JSON line, UTF-8 (see :func:`json_utf8`), ending in a newline."""
    return json_utf8(strict_dumps(data, default=default) + "\n")


# --------------------------------------------------------------------------- appending


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises rather than returning 0 on files
            raise OSError(errno_codes.EIO, "the write made no progress")
        view = view[written:]


def append_line(path: str | Path, data: Any, *, then: str,
                default: Callable[[Any], Any] | None = None) -> None:
    """Append ``data`` as one JSON line to ``path`` (created if missing): the whole
    line or nothing. ``then`` is what the user should do after fixing a write
    error (it ends the :class:`ResultsWriteError` message)."""
    line = encode_line(data, default=default)
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ResultsWriteError(describe_write_error(path, exc, then, "nothing was written"),
                                exc.errno, str(path)) from exc
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by close
        start = os.fstat(fd).st_size
        if start and os.pread(fd, 1, start - 1) != b"\n":
            line = b"\n" + line  # a torn last line (killed writer) stays on its own line
        try:
            _write_all(fd, line)
        except OSError as exc:
            done = _cut_back(fd, start)
            raise ResultsWriteError(describe_write_error(path, exc, then, done), exc.errno,
                                    str(path)) from exc
    finally:
        os.close(fd)


def _cut_back(fd: int, size: int) -> str:
    """Truncate to ``size`` (what the file held before this append); says what happened."""
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        return (f"the partial line could not be cut off ({exc.strerror}); readers skip it "
                "as a torn line")
    return "nothing of this record was kept, the file holds only whole lines"


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class SkippedLine:
    """A line of a JSON Lines file that a reader could not use."""

    path: str
    line: int
    reason: str
    #: The last line, without its newline: a writer was stopped mid-write.
    torn: bool = False
    #: What the line is, when it is neither torn nor unreadable (a record of a later
    #: generation than its run's: :func:`~pytest_agentgym.results.reading.read_episodes_file`)
    what: str = ""
    #: The episode a line of episodes.jsonl names when it is a record but for its numbers (a
    #: NaN or infinite reward, a number beyond the ranges): (env, task index, repeat), with
    #: the line's generation and model; compare counts that episode as errored
    #: (:func:`~pytest_agentgym.results.reading.named_episode`). None for any other line.
    key: tuple[str, int, int] | None = None
    generation: int | None = None
    model: str | None = None

    def __str__(self) -> str:
        what = self.what or ("a torn last line" if self.torn else "an unreadable line")
        return f"{self.path}:{self.line}: skipped {what} ({self.reason})"


def parse_line(raw: bytes) -> Any:
    """One line of a JSON Lines file, as the standard library reads it."""
    return json.loads(raw.decode("utf-8"))


def parse_fast(raw: bytes, fallback: Callable[[bytes], Any] = parse_line) -> Any:
    """A line read by orjson (about twice as fast as the standard library); a line orjson
    refuses (NaN, half a surrogate pair, not UTF-8, deep nesting, a byte order mark) is read
    by ``fallback`` (:func:`parse_line`), which gives the usual answer or error. orjson reads
    strict JSON only, so a line it read holds no NaN or Infinity.

    One difference stays: orjson reads an integer beyond 64 bits as the nearest float. Both
    readers take the same lines as records all the same (a whole-number field refuses either
    form, :func:`~pytest_agentgym.results.record_checks.check_record_data`; a number field takes
    either); a reader that writes a line back (merge) looks for such a float."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return fallback(raw)


#: Read buffer of :func:`read_numbered_from`: an episode's line is often longer than the default
#: 8 KiB, and a line that spans buffers is put together from pieces (four times slower to read).
READ_BUFFER = 1 << 16

#: What a line that cannot be used raises while it is parsed or converted (RecursionError:
#: JSON nested deeper than the parser goes).
UNREADABLE = (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError)


def read_numbered(path: str | Path, convert: Callable[[Any], T], *, parse: Callable[[bytes], Any] = parse_line
                  ) -> tuple[list[tuple[int, int, T]], list[SkippedLine]]:
    """Every line of ``path`` parsed as JSON (by ``parse``) and passed to ``convert``, in file
    order, as ``(line number, byte offset of the line, value)``; lines that are not UTF-8, not
    JSON, or that ``convert`` rejects (see :data:`UNREADABLE`) are skipped and returned.
    Blank lines are ignored. A missing file is empty."""
    values, skipped, _ = read_numbered_from(path, convert, parse=parse)
    return values, skipped


def read_numbered_from(path: str | Path, convert: Callable[[Any], T], *, parse: Callable[[bytes], Any] = parse_line,
                       start: tuple[int, int] = (0, 0), whole_lines: bool = False
                       ) -> tuple[list[tuple[int, int, T]], list[SkippedLine], tuple[int, int]]:
    """:func:`read_numbered` from ``start``, ``(byte offset, lines before it)``, for a reader that
    follows a file as it grows (the runs index of ``pytest-agentgym view``); also returns where
    the next read starts. ``whole_lines``: a last line without its newline is left for that next
    read (its writer may be writing it still) rather than skipped as torn."""
    path = Path(path)
    values: list[tuple[int, int, T]] = []
    skipped: list[SkippedLine] = []
    offset, read = start
    try:
        handle = path.open("rb", buffering=READ_BUFFER)
    except FileNotFoundError:
        return values, skipped, start
    with handle:
        handle.seek(offset)
        for number, raw in enumerate(handle, read + 1):
            if whole_lines and not raw.endswith(b"\n"):
                break
            line_start, offset, read = offset, offset + len(raw), number
            if raw.isspace():  # (not raw.strip(): that copies the line)
                continue
            try:
                values.append((number, line_start, convert(parse(raw))))
            except UNREADABLE as exc:
                torn = not raw.endswith(b"\n")  # only the last line can lack its newline
                reason = (f"no newline at the end: its writer was stopped mid-write; {_reason(exc)}"
                          if torn else f"{type(exc).__name__}: {_reason(exc)}")
                skipped.append(SkippedLine(str(path), number, reason, torn))
    return values, skipped, (offset, read)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to read"
    return str(exc)


def read_records(path: str | Path, convert: Callable[[Any], T], *,
                 parse: Callable[[bytes], Any] = parse_line) -> tuple[list[T], list[SkippedLine]]:
    """The values of :func:`read_numbered` without their line numbers, and the skipped lines.
    (Episode records are read by :func:`pytest_agentgym.results.reading.read_episodes_file`,
    which also leaves out duplicates.)"""
    values, skipped = read_numbered(path, convert, parse=parse)
    return [value for _, _, value in values], skipped

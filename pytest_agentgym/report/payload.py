"""The report's data: the episode index and the trajectory chunks, built as the results are read.

A trajectory is what the page reads only when an episode is opened; the index
is one short row per episode. :class:`TrajectoryPacker` takes trajectories one
at a time, environment by environment (similar text sits together and
compresses better), and closes a chunk of about :data:`CHUNK_BYTES` as soon as
it is full, gzipped once the run's trajectories pass :data:`COMPRESS_ABOVE`.
:func:`read_for_report` reads episodes.jsonl line by line through it, keeping
each record without its turns: a 10,000-episode report never holds every
trajectory as objects, and holds their text only packed.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import operator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import orjson
from markupsafe import Markup

from pytest_agentgym.results.current import Duplicate
from pytest_agentgym.results.jsonl import SkippedLine, finite_json, json_utf8
from pytest_agentgym.results.reading import read_episodes_file, record_without_turns
from pytest_agentgym.results.records import TURN_NAMES, TURN_REQUIRED, EpisodeRecord, Turn
from pytest_agentgym.results.redact import redact_text

#: Trajectory data (uncompressed JSON bytes) above which chunks are gzipped.
COMPRESS_ABOVE = 2_000_000
#: Target size of one trajectory chunk (uncompressed JSON bytes).
CHUNK_BYTES = 256_000
#: Turn fields, in the order each turn is stored in the embedded JSON.
TURN_FIELDS = ("index", "observation", "reply", "action", "feedback", "reward", "done",
               "model_latency_s", "env_latency_s", "prompt_tokens", "completion_tokens", "score")
#: Closed chunks that may wait for the gzip thread (each about CHUNK_BYTES of text)
ZIP_AHEAD = 4
#: gzip level of the chunks: level 1 packs text like this nearly as small as 6, several times faster
GZIP_LEVEL = 1

_TURN_VALUES = operator.attrgetter(*TURN_FIELDS)
_TURN_ITEMS = operator.itemgetter(*TURN_FIELDS)
_OBSERVATION = TURN_FIELDS.index("observation")
_TURN_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Turn) if f.default is not dataclasses.MISSING}


def escape_json_text(text: str) -> Markup:
    """JSON text made safe inside ``<script type="application/json">``: ``<``, ``>``
    and ``&`` become ``\\u003c``, ``\\u003e`` and ``\\u0026`` (JSON.parse reads them
    back unchanged), so no string can close the tag or open a comment; U+2028/U+2029
    are escaped for older JavaScript parsers."""
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return Markup(text)


def outcome_of(record: EpisodeRecord) -> str:
    """passed / failed / unsolved / error, also for records written without ``outcome``."""
    if record.error is not None or record.outcome == "error":
        return "error"
    if record.outcome:
        return record.outcome
    return "passed" if record.success else "failed"


@dataclass(frozen=True)
class Chunk:
    """One block of trajectories as embedded in the page."""

    number: int
    encoding: str  # "json" or "gzip-base64"
    text: Markup


def turn_rows(turns: Any) -> list[list[Any]]:
    """Stored turns (the dicts of an episodes.jsonl line) as lists in :data:`TURN_FIELDS`
    order (see :func:`turn_values`). What the harness writes, every turn with every
    field, is taken in one pass in C; anything else turn by turn."""
    try:
        if all(map(TURN_NAMES.issuperset, turns)):  # no key that Turn does not have
            return list(map(list, map(_TURN_ITEMS, turns)))
    except (KeyError, TypeError):
        pass  # a field left out (Turn's default), or not a turn at all
    return [turn_values(turn) for turn in turns]


def turn_values(turn: dict[str, Any]) -> list[Any]:
    """A stored turn (a dict of episodes.jsonl) as its list in :data:`TURN_FIELDS`
    order, with Turn's defaults; keys Turn does not have, or a missing required
    one, are a TypeError, as ``Turn(**turn)`` would raise."""
    if not isinstance(turn, dict):
        raise TypeError(f"not a turn: {type(turn).__name__}")
    keys = turn.keys()
    if not keys <= TURN_NAMES or not TURN_REQUIRED <= keys:
        raise TypeError(f"not a turn: keys {sorted(keys)}")
    return [turn[name] if name in turn else _TURN_DEFAULTS.get(name) for name in TURN_FIELDS]


def trajectory_json(record: EpisodeRecord, turns: list[list[Any]] | None = None) -> str:
    """The part of an episode that the page reads only when the episode is opened.

    Each turn is a list in :data:`TURN_FIELDS` order (``turns``: those lists
    already made, which this changes, else taken from ``record.turns``). A turn's observation is
    stored as null when it repeats the previous turn's feedback (the usual case:
    the feedback is what the model sees next), which saves about a third. URLs
    are redacted in the JSON text (they stop at quotes and backslashes, so the
    text stays valid JSON).
    """
    rows = [list(_TURN_VALUES(turn)) for turn in record.turns] if turns is None else turns
    feedback = TURN_FIELDS.index("feedback")
    previous_feedback = None
    for values in rows:
        this_feedback = values[feedback]
        if values[_OBSERVATION] == previous_feedback:
            values[_OBSERVATION] = None
        previous_feedback = this_feedback
    data = {
        "model": record.model, "checkpoint": record.checkpoint, "node": record.node, "worker": record.worker,
        "nodeid": record.nodeid, "started_at": record.started_at, "min_reward": record.min_reward,
        "score": record.score, "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens, "error": _error(record.error),
        "retried": [_error(e) for e in record.retried], "turns": rows,
    }
    try:
        text = orjson.dumps(data).decode("utf-8")  # NaN and infinities become null, as finite_json does
    except TypeError:  # what orjson does not write: an integer beyond 64 bits, a lone surrogate
        text = json.dumps(finite_json(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return redact_text(text)


def _error(error) -> dict[str, str] | None:  # type: ignore[no-untyped-def]
    return None if error is None else {"type": error.type, "message": error.message, "where": error.where}


class TrajectoryPacker:
    """Trajectories in, chunks out, one open chunk per environment.

    :meth:`add` returns a slot number; once :meth:`finish` has run,
    ``placement[slot]`` is the (chunk, position) of that trajectory.
    ``compress``: None gzips once the trajectories pass :data:`COMPRESS_ABOVE`
    (chunks made before then are packed then), True or False forces it.
    Gzipped chunks are compressed on a thread of their own while the next ones
    are read (zlib lets go of the GIL: on two cores it costs the reader nothing).
    """

    def __init__(self, compress: bool | None = None) -> None:
        self._compress = compress
        self.zipped = bool(compress)
        self.chunks: list[Chunk] = []
        self.placement: list[tuple[int, int]] = []
        self._open: dict[str, tuple[list[str], list[int], int]] = {}
        self._raw: list[tuple[int, str]] = []  # closed chunks not packed yet (before the switch)
        self._zipping: list[Future[Chunk]] = []
        self._zipper: ThreadPoolExecutor | None = None
        self._waited = 0  # chunks of _zipping known to be packed
        self._closed = 0
        self.total = 0

    def add(self, env: str, text: str) -> int:
        texts, slots, size = self._open.get(env, ([], [], 0))
        if size and size + len(text) > CHUNK_BYTES:
            self._close(texts, slots)
            texts, slots, size = [], [], 0
        slot = len(self.placement)
        self.placement.append((-1, -1))
        texts.append(text)
        slots.append(slot)
        self._open[env] = (texts, slots, size + len(text) + 1)
        self.total += len(text) + 1
        if self._compress is None and not self.zipped and self.total > COMPRESS_ABOVE:
            self.zipped = True
            for number, raw in self._raw:
                self._zip(number, raw)
            self._raw = []
        return slot

    def _close(self, texts: list[str], slots: list[int]) -> None:
        number = self._closed
        self._closed += 1
        for position, slot in enumerate(slots):
            self.placement[slot] = (number, position)
        raw = "[" + ",".join(texts) + "]"
        if self.zipped:
            self._zip(number, raw)
        elif self._compress is False:  # plain for good: escaped now, not held twice at the end
            self.chunks.append(Chunk(number, "json", escape_json_text(raw)))
        else:
            self._raw.append((number, raw))

    def _zip(self, number: int, raw: str) -> None:
        if self._zipper is None:
            self._zipper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-gzip")
        self._zipping.append(self._zipper.submit(gzip_chunk, number, raw))
        if len(self._zipping) - self._waited > ZIP_AHEAD:  # the reader is ahead: wait, holding less text
            self._zipping[self._waited].result()
            self._waited += 1

    def finish(self, env_order: Sequence[str] = ()) -> list[Chunk]:
        """Close the open chunks (in ``env_order``, then the rest) and return every chunk."""
        for env in [*[e for e in env_order if e in self._open], *[e for e in self._open if e not in env_order]]:
            texts, slots, _ = self._open.pop(env)
            if texts:
                self._close(texts, slots)
        self.chunks.extend(Chunk(number, "json", escape_json_text(raw)) for number, raw in self._raw)
        self._raw = []
        if self._zipper is not None:
            try:
                self.chunks.extend(future.result() for future in self._zipping)
            finally:
                self._zipper.shutdown(cancel_futures=True)
                self._zipper, self._zipping, self._waited = None, [], 0
        self.chunks.sort(key=lambda chunk: chunk.number)
        return self.chunks


def gzip_chunk(number: int, raw: str) -> Chunk:
    """A chunk's JSON text gzipped (level :data:`GZIP_LEVEL`, no timestamp) and base64-encoded
    (half a surrogate pair as its escape: :func:`~pytest_agentgym.results.jsonl.json_utf8`)."""
    packed = gzip.compress(json_utf8(raw), compresslevel=GZIP_LEVEL, mtime=0)
    return Chunk(number, "gzip-base64", Markup(base64.b64encode(packed).decode("ascii")))


def index_row(record: EpisodeRecord, env_number: int, chunk: int, position: int,
              run_id: str) -> dict[str, Any]:
    """What the episode table needs of one episode (short keys: 10,000 of these load at once)."""
    row: dict[str, Any] = {
        "e": env_number, "t": record.task_index, "r": record.repeat, "o": outcome_of(record),
        "w": finite_json(record.reward), "s": int(record.success), "n": record.rounds,
        "k": record.prompt_tokens + record.completion_tokens,
        "d": round(finite_json(record.duration_s) or 0.0, 2), "x": record.stop_reason,
        "a": record.attempts, "c": chunk, "p": position,
    }
    if record.run_id != run_id:
        row["i"] = record.episode_id  # the page derives the id only for the run's own episodes
    if record.error is not None:
        row["err"] = f"{record.error.type} ({record.error.where})"
    return row


def build_payload(episodes: Sequence[EpisodeRecord], envs: Sequence[str], compress: bool | None,
                  run_id: str = "", packed: "PackedRun | None" = None
                  ) -> tuple[list[dict[str, Any]], list[Chunk], bool]:
    """The episode index (one small dict per episode, in the order of ``episodes``) and the trajectory chunks.

    ``packed``: the trajectories already packed while reading (:func:`read_for_report`;
    its records are ``episodes``); else they are packed here from ``episodes``.
    """
    env_number = {env: n for n, env in enumerate(envs)}
    if packed is None:
        packer = TrajectoryPacker(compress)
        slots = [packer.add(record.env, trajectory_json(record)) for record in episodes]
    else:
        packer, slots = packed.packer, packed.slots
    chunks = packer.finish(envs)
    index = [index_row(record, env_number[record.env], *packer.placement[slot], run_id)
             for record, slot in zip(episodes, slots)]
    return index, chunks, packer.zipped


@dataclass
class PackedRun:
    """A run's records without their turns, and their trajectories packed (see module doc)."""

    records: list[EpisodeRecord]
    slots: list[int]
    packer: TrajectoryPacker
    skipped: list[SkippedLine]
    #: second records of one episode and generation, left out (the first written counts)
    duplicates: list[Duplicate] = dataclasses.field(default_factory=list)

    def current(self, keep: Sequence[EpisodeRecord]) -> "PackedRun":
        """Only the records in ``keep`` (results.current_records of ``records``), with their slots."""
        wanted = {id(record) for record in keep}
        pairs = [(r, s) for r, s in zip(self.records, self.slots) if id(r) in wanted]
        return PackedRun([r for r, _ in pairs], [s for _, s in pairs], self.packer, self.skipped, self.duplicates)


def read_for_report(path: str | Path, compress: bool | None = None) -> PackedRun:
    """Read episodes.jsonl line by line through the readers' one function
    (:func:`pytest_agentgym.results.reading.read_episodes_file`: lines that are no record
    and duplicates are left out and reported): each record is kept without its turns, and
    its trajectory goes to the packer at once."""
    packer = TrajectoryPacker(compress)
    slot_of: dict[int, int] = {}  # id(record) -> slot (a duplicate, left out, leaves its slot unused)

    def convert(data: dict[str, Any]) -> EpisodeRecord:
        record = record_without_turns(data)  # first: a line that is no record is skipped, as every reader skips it
        turns = turn_rows(data.get("turns", ()))
        slot_of[id(record)] = packer.add(record.env, trajectory_json(record, turns))
        return record

    found = read_episodes_file(path, convert, keep_index=True)  # leaves the light index for compare, trend, merge
    return PackedRun(found.records, [slot_of[id(r)] for r in found.records], packer, found.skipped,
                     found.duplicates)

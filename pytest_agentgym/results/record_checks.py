"""What a line of ``episodes.jsonl`` must hold to be an episode record.

:func:`check_record_data` is the one check every reader of the file applies
(:meth:`~pytest_agentgym.results.records.EpisodeRecord.from_line`,
:mod:`~pytest_agentgym.results.reading`): the JSON type of each field, finite numbers within
:data:`MAX_NUMBER`, whole numbers within :data:`MAX_WHOLE`, errors and turns that are
objects with fields of their types. A line that fails it is no record, and its message
names the field and what it holds (docs/results.md).
"""

from __future__ import annotations

import math
from typing import Any

#: What each field of an episode record must be in episodes.jsonl (absent is fine: the
#: dataclass says which fields are required). A line whose fields are not is not a record.
_STRINGS = ("run_id", "env", "stop_reason", "started_at", "model")
_OPTIONAL_STRINGS = ("outcome", "nodeid", "checkpoint", "node", "worker", "opening_sha256", "batch")
_WHOLE_NUMBERS = ("task_index", "repeat", "rounds", "prompt_tokens", "completion_tokens", "generation")
_OPTIONAL_WHOLE_NUMBERS = ("max_rounds", "sample")
#: (a non-finite float is written as null, with the record's ``non_finite`` naming it)
_OPTIONAL_NUMBERS = ("reward", "min_reward", "score", "duration_s")
_LISTS = ("turns", "retried")
_OPTIONAL_MAPPINGS = ("error", "sampling", "tokens")
#: A turn's fields (its numbers may be null: a non-finite one is written as null).
_TURN_STRINGS = ("observation", "reply", "feedback")
_TURN_NUMBERS = ("reward", "score", "model_latency_s", "env_latency_s")
_TURN_WHOLE_NUMBERS = ("prompt_tokens", "completion_tokens")
_ERROR_FIELDS = ("type", "message", "where")

#: The largest whole number a record may hold (task index, repeat, rounds, tokens,
#: generation): 2**53 - 1, the largest that a float and the report's JavaScript hold exactly.
MAX_WHOLE = 2**53 - 1
#: The smallest each whole number may be (others: 0); token counts are the endpoint's to say.
_LOWEST = {"generation": 1, "prompt_tokens": -MAX_WHOLE, "completion_tokens": -MAX_WHOLE}
#: The largest magnitude of a reward, score, threshold, duration or latency: far beyond any
#: that a run produces, and small enough that every sum, mean and variance of a run's numbers
#: stays finite (a float overflows past about 1.8e308; the square of 1e100 is 1e200).
MAX_NUMBER = 1e100


def check_record_data(data: Any, *, finite: bool = True) -> None:
    """Raise TypeError (naming the field and what it holds) unless ``data`` has the shape
    of an episode record that every reader can count: the right JSON type for each field,
    numbers that are finite (a NaN or Infinity token, which Python's json accepts, is no
    reward: the harness writes a non-finite number as null) and within :data:`MAX_NUMBER`,
    whole numbers up to :data:`MAX_WHOLE` (an index, repeat or count from 0, a generation from
    1), errors and turns that are objects with fields of their types. ``finite=False`` checks
    the types alone and lets non-finite and out-of-range numbers through (a record in memory,
    see :meth:`~pytest_agentgym.results.records.EpisodeRecord.from_dict`)."""
    if not isinstance(data, dict):
        raise TypeError(f"an episode record is a JSON object, this line holds {_kind(data)}")
    wrong = _wrong_field(data, finite)
    if wrong is not None:
        name, expected, value = wrong
        raise TypeError(f"'{name}' must be {expected}, got {_kind(value)}{_shown(value)}")


def _wrong_field(data: dict[str, Any], finite: bool = True) -> tuple[str, str, Any] | None:
    """(field path, what it must be, what it holds) of the first field that is wrong."""
    get = data.get
    for name in _STRINGS:
        if name in data and not isinstance(get(name), str):
            return name, "a string", get(name)
    for name in _OPTIONAL_STRINGS:
        if get(name) is not None and not isinstance(get(name), str):
            return name, "a string or null", get(name)
    for name in _WHOLE_NUMBERS:
        if name in data:
            wrong = _wrong_whole(get(name), _LOWEST.get(name, 0), strict=finite)
            if wrong:
                return name, wrong, get(name)
    for name in _OPTIONAL_WHOLE_NUMBERS:
        wrong = _wrong_whole(get(name), 0, optional=True, strict=finite)
        if wrong:
            return name, wrong, get(name)
    for name in _OPTIONAL_NUMBERS:
        wrong = _wrong_number(get(name), finite)
        if wrong:
            return name, wrong, get(name)
    if "success" in data and not isinstance(get("success"), bool):
        return "success", "true or false", get("success")
    for name in _LISTS:
        if name in data and not isinstance(get(name), (list, tuple)):
            return name, "a list", get(name)
    for name in _OPTIONAL_MAPPINGS:
        if get(name) is not None and not isinstance(get(name), dict):
            return name, "an object or null", get(name)
    if get("opening") is not None and not _messages(get("opening")):
        return "opening", "a list of {role, content} strings or null", get("opening")
    if get("error") is not None:
        found = _wrong_error(get("error"), "error")
        if found is not None:
            return found
    for number, error in enumerate(get("retried") or ()):
        found = _wrong_error(error, f"retried[{number}]")
        if found is not None:
            return found
    for number, turn in enumerate(get("turns") or ()):
        if not _plain_turn(turn):  # the usual turn passes here; the rest is looked at closely
            found = _wrong_turn(turn, f"turns[{number}]", finite)
            if found is not None:
                return found
    return None


def _plain_turn(turn: Any) -> bool:
    """True for a turn as the harness writes it (what :func:`_wrong_turn` accepts, checked
    in one pass: a report reads every turn of every episode); False says look closer."""
    if type(turn) is not dict:
        return False
    get = turn.get
    index, action, data = get("index"), get("action"), get("token_data")
    if get("sent") is not None:
        return False
    if (type(index) is not int or not 0 <= index <= MAX_WHOLE or type(get("observation")) is not str
            or type(get("reply")) is not str or type(get("feedback")) is not str
            or (action is not None and type(action) is not str) or type(get("done")) is not bool
            or (data is not None and type(data) is not dict)):
        return False
    for value in (get("reward"), get("score"), get("model_latency_s"), get("env_latency_s")):
        if value is not None and ((type(value) is not float and type(value) is not int)
                                  or not -MAX_NUMBER <= value <= MAX_NUMBER):
            return False
    for value in (get("prompt_tokens"), get("completion_tokens")):
        if value is not None and (type(value) is not int or not -MAX_WHOLE <= value <= MAX_WHOLE):
            return False
    return True


def _wrong_error(error: Any, where: str) -> tuple[str, str, Any] | None:
    if not isinstance(error, dict):
        return where, "an object {type, message, where}", error
    for name in _ERROR_FIELDS:
        if not isinstance(error.get(name), str):
            return f"{where}.{name}", "a string", error.get(name)
    return None


def _wrong_turn(turn: Any, where: str, finite: bool = True) -> tuple[str, str, Any] | None:
    if not isinstance(turn, dict):
        return where, "an object (a turn)", turn
    get = turn.get
    wrong = _wrong_whole(get("index"), 0, strict=finite)
    if wrong:
        return f"{where}.index", wrong, get("index")
    for name in _TURN_STRINGS:
        if not isinstance(get(name), str):
            return f"{where}.{name}", "a string", get(name)
    if get("action") is not None and not isinstance(get("action"), str):
        return f"{where}.action", "a string or null", get("action")
    if not isinstance(get("done"), bool):
        return f"{where}.done", "true or false", get("done")
    for name in _TURN_NUMBERS:
        wrong = _wrong_number(get(name), finite)
        if wrong:
            return f"{where}.{name}", wrong, get(name)
    for name in _TURN_WHOLE_NUMBERS:
        wrong = _wrong_whole(get(name), -MAX_WHOLE, optional=True, strict=finite)
        if wrong:
            return f"{where}.{name}", wrong, get(name)
    if get("token_data") is not None and not isinstance(get("token_data"), dict):
        return f"{where}.token_data", "an object or null", get("token_data")
    if get("sent") is not None and not _messages(get("sent")):
        return f"{where}.sent", "a list of {role, content} strings or null", get("sent")
    return None


def _messages(value: Any) -> bool:
    """Whether ``value`` is a list of chat messages ({role, content} strings)."""
    return isinstance(value, (list, tuple)) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in value)


def _wrong_whole(value: Any, low: int, *, optional: bool = False, strict: bool = True) -> str:
    """What a whole-number field must be, when ``value`` is not that; else ``""``. ``low``: the
    smallest it may be (0 for an index or a count the harness makes, 1 for a generation,
    -:data:`MAX_WHOLE` for a token count, which the endpoint reports)."""
    if optional and value is None:
        return ""
    null = " or null" if optional else ""
    if not isinstance(value, int) or isinstance(value, bool):
        return "a whole number" + null
    if strict and not low <= value <= MAX_WHOLE:
        shown = "-(2**53 - 1)" if low == -MAX_WHOLE else str(low)
        return f"a whole number from {shown} to 2**53 - 1{null}"
    return ""


def _wrong_number(value: Any, finite: bool = True) -> str:
    """What a number field (null allowed) must be, when ``value`` is not that; else ``""``."""
    if value is None:
        return ""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "a number or null"
    if finite and not -MAX_NUMBER <= value <= MAX_NUMBER:  # NaN fails every comparison
        if isinstance(value, float) and not math.isfinite(value):
            return "a finite number or null"
        return f"a number from -{MAX_NUMBER:.0e} to {MAX_NUMBER:.0e} or null"
    return ""


def _kind(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        name = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return f"{name} (Python's json reads it, strict JSON has no such number)"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """`` 'abc'`` after the kind of a scalar; nothing for null, lists, objects and non-finite floats."""
    if value is None or isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    text = repr(value)
    return " " + (text if len(text) <= 40 else text[:37] + "...")


"""A ``POST /rollouts`` body, checked: which episodes to play, on which endpoint.

    {"env": "textcraft", "model": "model-name", "base_url": "http://172.17.0.1:8001",
     "ids": [0, 1, 2, 3], "max_round": 10,
     "n": 4, "sampling": {"temperature": 1.0, "logprobs": true}, "seed": 7}

A batch is played with the sampling it sends, plus the node's ``temperature`` and
``max_tokens`` where it sends none (:data:`NODE_DEFAULTS`); no other key of the
node's ``model.sampling`` is added unless the batch says ``"node_sampling": true``.
With a seed, each rollout has its own seed stream, drawn from the batch seed, the
entry's position in ``ids`` and the sample (:func:`episode_seed`): no two rollouts
share draws, whether they are samples of one entry, a repeated entry, or rollouts
of two batches with consecutive seeds.

Anything wrong is a :class:`BadRollouts` whose message says which key, what
was wrong and what to send instead; the service answers it with HTTP 400. A
message shows what was sent through :func:`shown`, cut to a short prefix: a
body may be up to a megabyte, and an error never echoes it whole.

The batch gives the model server's address as a trainer knows it (vLLM's
``http://172.17.0.1:8001``); the OpenAI paths hang off ``/v1``, which
:func:`openai_base` adds unless the URL already ends in it (``.../v1``,
TensorZero's ``.../openai/v1``). Whether it answers is
:mod:`pytest_agentgym.rollouts.endpoint`'s to check.
"""

from __future__ import annotations

import hashlib
import reprlib
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from pytest_agentgym.envs.spec import EnvSpec
from pytest_agentgym.model.call_settings import Sampling
from pytest_agentgym.model.endpoint_settings import join_url
from pytest_agentgym.results.redact import redact_url
from pytest_agentgym.rollouts.node import RolloutNode

REQUIRED = ("env", "model", "ids")
OPTIONAL = ("base_url", "max_round", "n", "sampling", "seed", "node_sampling")
#: The keys of the node's ``model.sampling`` a batch is played with when it sends none of
#: its own: how random and how long a reply is must have some value, and the node's is
#: the one its pytest runs use. The node's other keys (top_p, stop, seed, ...) change what
#: is sampled behind the trainer's back, so they come only with ``"node_sampling": true``.
NODE_DEFAULTS = ("temperature", "max_tokens")
#: The most rollouts one request may ask for (ids x n); a bigger batch is split by the client.
MAX_ROLLOUTS = 10_000
#: The longest base_url taken.
MAX_URL_CHARS = 2048


#: The most characters of a sent value an error message shows.
SHOWN_CHARS = 80

_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxdict, _short.maxlevel = SHOWN_CHARS, SHOWN_CHARS, 6, 4, 2


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters, saying how long a long string was:
    what an error message may echo of what a caller sent."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    text = _short.repr(value)
    return text if len(text) <= limit + 10 else text[:limit] + "..."


def shown_list(values: Any, limit: int = 5) -> str:
    """The first ``limit`` of ``values``, each :func:`shown` (short strings bare), and how many more."""
    values = list(values)
    items = [v if isinstance(v, str) and len(v) <= SHOWN_CHARS else shown(v) for v in values[:limit]]
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(items) + more


class BadRollouts(ValueError):
    """A body the service refuses (HTTP 400); the message names the key and the fix."""


@dataclass(frozen=True)
class RolloutBatch:
    spec: EnvSpec
    model: str
    #: the endpoint's OpenAI base URL (ending in /v1)
    base_url: str
    ids: tuple[int, ...]
    max_rounds: int
    n: int
    #: what the batch is played with: its own sampling, plus the node's defaults (seed left out)
    sampling: dict[str, Any]
    seed: int | None

    def sampling_for(self, entry: int, sample: int) -> dict[str, Any]:
        """What sample ``sample`` (0-based) of the entry at position ``entry`` of ``ids`` is
        played with: the batch's sampling and, with a batch seed, the rollout's own seed
        (:func:`episode_seed`); each model call then sends a seed drawn from that one, the
        task and the turn (engine/episode.py ``turn_sampling``). No seed is sent when none is given."""
        if self.seed is None:
            return dict(self.sampling)
        return {**self.sampling, "seed": episode_seed(self.seed, entry, sample)}

    def stream(self, entry: int, sample: int) -> dict[str, int] | None:
        """Which seed stream a rollout plays: ``{"batch", "entry", "sample", "episode"}``
        (None without a batch seed), for its answer, so that it can be played again."""
        if self.seed is None:
            return None
        return {"batch": self.seed, "entry": entry, "sample": sample,
                "episode": episode_seed(self.seed, entry, sample)}

    @property
    def size(self) -> int:
        return len(self.ids) * self.n


def episode_seed(batch_seed: int, entry: int, sample: int) -> int:
    """The seed of one rollout's stream: a SHA-256 of the batch seed, the entry's position
    in ``ids`` and the sample, cut to 53 bits (0 to 2**53 - 1, exact in any JSON reader).
    Unlike ``seed + sample``, two rollouts share a stream only by a 2**-53 chance: not the
    samples of one entry, not a repeated entry, not batch seed 8 and batch seed 7's sample 1."""
    digest = hashlib.sha256(f"rollout:{batch_seed}:{entry}:{sample}".encode()).digest()
    return int.from_bytes(digest[:7], "big") >> 3


def _whole(value: Any, key: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BadRollouts(f"'{key}' must be a whole number >= {low}, got {shown(value)}")
    return value


def parse_batch(body: Any, node: RolloutNode, *, default_base_url: str | None = None) -> RolloutBatch:
    """Check ``body`` (the parsed JSON) against the node; raise :class:`BadRollouts`."""
    if not isinstance(body, Mapping):
        raise BadRollouts(f"the body must be a JSON object such as {EXAMPLE}, got {type(body).__name__}")
    unknown = sorted(set(body) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise BadRollouts(f"unknown key(s) {shown_list(unknown)}; a batch has {', '.join(REQUIRED)} and "
                          f"optionally {', '.join(OPTIONAL)}")
    missing = [key for key in REQUIRED if key not in body]
    if "base_url" not in body and default_base_url is None:
        missing.append("base_url")
    if missing:
        raise BadRollouts(f"missing key(s) {', '.join(missing)}; e.g. {EXAMPLE}")
    spec = _env(body["env"], node)
    model = body["model"]
    if not isinstance(model, str) or not model.strip():
        raise BadRollouts(f"'model' must be the served model's name (a non-empty string), got {shown(model)}")
    base_url = openai_base(body.get("base_url", default_base_url))
    ids = _ids(body["ids"], spec)
    max_rounds = _whole(body["max_round"], "max_round", 1) if body.get("max_round") is not None \
        else node.rounds_for(spec)
    n = _whole(body.get("n", 1), "n", 1)
    if len(ids) * n > MAX_ROLLOUTS:
        raise BadRollouts(f"{len(ids)} ids x n {n} = {len(ids) * n} rollouts; one request may ask for at most "
                          f"{MAX_ROLLOUTS}: split the batch")
    sampling = body.get("sampling") or {}
    if not isinstance(sampling, Mapping):
        raise BadRollouts(f"'sampling' must be an object such as {{\"temperature\": 1.0, \"top_p\": 0.95, "
                          f"\"max_tokens\": 512}}, got {shown(sampling)}")
    seed = body.get("seed")
    if seed is not None and "seed" in sampling:
        raise BadRollouts("give the seed once: as 'seed' or as 'sampling.seed', not both")
    merged = {**_node_sampling(body.get("node_sampling", False), node), **sampling}
    try:
        Sampling.from_mapping(merged, where="sampling")
    except ValueError as exc:
        raise BadRollouts(_sampling_error(merged, exc)) from None
    if seed is None:
        seed = merged.get("seed")
    merged.pop("seed", None)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRollouts(f"'seed' must be a whole number, got {shown(seed)}")
    _refuse_identical_groups(n, merged, sampling, node)
    return RolloutBatch(spec=spec, model=model.strip(), base_url=base_url, ids=ids, max_rounds=max_rounds,
                        n=n, sampling=merged, seed=seed)


def _node_sampling(use: Any, node: RolloutNode) -> dict[str, Any]:
    """What the node adds under a batch's sampling: its :data:`NODE_DEFAULTS`, or with
    ``"node_sampling": true`` its whole ``model.sampling`` (the batch's keys still win)."""
    if not isinstance(use, bool):
        raise BadRollouts(f"'node_sampling' must be true (play with node {node.name}'s model.sampling under the "
                          f"batch's) or false (the default: only its {' and '.join(NODE_DEFAULTS)}), "
                          f"got {shown(use)}")
    if use:
        return dict(node.sampling)
    return {key: node.sampling[key] for key in NODE_DEFAULTS if key in node.sampling}


def _refuse_identical_groups(n: int, merged: Mapping[str, Any], sent: Mapping[str, Any], node: RolloutNode) -> None:
    """A group of ``n > 1`` samples per id at temperature 0 is ``n`` copies of one greedy
    rollout: every advantage in the group is 0 and GRPO learns nothing from it. The
    temperature may be the node's default (the local node's is 0.0, for evaluation), so
    the message says where it came from and what to send."""
    temperature = merged.get("temperature")
    if n <= 1 or temperature is None or float(temperature) > 0:
        return
    where = "the batch's sampling" if "temperature" in sent else f"node {node.name}'s default sampling"
    raise BadRollouts(f"n {n} with temperature {float(temperature):g} (from {where}) samples {n} identical "
                      f"rollouts per id (greedy decoding): a group with no spread has no advantage to learn "
                      f"from; send \"sampling\": {{\"temperature\": 1.0}} (or any temperature > 0) with n > 1, "
                      f"or n 1 for one greedy rollout per id")


def _sampling_error(sampling: Mapping[str, Any], error: ValueError) -> str:
    """The sampling check's message with the keys and values it echoes cut short: the
    check is run again on a copy whose long keys and values are shortened."""
    def short(value: Any) -> Any:
        if isinstance(value, str) and len(value) > SHOWN_CHARS:
            return value[:SHOWN_CHARS] + "..."
        if isinstance(value, (list, tuple)):
            return [short(v) for v in value[:6]]
        if isinstance(value, Mapping):
            return {short(str(k)): short(v) for k, v in list(value.items())[:4]}
        return value

    copy = {short(str(k)): short(v) for k, v in list(sampling.items())[:20]}
    try:
        Sampling.from_mapping(copy, where="sampling")
    except ValueError as shorter:
        message = str(shorter)
    else:
        message = str(error)
    return message if len(message) <= 1000 else message[:1000] + "..."


EXAMPLE = ('{"env": "textcraft", "model": "model-name", "base_url": "http://127.0.0.1:8001", '
           '"ids": [0, 1, 2, 3], "max_round": 10}')


def openai_base(value: Any) -> str:
    """``http://host:8001`` -> ``http://host:8001/v1``; a URL ending in /v1 is kept."""
    if not isinstance(value, str) or not value.strip():
        raise BadRollouts(f"'base_url' must be the model server's URL, e.g. http://127.0.0.1:8001, "
                          f"got {shown(value)}")
    url = value.strip()
    if len(url) > MAX_URL_CHARS:
        raise BadRollouts(f"'base_url' has {len(url)} characters, more than the {MAX_URL_CHARS} a model server's "
                          f"address may have: {shown(redact_url(url))}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise BadRollouts(f"'base_url' is not a URL ({exc}): {shown(redact_url(url))}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRollouts(f"'base_url' must start with http:// or https:// and name a host, "
                          f"got {shown(redact_url(url))}")
    if parts.path.rstrip("/").endswith("/v1"):
        base, question, query = url.partition("?")
        return base.rstrip("/") + question + query
    return join_url(url, "/v1")


def _env(value: Any, node: RolloutNode) -> EnvSpec:
    served = node.served()
    if not isinstance(value, str) or not value.strip():
        raise BadRollouts(f"'env' must name an environment; known on node {node.name}: {', '.join(served)}")
    spec = node.spec(value.strip())
    if spec is not None:
        return spec
    if node.skipped(value.strip()):
        raise BadRollouts(f"environment {shown(value)} is skipped on node {node.name} (its envs.skip in {node.file}); "
                          f"known here: {', '.join(served)}, or start the service with another --node")
    raise BadRollouts(f"unknown environment {shown(value)}; known on node {node.name}: {', '.join(served)} "
                      f"(names are case-insensitive)")


def _ids(value: Any, spec: EnvSpec) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise BadRollouts(f"'ids' must be a non-empty list of task indices such as [0, 1, 2, 3], "
                          f"got {shown(value)}")
    bad = [v for v in value if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        raise BadRollouts(f"'ids' must hold whole numbers (task indices); not {shown(bad[0])}")
    low, high = spec.task_range()
    outside = [v for v in value if v < low or (high is not None and v > high)]
    if outside:
        have = f"{low}-{high}" if high is not None else f"{low} and up"
        raise BadRollouts(f"id(s) {shown_list(outside, 10)} out of range: {spec.name} has tasks {have}")
    return tuple(value)

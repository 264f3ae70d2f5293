"""What an episode's meaning depends on, and how two runs differ in it.

A run's fingerprint (stored in run.json) holds the model, the endpoint kind,
the checkpoint and, per environment, the rounds allowed, the sampling sent,
the hash of the instruction prompt and the identity of the environment server.
Two runs whose fingerprints differ do not measure the same thing:
``--agentgym-resume`` refuses to mix them, naming each difference. Plain data,
no pytest, no network (the caller fetches the server identity).
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

#: Run-level keys, in the order differences are listed.
RUN_KEYS = ("model", "endpoint_kind", "checkpoint")
#: Per-environment keys.
ENV_KEYS = ("max_rounds", "sampling", "prompt_sha256", "server")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def server_identity(root_answer: str | None, how: str) -> str:
    """How a server is known across runs: how it was provided (embedded, command,
    attached) and the first line of its ``GET /`` answer with a short hash of the
    whole answer (the embedded servers name their versions there). Ports are left
    out: a spawned server gets a new one every run."""
    if root_answer is None:
        return f"{how}: no answer to GET /"
    first = root_answer.strip().splitlines()[0][:80] if root_answer.strip() else ""
    return f"{how}: {first} [{text_sha256(root_answer)[:12]}]"


def build(*, model: str, endpoint_kind: str, checkpoint: str | None,
          envs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {"model": model, "endpoint_kind": endpoint_kind, "checkpoint": checkpoint,
            "envs": {name: {k: values.get(k) for k in ENV_KEYS} for name, values in envs.items()}}


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(value.items())) + "}" if value else "{}"
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]  # a hash: the first 12 characters tell them apart
    return repr(value)


def differences(then: Mapping[str, Any], now: Mapping[str, Any], *,
                labels: tuple[str, str] = ("then", "now")) -> list[str]:
    """One line per difference that changes what an episode means, e.g.
    ``model: 'qwen3:8b' then, 'random' now`` (``labels`` name the two sides). Environments
    present in only one of the two are not differences (a resumed run may add or leave
    out some)."""
    lines = []
    first, second = labels
    for key in RUN_KEYS:
        if then.get(key) != now.get(key):
            lines.append(f"{key}: {_show(then.get(key))} {first}, {_show(now.get(key))} {second}")
    old_envs, new_envs = then.get("envs") or {}, now.get("envs") or {}
    for env in sorted(set(old_envs) & set(new_envs)):
        for key in ENV_KEYS:
            a, b = old_envs[env].get(key), new_envs[env].get(key)
            if a != b:
                lines.append(f"{env} {key}: {_show(a)} {first}, {_show(b)} {second}")
    return lines


#: What one episode of a queue run means, flat (:func:`for_episode`): a work item carries
#: the run's, a result the worker's, and a worker plays an item only when they agree.
EPISODE_KEYS = ("plugin_version", "model", "endpoint_kind", "checkpoint", "max_rounds", "sampling",
                "prompt_sha256", "server")


def for_episode(fp: Mapping[str, Any], env: str, *, plugin_version: str, **episode: Any) -> dict[str, Any]:
    """The run fingerprint ``fp`` narrowed to one environment, with the plugin version;
    ``episode`` overrides what the episode itself is played with (``max_rounds``, ``sampling``)."""
    env_values = (fp.get("envs") or {}).get(env) or {}
    flat = {"plugin_version": plugin_version, **{k: fp.get(k) for k in RUN_KEYS},
            **{k: env_values.get(k) for k in ENV_KEYS}}
    flat.update({k: v for k, v in episode.items() if k in ENV_KEYS})
    return flat


def episode_differences(run: Mapping[str, Any], worker: Mapping[str, Any], *,
                        labels: tuple[str, str] = ("run", "worker")) -> list[str]:
    """One line per key of :data:`EPISODE_KEYS` where ``worker`` does not honour ``run``,
    e.g. ``model: 'reference' run, 'random' worker``. Every key must be equal except
    ``server`` when the run's is None: a queue run's coordinator starts no server, so
    each worker's is its own (docs/scale-out.md says why)."""
    first, second = labels
    lines = []
    for key in EPISODE_KEYS:
        if key == "server" and run.get("server") is None:
            continue
        if run.get(key) != worker.get(key):
            lines.append(f"{key}: {_show(run.get(key))} {first}, {_show(worker.get(key))} {second}")
    return lines


def server_versions(env_urls: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """run.json's ``server:NAME`` entries: where each environment's servers were, the
    replicas' URLs joined by ", " (one URL without replicas)."""
    return {f"server:{name}": ", ".join(urls) for name, urls in env_urls.items()}

"""Rollouts as verifiers 0.4 (and prime-rl, which trains on it) reads them: one
``Episode`` record per rollout, holding one ``Trace`` whose message graph carries the
token ids, the sampled mask and the logprobs.

Read from the installed verifiers 0.4.0 (``verifiers/v1``): ``episode.py`` (``Episode``,
``WireEpisode``), ``trace.py`` (``Trace``, ``Branch``), ``graph.py`` (``MessageNode`` and
``_commit_turn``, which builds the graph turn by turn) and ``types.py``. Nothing here
imports verifiers: the records are plain dicts that ``WireEpisode.model_validate`` takes.
(Not to be confused with :mod:`pytest_agentgym.integrations.verifiers`, which serves
AgentGym environments to verifiers.)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from pytest_agentgym.integrations.trainers.selection import Rollout, label, take
from pytest_agentgym.integrations.trainers.turns import per_turn

#: the rollout's stop reason as a verifiers stop condition: ``Trace.is_truncated`` is
#: true for ``max_turns`` and ``max_total_tokens`` (verifiers/v1/trace.py), as it is for a
#: rollout cut off by its round cap or by the model's context
STOP_CONDITIONS = {"done": "agent_completed", "max_rounds": "max_turns", "context_length": "max_total_tokens",
                   "timeout": "agent_timeout"}


def for_verifiers(rollouts: Iterable[Rollout], *, skip: bool = False) -> list[dict[str, Any]]:
    """One verifiers 0.4 ``Episode`` record per rollout, in order (a dict that
    ``verifiers.v1.WireEpisode.model_validate`` takes): ``id`` (the episode id), ``env``,
    ``task``, ``group`` (batch, environment and task id: the GRPO group), ``ok`` and one
    trace in ``traces``.

    The trace's ``nodes`` are what verifiers' own ``_commit_turn`` (verifiers/v1/graph.py)
    makes of each turn's prompt and reply when the renderer gives no per-message spans: the
    prompt's messages as nodes without tokens, and on each reply's node the prompt tokens
    not yet on its path (``mask`` False) followed by the sampled ones (``mask`` True, with
    their ``logprobs``). So ``trace.branches[0].token_ids`` is the rollout's prompt and
    completion ids, ``sampled_mask`` its policy mask and ``logprobs`` its logprobs with 0.0
    on the environment's tokens. Where the endpoint re-rendered the history, a turn whose
    prompt does not extend the path forks a new branch, as verifiers forks a prefix break.
    ``rewards`` holds ``reward`` (so ``trace.reward`` is the rollout's), ``metrics``
    ``success``, ``stop_condition`` the stop reason (:data:`STOP_CONDITIONS`: round cap
    and context length count as truncated), ``calls`` one per turn with its token counts,
    and ``info`` the episode id, batch, sample, task id, environment, per-turn rewards, stop
    reason and the environment's last answer, which no prompt held.

    ``ValueError`` for a rollout that failed, has no token ids or no logprobs, naming it;
    with ``skip`` the first two are left out with their group and logged."""
    episodes = []
    for rollout, _ in take(rollouts, whole=False, skip=skip):
        trace = verifiers_trace(rollout)
        episodes.append({"id": trace["id"], "env": {"id": f"agentgym/{rollout.get('env')}", "name": rollout.get("env")},
                         "task": trace["task"], "group": {"id": _group_id(rollout)}, "ok": True, "traces": [trace]})
    return episodes


def verifiers_trace(rollout: Rollout) -> dict[str, Any]:
    """One rollout as a verifiers 0.4 ``Trace`` record (``verifiers.v1.WireTrace``); see
    :func:`for_verifiers`, which wraps it in its episode."""
    samples = per_turn(rollout)
    nodes: list[dict[str, Any]] = []
    calls = []
    for sample in samples:
        if sample["logprobs"] is None:
            raise ValueError(f"{label(rollout)} has no logprobs and verifiers needs them: "
                             "post the batch with \"logprobs\": true")
        node = _commit(nodes, [_message(m) for m in sample["prompt_messages"]], sample["prompt_ids"],
                       _message(sample["completion_message"]), sample["completion_ids"], sample["logprobs"])
        calls.append({"node": node, "model": rollout.get("model"),
                      "usage": {"prompt_tokens": len(sample["prompt_ids"]),
                                "completion_tokens": len(sample["completion_ids"])}})
    messages = rollout.get("messages") or ()
    stop = rollout.get("stop_reason")
    task = {"type": "AgentGymTask", "key": f"{rollout.get('env')}/{rollout.get('id')}",
            "data": {"idx": rollout.get("id"), "name": f"{rollout.get('env')}/{rollout.get('id')}"}}
    return {
        "id": str(rollout.get("episode_id")),
        "task": task,
        "agent": {"config": {"model": rollout.get("model")}, "name": "agent"},
        "nodes": nodes,
        "calls": calls,
        "rewards": {"reward": {"score": rollout.get("reward"), "weight": 1.0}},
        "metrics": {"success": 1.0 if rollout.get("success") else 0.0},
        "info": {"episode_id": rollout.get("episode_id"), "batch": rollout.get("batch"),
                 "sample": rollout.get("sample"), "task_id": rollout.get("id"), "env": rollout.get("env"),
                 "turn_rewards": list(rollout.get("turn_rewards") or ()), "stop_reason": stop,
                 "last_observation": _message(messages[-1]) if messages and messages[-1].get("role") != "assistant"
                 else None},
        "is_completed": True,
        "ok": True,
        "stop_condition": STOP_CONDITIONS.get(stop, stop),
        "is_timeout": stop == "timeout",
    }


def _group_id(rollout: Rollout) -> str:
    return f"{rollout.get('batch')}/{rollout.get('env')}/{rollout.get('id')}"


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": message.get("role"), "content": message.get("content")}


def _commit(nodes: list[dict[str, Any]], prompt: Sequence[dict[str, Any]], prompt_ids: Sequence[int],
            reply: dict[str, Any], completion_ids: Sequence[int], logprobs: Sequence[float]) -> int:
    """Add one turn to the graph as verifiers' ``_commit_turn`` does without message spans;
    the reply's node id. The prompt follows the existing nodes as long as their messages
    and their tokens match (a node without tokens matches on its message); where it stops
    (a new message, or a re-rendered history) it forks."""
    parent: int | None = None
    at = 0
    matched = 0
    for message in prompt:
        found = _child(nodes, parent, message, prompt_ids, at)
        if found is None:
            break
        parent, at, matched = found, at + len(nodes[found]["token_ids"]), matched + 1
    for message in prompt[matched:]:
        nodes.append(_node(parent, message, [], [], [], sampled=False))
        parent = len(nodes) - 1
    scaffold = list(prompt_ids[at:])
    nodes.append(_node(parent, reply, scaffold + list(completion_ids),
                       [False] * len(scaffold) + [True] * len(completion_ids), list(logprobs), sampled=True))
    return len(nodes) - 1


def _child(nodes: list[dict[str, Any]], parent: int | None, message: dict[str, Any], prompt_ids: Sequence[int],
           at: int) -> int | None:
    """The child of ``parent`` carrying ``message`` whose tokens come next in ``prompt_ids``;
    the one with the most tokens, the latest among equals (verifiers' ``_matching_prefix_node``)."""
    best = None
    for index in range(len(nodes) - 1, -1, -1):
        node = nodes[index]
        size = len(node["token_ids"])
        if (node["parent"] == parent and node["message"] == message
                and list(prompt_ids[at:at + size]) == node["token_ids"] and at + size <= len(prompt_ids)
                and (best is None or size > len(nodes[best]["token_ids"]))):
            best = index
    return best


def _node(parent: int | None, message: dict[str, Any], token_ids: list[int], mask: list[bool],
          logprobs: list[float], *, sampled: bool) -> dict[str, Any]:
    return {"parent": parent, "message": message, "sampled": sampled, "token_ids": token_ids, "mask": mask,
            "logprobs": logprobs}

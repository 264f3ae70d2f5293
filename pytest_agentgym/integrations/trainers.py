"""Rollout answers in the shapes that trainers take, as plain lists and dicts.

The rollout service (``pytest-agentgym rollout-server``) answers each rollout with its
conversation, its rewards and, when the batch asked with ``"sampling":
{"return_token_ids": true, "logprobs": true}`` and the endpoint can, its token view
(``tokens``: results/tokens.py ``EpisodeTokens.to_dict()``). These functions map a list of
such answers onto what each trainer reads. They import no torch, trl, verl or verifiers:
a trainer's own code wraps the lists in tensors.

Two forms:

* the **trajectory** form, one sample per rollout: the first turn's prompt, then every
  later token (the policy's, and between turns the environment's), a mask that is 1
  exactly on the tokens the policy sampled, and the logprobs aligned with it.
  :func:`for_trl`, :func:`for_verifiers` and :func:`for_verl` give it. A rollout whose
  endpoint re-rendered earlier turns (``tokens.rerendered``) has no such sample: its
  later turns do not extend the earlier ones, so these functions refuse it.
* the **per-turn** form, one sample per policy turn: the prompt the endpoint rendered for
  that turn (the conversation so far, in messages and in ids), that turn's reply and its
  logprobs, its reward and the rollout's. :func:`per_turn`, :func:`per_turn_samples` and
  :func:`verifiers_steps` give it; it works for re-rendered rollouts too.

Nothing is silently wrong: a rollout that failed (``error``), that has no token ids, or
that the form cannot take is a ``ValueError`` naming it and saying what to do. With
``skip=True`` such a rollout is left out together with the other samples of its group
(same batch and task id), because group-relative advantages need whole groups; what was
left out is logged (logger ``pytest_agentgym.integrations.trainers``) and
:func:`usable` says it too.

The shapes were read from (docs/trainer-formats.md has the details):

* TRL: huggingface/trl ``trl/trainer/grpo_trainer.py`` at f2cd5771 (1.10.0.dev0),
  ``GRPOTrainer._generate``;
* verifiers: PrimeIntellect-ai/verifiers ``verifiers/types.py`` at v0.1.9 (b81cfd33),
  ``ProcessedOutputs`` and ``TrajectoryStep``;
* verl: volcengine/verl ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd
  (0.8.0.dev), ``AgentLoopOutput`` and ``AgentLoopWorker._postprocess``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pytest_agentgym.results.tokens import EpisodeTokens

__all__ = ["Usable", "for_trl", "for_verifiers", "for_verl", "per_turn", "per_turn_samples",
           "usable", "verifiers_steps", "verl_agent_loop_outputs"]

log = logging.getLogger("pytest_agentgym.integrations.trainers")

Rollout = Mapping[str, Any]

#: what a batch must ask for the service to answer token ids
_ASK = ('post the batch with "sampling": {"return_token_ids": true, "logprobs": true} '
        "to an endpoint that returns token ids (vLLM 0.10.2 or newer; the reference agent)")


def _name(rollout: Rollout) -> str:
    """How a message names a rollout: its task id, sample, batch and episode."""
    parts = [f"id {rollout.get('id')}", f"sample {rollout.get('sample')}"]
    if rollout.get("batch"):
        parts.append(f"batch {rollout['batch']}")
    if rollout.get("episode_id"):
        parts.append(f"episode {rollout['episode_id']}")
    return "rollout " + ", ".join(parts)


def _group(rollout: Rollout) -> tuple[Any, Any, Any]:
    """The GRPO group of a rollout: the samples of one task id in one batch."""
    return (rollout.get("batch"), rollout.get("env"), rollout.get("id"))


def _problem(rollout: Rollout, *, whole: bool) -> str | None:
    """Why ``rollout`` cannot be had in the form asked (``whole``: the trajectory form);
    None when it can."""
    error = rollout.get("error")
    if error:
        kind = error.get("type") if isinstance(error, Mapping) else None
        message = error.get("message") if isinstance(error, Mapping) else error
        return (f"{_name(rollout)} failed ({kind}: {message}); it has no reward to train on: "
                "leave its group out (skip=True) or post its id again")
    data = rollout.get("tokens")
    if data is None:
        return f"{_name(rollout)} has no token ids ('tokens' is null): {_ASK}"
    try:
        episode = EpisodeTokens.from_dict(data)
    except ValueError as exc:
        return f"{_name(rollout)} has a malformed 'tokens' field: {exc}"
    rounds = rollout.get("rounds")
    if rounds is not None and episode.turn_count != rounds:
        return (f"{_name(rollout)} has token ids for {episode.turn_count} turns but played {rounds} "
                "rounds: its token view does not match its conversation")
    if whole and episode.view.rerendered is not None:
        mark = episode.view.rerendered
        return (f"{_name(rollout)} cannot be one trajectory: the endpoint re-rendered the history at "
                f"turn {mark.turn} ({mark.reason}); use the per-turn form (per_turn_samples) for it, "
                "leave its group out (skip=True), or serve a chat template that renders history as "
                "sampled (docs/trainer-formats.md)")
    return None


@dataclass(frozen=True)
class Usable:
    """The rollouts a form can take, and the ones left out with why (``(rollout, reason)``)."""

    kept: list[Rollout] = field(default_factory=list)
    skipped: list[tuple[Rollout, str]] = field(default_factory=list)


def usable(rollouts: Iterable[Rollout], *, whole: bool = True) -> Usable:
    """Split ``rollouts`` into those the trajectory form (``whole``) or the per-turn form can
    take and those it cannot. A rollout that cannot be had takes the other samples of its
    group with it (they are skipped as "group of ..."), so every group kept is whole."""
    rollouts = list(rollouts)
    reasons = {index: why for index, r in enumerate(rollouts)
               if (why := _problem(r, whole=whole)) is not None}
    broken = {_group(rollouts[index]): why for index, why in reasons.items()}
    kept: list[Rollout] = []
    skipped: list[tuple[Rollout, str]] = []
    for index, rollout in enumerate(rollouts):
        if index in reasons:
            skipped.append((rollout, reasons[index]))
        elif _group(rollout) in broken:
            skipped.append((rollout, f"its group holds a rollout left out: {broken[_group(rollout)]}"))
        else:
            kept.append(rollout)
    return Usable(kept, skipped)


def _take(rollouts: Iterable[Rollout], *, whole: bool, skip: bool) -> list[tuple[Rollout, EpisodeTokens]]:
    """The rollouts with their token views; ``ValueError`` on the first that cannot be had,
    unless ``skip`` (then its group is left out and logged)."""
    rollouts = list(rollouts)
    if not skip:
        for rollout in rollouts:
            why = _problem(rollout, whole=whole)
            if why is not None:
                raise ValueError(why)
        kept = rollouts
    else:
        found = usable(rollouts, whole=whole)
        for rollout, why in found.skipped:
            log.warning("left out: %s", why)
        kept = found.kept
    return [(rollout, EpisodeTokens.from_dict(rollout["tokens"])) for rollout in kept]


def _logprobs_or_zero(view_logprobs: Sequence[float | None]) -> list[float]:
    """Logprobs with 0.0 where the environment's tokens are (masked out by every trainer)."""
    return [0.0 if value is None else value for value in view_logprobs]


def _all_or_none_logprobs(taken: Sequence[tuple[Rollout, EpisodeTokens]]) -> bool:
    """Whether the rollouts carry logprobs; ``ValueError`` when some do and some do not."""
    have = [episode.view.completion_logprobs is not None for _, episode in taken]
    if any(have) and not all(have):
        missing = next(rollout for (rollout, _), has in zip(taken, have) if not has)
        raise ValueError(f"{_name(missing)} has token ids but no logprobs while others have them: "
                         f"post its batch with \"logprobs\": true as well")
    return bool(have) and all(have)


# --------------------------------------------------------------------------- TRL


def for_trl(rollouts: Iterable[Rollout]) -> dict[str, Any]:
    """What TRL's ``GRPOTrainer`` takes from a ``rollout_func`` (huggingface/trl
    ``trl/trainer/grpo_trainer.py`` at f2cd5771, ``_generate``): one entry per rollout, in
    order, of

    * ``prompt_ids``, ``completion_ids``: lists of token ids (the trajectory form);
    * ``logprobs``: the sampled tokens' logprobs, 0.0 on the environment's tokens (TRL
      makes a float tensor of each list); None when the batch did not ask for logprobs;
    * ``env_mask``: 1 on the tokens the policy sampled, 0 on the environment's (TRL pops it
      as its ``tool_mask`` and multiplies it into the loss mask);
    * extra fields, which TRL hands to the reward functions one value per sample:
      ``env_reward``, ``turn_rewards``, ``success``, ``episode_id``, ``batch``, ``sample``,
      ``task_id``.

    TRL wants exactly ``num_generations`` completions per prompt, in the order of its
    prompts: post one rollout batch with the prompts' task ids and ``n = num_generations``
    (the service answers each id's samples together). So there is no ``skip`` here: a
    rollout that cannot be had is a ``ValueError``; post its id again."""
    taken = _take(rollouts, whole=True, skip=False)
    with_logprobs = _all_or_none_logprobs(taken)
    out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [] if with_logprobs else None,
                           "env_mask": [], "env_reward": [], "turn_rewards": [], "success": [],
                           "episode_id": [], "batch": [], "sample": [], "task_id": []}
    for rollout, episode in taken:
        view = episode.view
        out["prompt_ids"].append(list(view.prompt_ids))
        out["completion_ids"].append(list(view.completion_ids))
        if with_logprobs:
            out["logprobs"].append(_logprobs_or_zero(view.completion_logprobs or ()))
        out["env_mask"].append(list(view.completion_mask))
        out["env_reward"].append(rollout.get("reward"))
        out["turn_rewards"].append(list(rollout.get("turn_rewards") or ()))
        out["success"].append(rollout.get("success"))
        out["episode_id"].append(rollout.get("episode_id"))
        out["batch"].append(rollout.get("batch"))
        out["sample"].append(rollout.get("sample"))
        out["task_id"].append(rollout.get("id"))
    return out


# --------------------------------------------------------------------------- verifiers


def for_verifiers(rollouts: Iterable[Rollout], *, skip: bool = False) -> dict[str, list[Any]]:
    """verifiers' ``ProcessedOutputs`` (PrimeIntellect-ai/verifiers ``verifiers/types.py`` at
    v0.1.9, b81cfd33; built the same way by ``Environment.process_env_results_vllm`` in
    ``verifiers/envs/environment.py`` at v0.1.3 with ``mask_env_responses=True``): one entry
    per rollout of ``prompt_ids``, ``prompt_mask`` (all 0: the prompt is not trained on),
    ``completion_ids``, ``completion_mask`` (1 on sampled tokens, 0 on the environment's),
    ``completion_logprobs`` (0.0 on the environment's tokens; ``ValueError`` when the batch
    did not ask for logprobs), ``rewards`` and ``is_truncated`` (the conversation outgrew
    the model's context: stop reason ``context_length``)."""
    taken = _take(rollouts, whole=True, skip=skip)
    if taken and not _all_or_none_logprobs(taken):
        raise ValueError(f"{_name(taken[0][0])} has no logprobs and verifiers needs them: "
                         "post the batch with \"logprobs\": true")
    out: dict[str, list[Any]] = {"prompt_ids": [], "prompt_mask": [], "completion_ids": [], "completion_mask": [],
                                 "completion_logprobs": [], "rewards": [], "is_truncated": []}
    for rollout, episode in taken:
        view = episode.view
        out["prompt_ids"].append(list(view.prompt_ids))
        out["prompt_mask"].append([0] * len(view.prompt_ids))
        out["completion_ids"].append(list(view.completion_ids))
        out["completion_mask"].append(list(view.completion_mask))
        out["completion_logprobs"].append(_logprobs_or_zero(view.completion_logprobs or ()))
        out["rewards"].append(rollout.get("reward"))
        out["is_truncated"].append(rollout.get("stop_reason") == "context_length")
    return out


def verifiers_steps(rollout: Rollout) -> list[dict[str, Any]]:
    """One rollout as verifiers' trajectory: a list of ``TrajectoryStep`` dicts
    (PrimeIntellect-ai/verifiers ``verifiers/types.py`` at v0.1.9), one per policy turn, as
    its trainer reads them (``verifiers/rl/trainer/orchestrator.py`` at v0.1.9 trains each
    step's ``tokens`` as its own sample): ``prompt`` and ``completion`` (messages),
    ``tokens`` (``prompt_ids``, ``prompt_mask`` all 0, ``completion_ids``,
    ``completion_mask`` all 1, ``completion_logprobs``, ``overlong_prompt``,
    ``is_truncated``), ``reward`` (the rollout's, as verifiers' rubric fills a step's reward
    it was not given), ``advantage`` (None: the trainer computes it), ``is_truncated``,
    ``trajectory_id`` (the episode id) and ``extras`` (this turn's own reward, the turn,
    batch, sample and task id). ``response`` is left out: it is the endpoint's response
    object, which the service does not keep. Re-rendered rollouts work (each turn has its
    own prompt)."""
    steps = []
    for sample in per_turn(rollout):
        if sample["logprobs"] is None:
            raise ValueError(f"{_name(rollout)} has no logprobs and verifiers needs them: "
                             "post the batch with \"logprobs\": true")
        truncated = rollout.get("stop_reason") == "context_length" and sample["turn"] == rollout.get("rounds", 0) - 1
        steps.append({
            "prompt": sample["prompt_messages"],
            "completion": [sample["completion_message"]],
            "tokens": {"prompt_ids": sample["prompt_ids"], "prompt_mask": [0] * len(sample["prompt_ids"]),
                       "completion_ids": sample["completion_ids"],
                       "completion_mask": [1] * len(sample["completion_ids"]),
                       "completion_logprobs": sample["logprobs"], "overlong_prompt": False,
                       "is_truncated": truncated},
            "reward": sample["reward"],
            "advantage": None,
            "is_truncated": truncated,
            "trajectory_id": sample["episode_id"],
            "extras": {"turn_reward": sample["turn_reward"], "turn": sample["turn"], "batch": sample["batch"],
                       "sample": sample["sample"], "task_id": sample["task_id"]},
        })
    return steps


# --------------------------------------------------------------------------- verl


def verl_agent_loop_outputs(rollouts: Iterable[Rollout], *, skip: bool = False) -> list[dict[str, Any]]:
    """One dict per rollout with the fields of verl's ``AgentLoopOutput`` (volcengine/verl
    ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd): ``prompt_ids``,
    ``response_ids`` (the policy's and the environment's tokens), ``response_mask`` (1 on the
    policy's, 0 on the environment's), ``response_logprobs`` (0.0 on the environment's
    tokens; None without logprobs), ``reward_score`` (the rollout's reward), ``num_turns``
    (the conversation's messages: user and assistant turns, as verl counts them) and
    ``extra_fields`` (``uid``, the GRPO group; turn rewards; ids). A custom ``AgentLoopBase``
    whose ``run`` asks the service returns ``AgentLoopOutput(**d, metrics=...)`` from one."""
    taken = _take(rollouts, whole=True, skip=skip)
    with_logprobs = _all_or_none_logprobs(taken)
    outputs = []
    for rollout, episode in taken:
        view = episode.view
        outputs.append({
            "prompt_ids": list(view.prompt_ids),
            "response_ids": list(view.completion_ids),
            "response_mask": list(view.completion_mask),
            "response_logprobs": _logprobs_or_zero(view.completion_logprobs or ()) if with_logprobs else None,
            "reward_score": rollout.get("reward"),
            "num_turns": len(rollout.get("messages") or ()),
            "extra_fields": {"uid": _uid(rollout), "turn_rewards": list(rollout.get("turn_rewards") or ()),
                             "success": rollout.get("success"), "episode_id": rollout.get("episode_id"),
                             "batch": rollout.get("batch"), "sample": rollout.get("sample"),
                             "task_id": rollout.get("id")},
        })
    return outputs


def _uid(rollout: Rollout) -> str:
    """verl's GRPO group key (``non_tensor_batch["uid"]``): batch, environment and task id."""
    return f"{rollout.get('batch')}:{rollout.get('env')}:{rollout.get('id')}"


def for_verl(rollouts: Iterable[Rollout], *, pad_token_id: int, prompt_length: int | None = None,
             response_length: int | None = None, truncate: bool = False, turn_scores: bool = False,
             skip: bool = False) -> dict[str, list[Any]]:
    """The batch verl's agent loop hands its trainer (volcengine/verl
    ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd, ``_postprocess`` and
    ``generate_sequences``), as plain lists, one row per rollout (``torch.tensor`` each key
    that holds numbers to get verl's tensors):

    * ``prompts``: the prompt ids, left-padded with ``pad_token_id`` to ``prompt_length``;
    * ``responses``: the policy's and the environment's ids, right-padded to
      ``response_length``; ``response_mask``: 1 on the policy's tokens, 0 on the
      environment's and on padding (what AgentGym-RL's rollout calls ``response_mask`` too);
    * ``input_ids`` (prompts then responses), ``attention_mask`` (0 on padding),
      ``position_ids`` (counting from 0 at the first real token; 0 on the left padding, the
      last position on the right padding, as verl's ``compute_position_id_with_mask``);
    * ``rollout_log_probs``: the sampled logprobs, 0.0 elsewhere (only when every rollout
      has logprobs);
    * ``rm_scores``: token-level scores, the rollout's reward on its last response token (as
      verl does); with ``turn_scores`` each turn's own reward on that turn's last token
      instead (AgentGym's per-step rewards);
    * ``uid``: the GRPO group of each row (verl's ``non_tensor_batch["uid"]``);
      ``num_turns`` (its ``__num_turns__``).

    Lengths default to the longest in the batch. A prompt longer than ``prompt_length`` is a
    ``ValueError``; a response longer than ``response_length`` is one too unless
    ``truncate`` (then it is cut, as verl's agent loops cut theirs, and scores that fall
    after the cut move to its last kept token)."""
    taken = _take(rollouts, whole=True, skip=skip)
    with_logprobs = _all_or_none_logprobs(taken)
    longest_prompt = max((len(e.view.prompt_ids) for _, e in taken), default=0)
    longest_response = max((len(e.view.completion_ids) for _, e in taken), default=0)
    p_len = longest_prompt if prompt_length is None else prompt_length
    r_len = longest_response if response_length is None else response_length
    out: dict[str, list[Any]] = {key: [] for key in (
        "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids",
        "rm_scores", "uid", "num_turns")}
    if with_logprobs:
        out["rollout_log_probs"] = []
    for rollout, episode in taken:
        view = episode.view
        prompt = list(view.prompt_ids)
        if len(prompt) > p_len:
            raise ValueError(f"{_name(rollout)} has a prompt of {len(prompt)} tokens, over prompt_length "
                             f"{p_len}: raise prompt_length (verl's data.max_prompt_length)")
        response, mask = list(view.completion_ids), list(view.completion_mask)
        logprobs = _logprobs_or_zero(view.completion_logprobs or ()) if with_logprobs else []
        if len(response) > r_len:
            if not truncate:
                raise ValueError(f"{_name(rollout)} has {len(response)} response tokens, over response_length "
                                 f"{r_len}: raise response_length, lower max_round, or pass truncate=True")
            response, mask, logprobs = response[:r_len], mask[:r_len], logprobs[:r_len]
        scores = [0.0] * len(response)
        if response:
            if turn_scores:
                rewards = list(rollout.get("turn_rewards") or ())
                for (start, end), reward in zip(view.turns, rewards):
                    scores[min(end, len(response)) - 1] += float(reward or 0.0)
            else:
                scores[-1] = float(rollout.get("reward") or 0.0)
        left, right = p_len - len(prompt), r_len - len(response)
        out["prompts"].append([pad_token_id] * left + prompt)
        out["responses"].append(response + [pad_token_id] * right)
        out["response_mask"].append(mask + [0] * right)
        out["input_ids"].append(out["prompts"][-1] + out["responses"][-1])
        attention = [0] * left + [1] * (len(prompt) + len(response)) + [0] * right
        out["attention_mask"].append(attention)
        out["position_ids"].append(_positions(attention))
        out["rm_scores"].append(scores + [0.0] * right)
        if with_logprobs:
            out["rollout_log_probs"].append(logprobs + [0.0] * right)
        out["uid"].append(_uid(rollout))
        out["num_turns"].append(len(rollout.get("messages") or ()))
    return out


def _positions(attention: Sequence[int]) -> list[int]:
    """verl's ``compute_position_id_with_mask``: the running count of real tokens minus one,
    never below 0."""
    positions, seen = [], 0
    for bit in attention:
        seen += bit
        positions.append(max(seen - 1, 0))
    return positions


# --------------------------------------------------------------------------- per turn


def per_turn(rollout: Rollout) -> list[dict[str, Any]]:
    """One sample per policy turn of ``rollout`` (the branching form), each a dict of

    * ``prompt_messages``: the conversation the model answered at that turn;
      ``completion_message``: its reply (``{"role": "assistant", "content": ...}``);
    * ``prompt_ids``: the prompt as the endpoint rendered it for that turn (the
      conversation so far, in ids); ``completion_ids``: the ids it sampled; ``logprobs``
      (None without logprobs);
    * ``turn_reward`` (the environment's reward for that step), ``reward`` and ``success``
      (the rollout's);
    * ``episode_id``, ``batch``, ``sample``, ``task_id``, ``env``, ``turn`` (0-based);
    * ``rerendered``: whether this turn's prompt does not extend the previous turn's prompt
      and reply (the endpoint re-rendered history); its ids are still the endpoint's own.

    The messages are the prefixes of the rollout's final conversation, which is what each
    turn was sent, or, where the environment server rewrote earlier turns (AgentBench's
    ALFWorld), the answer's ``turn_prompts``: exact either way, as the ids are.
    ``ValueError`` for a rollout that failed or has no token ids (see the module's docstring)."""
    why = _problem(rollout, whole=False)
    if why is not None:
        raise ValueError(why)
    episode = EpisodeTokens.from_dict(rollout["tokens"])
    messages = [dict(m) for m in rollout.get("messages") or ()]
    turns = episode.turn_count
    opening = len(messages) - 2 * turns  # the messages before round 0's reply
    prompts = rollout.get("turn_prompts")
    if prompts is None:
        if opening < 1 or any(messages[opening + 2 * k].get("role") != "assistant" for k in range(turns)):
            raise ValueError(f"{_name(rollout)}: its {len(messages)} messages are not an opening followed by "
                             f"{turns} (reply, answer) pairs, so the turns' conversations cannot be told apart")
        prompts = [messages[:opening + 2 * k + 1] for k in range(turns)]
    elif len(prompts) != turns:
        raise ValueError(f"{_name(rollout)}: {len(prompts)} turn_prompts for {turns} turns")
    rewards = list(rollout.get("turn_rewards") or ())
    covered = len(episode.view.turns)
    samples = []
    for k in range(turns):
        tokens = episode.turn(k)
        samples.append({
            "prompt_messages": [dict(m) for m in prompts[k][:-1]],
            "completion_message": dict(prompts[k][-1]),
            "prompt_ids": list(tokens.prompt_ids),
            "completion_ids": list(tokens.completion_ids),
            "logprobs": None if tokens.logprobs is None else list(tokens.logprobs),
            "turn_reward": rewards[k] if k < len(rewards) else None,
            "reward": rollout.get("reward"),
            "success": rollout.get("success"),
            "episode_id": rollout.get("episode_id"),
            "batch": rollout.get("batch"),
            "sample": rollout.get("sample"),
            "task_id": rollout.get("id"),
            "env": rollout.get("env"),
            "turn": k,
            "rerendered": k >= covered,
        })
    return samples


def per_turn_samples(rollouts: Iterable[Rollout], *, skip: bool = False) -> list[dict[str, Any]]:
    """:func:`per_turn` of every rollout, in order; with ``skip`` a rollout that cannot be
    had is left out with its group (and logged) instead of a ``ValueError``."""
    rollouts = list(rollouts)
    if skip:
        found = usable(rollouts, whole=False)
        for _, why in found.skipped:
            log.warning("left out: %s", why)
        rollouts = found.kept
    return [sample for rollout in rollouts for sample in per_turn(rollout)]

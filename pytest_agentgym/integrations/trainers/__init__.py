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
  :func:`for_trl` and :func:`for_verl` give it. Where the endpoint takes token ids (vLLM)
  every turn after the first is sent as the ids so far, so the history is never
  re-rendered. A rollout whose endpoint did re-render earlier turns
  (``tokens.rerendered``: an endpoint without token input) has no such sample past that
  turn; it follows the policy ``rerendered=`` names (:mod:`.selection`): cut before the
  re-rendered turn (the default), its group left out, or a ``ValueError``. No adapter
  fails a batch for it unless asked to.
* the **per-turn** form, one sample per policy turn: the prompt the endpoint rendered for
  that turn (the conversation so far, in messages and in ids), that turn's reply and its
  logprobs, its reward and the rollout's. :func:`per_turn` and :func:`per_turn_samples`
  give it; it works for re-rendered rollouts too.

:func:`for_verifiers` gives verifiers 0.4's own form, a trace per rollout whose message
graph carries the ids, the mask and the logprobs (a re-rendered history forks new branches).

Nothing is silently wrong: a rollout that failed (``error``), that has no token ids, or
that the form cannot take is a ``ValueError`` naming it and saying what to do. With
``skip=True`` such a rollout is left out together with the other samples of its group
(same batch and task id), because group-relative advantages need whole groups; what was
left out is logged (logger ``pytest_agentgym.integrations.trainers``) and
:func:`usable` says it too.

The shapes were read from (docs/trainer-formats.md has the details):

* TRL: the installed trl 1.16.0, ``trl/trainer/grpo_trainer.py`` (``GRPOTrainer._generate``
  and ``_generate_and_score_completions``; its ``RepeatSampler`` hands ``rollout_func`` each
  prompt ``num_generations`` times);
* verifiers: the installed verifiers 0.4.0, ``verifiers/v1/episode.py``, ``trace.py`` and
  ``graph.py`` (``Episode``, ``Trace``, ``MessageNode``);
* verl: the installed verl 0.9.1, ``verl/experimental/agent_loop/agent_loop.py``
  (``AgentLoopOutput``, ``_agent_loop_postprocess``, ``_postprocess``) and
  ``tool_agent_loop.py`` (``num_turns``, the response cut).

Import from here; the modules are where each idea lives: :mod:`.selection` (which rollouts
a form can take, :func:`usable`, and the errors), :mod:`.trl`, :mod:`.verifiers` and
:mod:`.verl` (each trainer's shapes) and :mod:`.turns` (the per-turn form).
"""

from __future__ import annotations

from pytest_agentgym.integrations.trainers.selection import Usable, usable
from pytest_agentgym.integrations.trainers.trl import for_trl
from pytest_agentgym.integrations.trainers.turns import per_turn, per_turn_samples
from pytest_agentgym.integrations.trainers.verifiers import for_verifiers, verifiers_trace
from pytest_agentgym.integrations.trainers.verl import for_verl, verl_agent_loop_outputs

__all__ = ["Usable", "for_trl", "for_verifiers", "for_verl", "per_turn", "per_turn_samples",
           "usable", "verifiers_trace", "verl_agent_loop_outputs"]

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
  :func:`for_trl` and :func:`for_verl` give it. A rollout whose
  endpoint re-rendered earlier turns (``tokens.rerendered``) has no such sample: its
  later turns do not extend the earlier ones, so these functions refuse it.
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

* TRL: huggingface/trl ``trl/trainer/grpo_trainer.py`` at f2cd5771 (1.10.0.dev0),
  ``GRPOTrainer._generate``;
* verifiers: the installed verifiers 0.4.0, ``verifiers/v1/episode.py``, ``trace.py`` and
  ``graph.py`` (``Episode``, ``Trace``, ``MessageNode``);
* verl: volcengine/verl ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd
  (0.8.0.dev), ``AgentLoopOutput`` and ``AgentLoopWorker._postprocess``.

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

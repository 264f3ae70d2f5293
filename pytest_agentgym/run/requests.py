"""The one way an episode request is made, whichever door asks for the episode.

A suite item, the ``agentgym_episode`` fixture, a rollout batch and the
verifiers taskset ask for an episode with what they know (its environment,
task, repeat, and maybe rounds, a time budget and sampling); :class:`RequestRules`
turns that into an :class:`~pytest_agentgym.engine.episode.EpisodeRequest` by
the same rules for all of them:

* rounds: ``--agentgym-max-rounds`` when given (the operator's word, not capped);
  else what was asked or the environment's default, capped by the node's
  ``limits.max_rounds``;
* time budget: ``--agentgym-episode-timeout``, else what was asked, else the
  node's ``limits.episode_timeout``;
* sampling: what was asked, the node's ``model.sampling`` over it (the node is
  where the model's recommended sampling lives), ``--agentgym-sampling`` over both.

A queue worker does not decide: its work item carries the limits and sampling the
coordinator decided, and :func:`build` makes the request from them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # the episode module brings the environment client (httpx, jinja2)
    from pytest_agentgym.engine.episode import EpisodeRequest
    from pytest_agentgym.envs.spec import EnvSpec


def build(*, run_id: str, spec: EnvSpec, task_index: int, repeat: int, max_rounds: int, timeout_s: float,
          retries: int, sampling: Mapping[str, Any] | None = None, min_reward: float | None = None,
          nodeid: str | None = None, node: str | None = None, checkpoint: str | None = None,
          batch: str | None = None, sample: int | None = None) -> EpisodeRequest:
    """A request whose limits and sampling are already decided."""
    from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest

    return EpisodeRequest(run_id=run_id, spec=spec, task_index=task_index, repeat=repeat,
                          limits=EpisodeLimits(max_rounds=max_rounds, timeout_s=timeout_s, retries=retries),
                          min_reward=min_reward, nodeid=nodeid, node=node, checkpoint=checkpoint,
                          sampling=dict(sampling or {}), batch=batch, sample=sample)


@dataclass(frozen=True)
class RequestRules:
    """What decides an episode's rounds, time budget and sampling on one node, in one run."""

    run_id: str
    node: str
    #: the node's ``limits.max_rounds`` (None: no cap) and ``limits.episode_timeout``
    node_max_rounds: int | None = None
    node_episode_timeout: float = 300.0
    #: the node's ``model.sampling`` (the keys it sets)
    node_sampling: Mapping[str, Any] = field(default_factory=dict)
    retries: int = 1
    checkpoint: str | None = None
    #: the operator's overrides: --agentgym-max-rounds, --agentgym-episode-timeout, --agentgym-sampling
    max_rounds: int | None = None
    episode_timeout: float | None = None
    sampling: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, settings: Any, node_sampling: Mapping[str, Any]) -> "RequestRules":
        """The rules of a run with these :class:`~pytest_agentgym.config.settings.Settings`."""
        return cls(run_id=settings.run_id, node=settings.node, node_max_rounds=settings.node_max_rounds,
                   node_episode_timeout=settings.node_episode_timeout, node_sampling=dict(node_sampling),
                   retries=settings.retries, checkpoint=settings.checkpoint, max_rounds=settings.max_rounds,
                   episode_timeout=settings.episode_timeout, sampling=settings.sampling)

    def rounds(self, spec: EnvSpec, asked: int | None = None) -> int:
        if self.max_rounds is not None:
            return self.max_rounds
        rounds = asked or spec.max_rounds
        return min(rounds, self.node_max_rounds) if self.node_max_rounds else rounds

    def timeout(self, asked: float | None = None) -> float:
        return self.episode_timeout or asked or self.node_episode_timeout

    def effective_sampling(self, asked: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**(asked or {}), **self.node_sampling, **(self.sampling or {})}

    def request(self, spec: EnvSpec, task_index: int, repeat: int, *, max_rounds: int | None = None,
                episode_timeout: float | None = None, sampling: Mapping[str, Any] | None = None,
                min_reward: float | None = None, nodeid: str | None = None) -> EpisodeRequest:
        return build(run_id=self.run_id, spec=spec, task_index=task_index, repeat=repeat,
                     max_rounds=self.rounds(spec, max_rounds), timeout_s=self.timeout(episode_timeout),
                     retries=self.retries, sampling=self.effective_sampling(sampling), min_reward=min_reward,
                     nodeid=nodeid, node=self.node, checkpoint=self.checkpoint)

    def for_item(self, spec: EnvSpec, item: Any) -> EpisodeRequest:
        """A suite item's request: its task and repeat, with what its suite asks."""
        suite = item.suite
        return self.request(spec, item.task_index, item.repeat, max_rounds=suite.max_rounds,
                            episode_timeout=suite.episode_timeout, sampling=suite.sampling,
                            min_reward=suite.min_reward, nodeid=item.nodeid)

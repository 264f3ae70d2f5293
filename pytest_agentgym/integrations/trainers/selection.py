"""Which rollouts a trainer form can take, and what every form shares in taking them.

A rollout that failed, has no token ids, or (for the trajectory form) was re-rendered is
named with the reason and the fix (:func:`problem`); :func:`usable` keeps whole GRPO groups
only; :func:`take` gives the rollouts with their token views, refusing or (``skip``)
leaving out and logging what cannot be had. A re-rendered rollout follows its own policy
(:data:`RERENDERED`): cut at the re-rendered turn, its group left out, or refused. The
trajectory forms' logprobs are all or none across a batch (:func:`all_or_none_logprobs`),
0.0 on the environment's tokens (:func:`logprobs_or_zero`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pytest_agentgym.results.tokens import EpisodeTokens

#: the package's one logger, under the name users know (docs/trainer-formats.md)
log = logging.getLogger("pytest_agentgym.integrations.trainers")

Rollout = Mapping[str, Any]

#: what a batch must ask for the service to answer token ids
_ASK = ('post the batch with "sampling": {"return_token_ids": true, "logprobs": true} '
        "to an endpoint that returns token ids (vLLM 0.10.2 or newer; the reference agent)")


def label(rollout: Rollout) -> str:
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


def problem(rollout: Rollout, *, whole: bool) -> str | None:
    """Why ``rollout`` cannot be had in the form asked (``whole``: the trajectory form);
    None when it can."""
    error = rollout.get("error")
    if error:
        kind = error.get("type") if isinstance(error, Mapping) else None
        message = error.get("message") if isinstance(error, Mapping) else error
        return (f"{label(rollout)} failed ({kind}: {message}); it has no reward to train on: "
                "leave its group out (skip=True) or post its id again")
    data = rollout.get("tokens")
    if data is None:
        return f"{label(rollout)} has no token ids ('tokens' is null): {_ASK}"
    try:
        episode = EpisodeTokens.from_dict(data)
    except ValueError as exc:
        return f"{label(rollout)} has a malformed 'tokens' field: {exc}"
    rounds = rollout.get("rounds")
    if rounds is not None and episode.turn_count != rounds:
        return (f"{label(rollout)} has token ids for {episode.turn_count} turns but played {rounds} "
                "rounds: its token view does not match its conversation")
    if whole:
        return rerender_problem(rollout, episode)
    return None


def rerender_problem(rollout: Rollout, episode: EpisodeTokens) -> str | None:
    """Why ``rollout`` cannot be one trajectory whole (its endpoint re-rendered the history);
    None when it can."""
    mark = episode.view.rerendered
    if mark is None:
        return None
    return (f"{label(rollout)} cannot be one trajectory: the endpoint re-rendered the history at "
            f"turn {mark.turn} ({mark.reason}); use the per-turn form (per_turn_samples) for it, "
            "leave its group out (skip=True), train on the turns before it (rerendered=\"cut\"), "
            "or serve a chat template that renders history as sampled (docs/trainer-formats.md)")


@dataclass(frozen=True)
class Usable:
    """The rollouts a form can take, and the ones left out with why (``(rollout, reason)``)."""

    kept: list[Rollout] = field(default_factory=list)
    skipped: list[tuple[Rollout, str]] = field(default_factory=list)


def _split(rollouts: list[Rollout], reasons: Mapping[int, str]) -> Usable:
    """Leave out the rollouts at ``reasons``' indices, each with the other samples of its group."""
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


def usable(rollouts: Iterable[Rollout], *, whole: bool = True) -> Usable:
    """Split ``rollouts`` into those the trajectory form (``whole``) or the per-turn form can
    take and those it cannot. A rollout that cannot be had takes the other samples of its
    group with it (they are skipped as "group of ..."), so every group kept is whole."""
    rollouts = list(rollouts)
    return _split(rollouts, {index: why for index, r in enumerate(rollouts)
                             if (why := problem(r, whole=whole)) is not None})


#: What :func:`take` does with a rollout whose endpoint re-rendered the history
#: (``tokens.rerendered``; docs/trainer-formats.md "When a rollout was re-rendered"):
#:
#: * ``"cut"``: keep it as the view has it, which stops before the re-rendered turn: that
#:   turn and the later ones are left out of the ids, the mask and the logprobs (the
#:   adapter's entry says where it was cut); its reward is still the whole episode's;
#: * ``"group"``: leave it out with the other samples of its group, logged;
#: * ``"raise"``: a ``ValueError`` naming it and the fixes.
RERENDERED = ("cut", "group", "raise")


def rerender_policy(rerendered: str | None, *, skip: bool) -> str:
    """The policy asked for; None follows ``skip`` ("group" with it, "raise" without: what
    :func:`take` did before it had the choice). ``ValueError`` for anything else."""
    if rerendered is None:
        return "group" if skip else "raise"
    if rerendered not in RERENDERED:
        raise ValueError(f"rerendered={rerendered!r} is not a policy for re-rendered rollouts; give one of "
                         f"{', '.join(repr(p) for p in RERENDERED)} (docs/trainer-formats.md)")
    return rerendered


def take(rollouts: Iterable[Rollout], *, whole: bool, skip: bool,
         rerendered: str | None = None) -> list[tuple[Rollout, EpisodeTokens]]:
    """The rollouts with their token views; ``ValueError`` on the first that cannot be had,
    unless ``skip`` (then its group is left out and logged). In the trajectory form
    (``whole``) a re-rendered rollout follows ``rerendered`` (:data:`RERENDERED`; None: as
    ``skip`` says)."""
    policy = rerender_policy(rerendered, skip=skip)
    rollouts = list(rollouts)
    reasons: dict[int, str] = {}
    episodes: dict[int, EpisodeTokens] = {}
    for index, rollout in enumerate(rollouts):
        why = problem(rollout, whole=False)
        if why is None:
            episodes[index] = EpisodeTokens.from_dict(rollout["tokens"])
            if whole and policy != "cut":
                why = rerender_problem(rollout, episodes[index])
                if why is not None and policy == "raise":
                    raise ValueError(why)
        elif not skip:
            raise ValueError(why)
        if why is not None:
            reasons[index] = why
    found = _split(rollouts, reasons)
    for rollout, why in found.skipped:
        log.warning("left out: %s", why)
    kept = {id(rollout) for rollout in found.kept}
    return [(rollout, episodes[index]) for index, rollout in enumerate(rollouts) if id(rollout) in kept]


def logprobs_or_zero(view_logprobs: Sequence[float | None]) -> list[float]:
    """Logprobs with 0.0 where the environment's tokens are (masked out by every trainer)."""
    return [0.0 if value is None else value for value in view_logprobs]


def all_or_none_logprobs(taken: Sequence[tuple[Rollout, EpisodeTokens]]) -> bool:
    """Whether the rollouts carry logprobs; ``ValueError`` when some do and some do not."""
    have = [episode.view.completion_logprobs is not None for _, episode in taken]
    if any(have) and not all(have):
        missing = next(rollout for (rollout, _), has in zip(taken, have) if not has)
        raise ValueError(f"{label(missing)} has token ids but no logprobs while others have them: "
                         f"post its batch with \"logprobs\": true as well")
    return bool(have) and all(have)


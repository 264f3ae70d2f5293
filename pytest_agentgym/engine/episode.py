"""One episode, AgentGym's loop (protocol sheet §9). Knows nothing of pytest.

    open (create + reset) -> ask the model -> extract the action -> step
    ... until the environment says done, max rounds, or the wall-clock budget.

The episode's reward is the last step's reward (what the AgentGym client
reports: ``score`` for BabyAI and SciWorld). Infrastructure failures
(environment server, model endpoint, harness) end the attempt as an *error*;
they are retried as a fresh episode up to ``retries`` times, and every failed
attempt is kept in the record; a request the model endpoint refused (HTTP 4xx)
is deterministic and not retried. A model endpoint found unreachable may first be
waited for, or failed over from, by the engine's outage guard (engine/outage.py,
the node's ``model.outage``); such a retry is kept but not counted against ``retries``.

Policy outcomes, not errors: the environment says done (``done``), the rounds
run out (``max_rounds``), the model endpoint says the conversation no longer
fits its context (``context_length``), or the wall-clock budget runs out while
the model is answering, after at least one round (``timeout``). When the budget
runs out while an environment server is answering, that is ``env:EnvTimeout``;
while the model answers its first round, ``model:EndpointTimeout``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Protocol, Sequence

from pytest_agentgym.envs.base import EnvAdapter, StepResult
from pytest_agentgym.envs.protocol import EnvClient, EnvServerError
from pytest_agentgym.envs.spec import EnvSpec
from pytest_agentgym.envs.watch import RequestWatch, watch_requests
from pytest_agentgym.model.errors import ContextLengthExceeded, ModelError, RequestRejected
from pytest_agentgym.results.conversation import opening_key
from pytest_agentgym.results.records import ErrorInfo, EpisodeRecord, StopReason, Turn, outcome_of
from pytest_agentgym.results.tokens import episode_tokens

#: Each failed attempt with its traceback; the run writes these to logs/harness.log.
log = logging.getLogger("pytest_agentgym.engine.episode")

#: Extra seconds the model client's own per-turn budget gets beyond what is left of
#: the episode's, so that the episode's clock (which knows what it was waiting on)
#: is the one that ends a turn the budget cuts short.
MODEL_BUDGET_SLACK_S = 1.0

#: Seconds an episode waits for ``POST /close`` when freeing its environment.
CLOSE_TIMEOUT_S = 10.0

#: Retries an episode may take after outages its engine's guard recovered from, beyond its
#: own (engine/outage.py): a bound for an endpoint that answers probes but drops every call.
OUTAGE_RETRIES = 5


@dataclass(frozen=True)
class Completion:
    """A model reply and what it cost."""

    text: str
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: The endpoint's per-token data (logprobs, token ids), when it sent some.
    token_data: dict[str, Any] | None = None
    #: Why the endpoint stopped ("stop", "length": cut by max_tokens), when it said.
    finish_reason: str | None = None


class ChatModel(Protocol):
    """What the episode needs from a model endpoint (model/client.py provides it)."""

    name: str

    async def complete(
        self, messages: Sequence[dict[str, str]], *, budget_s: float, sampling: dict[str, Any],
        previous: Completion | None = None,
    ) -> Completion:
        """Answer within ``budget_s`` seconds (``sampling`` overrides the endpoint's
        defaults), or raise a ModelError. ``previous``: the episode's last reply when
        ``messages`` are the conversation it answered, that reply and the new message after
        it (what a turn sent as token ids builds on: model/token_turns.py); else None."""


@dataclass(frozen=True)
class EpisodeLimits:
    max_rounds: int
    timeout_s: float
    retries: int = 1


@dataclass(frozen=True)
class EpisodeRequest:
    """Which episode to run, and the facts it is run under."""

    run_id: str
    spec: EnvSpec
    task_index: int
    repeat: int
    limits: EpisodeLimits
    min_reward: float | None = None
    nodeid: str | None = None
    node: str | None = None
    checkpoint: str | None = None
    #: Sampling parameters of the suite, over the node's.
    sampling: dict[str, Any] = field(default_factory=dict)
    #: The rollout service's batch and the rollout's index in its group (None elsewhere).
    batch: str | None = None
    sample: int | None = None


#: Called with the error before an infrastructure failure is retried (e.g. to
#: restart a dead environment server).
BeforeRetry = Callable[[ErrorInfo], Awaitable[None]]


def classify(exc: BaseException) -> str:
    """Where an exception came from: env, model or harness."""
    if isinstance(exc, EnvServerError):
        return "env"
    if isinstance(exc, ModelError):
        return "model"
    return "harness"


def retryable(exc: BaseException) -> bool:
    """Whether a fresh attempt could end differently: not for a request the model
    endpoint refused (HTTP 4xx), which it would refuse again."""
    return not isinstance(exc, RequestRejected)


def turn_sampling(sampling: dict[str, Any], task_index: int, turn: int) -> dict[str, Any]:
    """What one model call sends: the episode's sampling, its ``seed`` (when it has one)
    replaced by a seed drawn from it, the task and the turn. One seed for every call would
    give each turn, and every task, the same random draws: with a weak model, the same
    reply on every turn (measured with vLLM: 29 of 32 seeded rollouts of SmolLM2). The
    record keeps the episode's seed; the calls' seeds follow from it, so a seeded run is
    still played again the same."""
    seed = sampling.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        return sampling
    digest = hashlib.sha256(f"{seed}:{task_index}:{turn}".encode()).digest()
    return {**sampling, "seed": int.from_bytes(digest[:4], "big") >> 1}  # 0 to 2**31 - 1


class _Attempt:
    """The mutable state of one attempt, turned into a record at the end."""

    def __init__(self, watch: RequestWatch) -> None:
        self.turns: list[Turn] = []
        self.last: StepResult | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        #: the environment requests in flight (filled by the protocol client)
        self.env_requests = watch
        #: ``time.monotonic()`` when the model was asked, while it has not answered
        self.model_asked_at: float | None = None
        #: the messages before round 0's user turn
        self.opening: tuple[dict[str, str], ...] | None = None


class _BudgetSpent(Exception):
    """The episode's budget ran out between two calls (nothing was cut short)."""


async def _play(
    request: EpisodeRequest,
    adapter: EnvAdapter,
    client: EnvClient,
    model: ChatModel,
    attempt: _Attempt,
    deadline: float,
) -> StopReason:
    try:
        opening = await adapter.open(client, request.task_index)
    except BaseException:
        client.abandon_open()  # a client over replicas counts a create that never opened off its load
        raise
    attempt.opening = tuple(opening.messages[:-1])
    try:
        messages: list[dict[str, str]] = list(opening.messages)
        rewritten = False  # whether the server rewrote the conversation sent next
        previous: Completion | None = None  # the last reply: what a turn sent as token ids builds on
        for index in range(request.limits.max_rounds):
            observation = messages[-1]["content"]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _BudgetSpent()
            attempt.model_asked_at = time.monotonic()
            try:
                completion = await model.complete(
                    messages, budget_s=remaining + MODEL_BUDGET_SLACK_S,
                    previous=None if rewritten else previous,
                    sampling=turn_sampling(request.sampling, request.task_index, index),
                )
            except ContextLengthExceeded:
                return "context_length"  # AgentGym stops when the prompt reaches its maximum
            attempt.model_asked_at = None
            previous = completion
            attempt.prompt_tokens += completion.prompt_tokens or 0
            attempt.completion_tokens += completion.completion_tokens or 0
            parsed = adapter.parse_action(completion.text)
            started = time.monotonic()
            if parsed.action is None:
                result = StepResult(observation=parsed.rejection or "", reward=0.0, done=False)
            else:
                body = await client.step(opening.env_id, parsed.action)
                result = _read_step(adapter, client, opening.env_id, body)
            attempt.last = result
            attempt.turns.append(
                Turn(
                    index=index,
                    observation=observation,
                    reply=completion.text,
                    action=parsed.action,
                    feedback=result.observation,
                    reward=result.reward,
                    done=result.done,
                    model_latency_s=round(completion.latency_s, 4),
                    env_latency_s=round(time.monotonic() - started, 4),
                    prompt_tokens=completion.prompt_tokens,
                    completion_tokens=completion.completion_tokens,
                    score=result.score,
                    token_data=completion.token_data,
                    sent=tuple(messages) if rewritten else None,
                )
            )
            if result.conversation is not None:  # the server keeps the conversation
                followed = messages + [{"role": "assistant", "content": completion.text},
                                       {"role": "user", "content": result.observation}]
                messages = list(result.conversation)
                rewritten = messages != followed
            else:
                messages.append({"role": "assistant", "content": completion.text})
                messages.append({"role": "user", "content": result.observation})
            if result.done:
                return "done"
        return "max_rounds"
    finally:
        if request.spec.has_close:
            try:
                await asyncio.shield(asyncio.wait_for(client.close(opening.env_id), CLOSE_TIMEOUT_S))
            except (EnvServerError, asyncio.CancelledError, asyncio.TimeoutError):
                pass  # freeing the env is best effort; the result stands
        client.release(opening.env_id)  # a client over replicas counts it off its replica's load


def _read_step(adapter: EnvAdapter, client: EnvClient, env_id: int, body: Any) -> StepResult:
    try:
        return adapter.read_step(body)
    except (TypeError, ValueError, KeyError) as exc:
        raise client.bad_answer("/step", str(exc), env_id) from exc


async def run_episode(
    request: EpisodeRequest,
    adapter: EnvAdapter,
    client: EnvClient,
    model: ChatModel,
    before_retry: BeforeRetry | None = None,
    outage: Any = None,
) -> EpisodeRecord:
    """Run one episode (with retries on infrastructure errors) and return its record.
    ``outage``: the engine's :class:`~pytest_agentgym.engine.outage.OutageGuard`, which
    gives each attempt its model and decides what an unreachable endpoint means; a retry
    after an outage it waited out (or failed over) is kept in ``retried`` but not counted
    against ``limits.retries``."""
    retried: list[ErrorInfo] = []
    counted = 0  # retries taken from limits.retries
    outages = 0  # retries after an outage the guard recovered from
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    while True:
        error: ErrorInfo | None = None
        again = True
        failure: BaseException | None = None
        served = outage.model if outage is not None else model  # the model of this attempt
        deadline = time.monotonic() + request.limits.timeout_s
        with watch_requests() as watch:
            attempt = _Attempt(watch)
            try:
                stop = await asyncio.wait_for(
                    _play(request, adapter, client, served, attempt, deadline),
                    timeout=request.limits.timeout_s,
                )
            except (asyncio.TimeoutError, TimeoutError, _BudgetSpent):
                stop, error = _budget_ran_out(request, attempt, served)
            except Exception as exc:  # noqa: BLE001 - every failure is stored as data
                stop, error = "error", ErrorInfo.from_exception(exc, classify(exc))  # type: ignore[arg-type]
                again, failure = retryable(exc), exc
                log.warning("%s[%s] repeat %s, attempt %d: %s error", request.spec.name, request.task_index,
                            request.repeat, len(retried) + 1, error.where, exc_info=exc)
        if error is None or not again:
            break
        an_outage = outage is not None and failure is not None and outage.covers(failure) \
            and outages < OUTAGE_RETRIES
        if not an_outage and counted >= request.limits.retries:
            break
        if before_retry is not None:  # e.g. a launched endpoint restarted first
            try:
                await before_retry(error)
            except Exception as exc:  # noqa: BLE001 - no retry then; say why
                error = _recovery_failed(exc, error)
                break
        if an_outage:
            waited = await outage.recover(served)
            if waited is not None:  # it did not come back: an error as without a policy, saying so
                error = ErrorInfo(error.type, f"{error.message}; {waited}", error.where)
                break
            outages += 1
        else:
            counted += 1
        retried.append(error)
    reward = attempt.last.reward if attempt.last else (None if error else 0.0)
    score = attempt.last.score if attempt.last else None
    if error is not None:
        reward = None
    success = error is None and request.spec.success(reward, score)
    return EpisodeRecord(
        run_id=request.run_id,
        env=request.spec.name,
        task_index=request.task_index,
        repeat=request.repeat,
        reward=reward,
        success=success,
        rounds=len(attempt.turns),
        stop_reason=stop,
        started_at=started_at,
        duration_s=round(time.monotonic() - started, 3),
        model=served.name,  # the model of the attempt that counts (a failover may have changed it)
        turns=tuple(attempt.turns),
        error=error,
        retried=tuple(retried),
        prompt_tokens=attempt.prompt_tokens,
        completion_tokens=attempt.completion_tokens,
        min_reward=request.min_reward,
        outcome=outcome_of(error, reward, request.min_reward, success),
        max_rounds=request.limits.max_rounds,
        sampling=dict(request.sampling),
        nodeid=request.nodeid,
        checkpoint=request.checkpoint,
        node=request.node,
        score=score,
        batch=request.batch,
        sample=request.sample,
        **_conversation_facts(attempt),
    )


def _conversation_facts(attempt: _Attempt) -> dict[str, Any]:
    """The record's opening (and its hash) and token view, from the attempt that counts."""
    facts: dict[str, Any] = {}
    if attempt.opening is not None:
        facts["opening_sha256"], facts["opening"] = opening_key(attempt.opening)
    if any(turn.token_data for turn in attempt.turns):
        try:
            facts["tokens"] = episode_tokens([turn.token_data for turn in attempt.turns])
        except ValueError as exc:  # the endpoint's token data does not add up: keep it as sent
            log.warning("no token view for this episode: %s", exc)
    return facts


def _recovery_failed(exc: BaseException, error: ErrorInfo) -> ErrorInfo:
    """The episode's error when getting ready for a retry failed (e.g. its environment
    server would not restart): that failure, from the side it tried to bring back
    when it is a server that failed, followed by the attempt's own error."""
    from pytest_agentgym.process.errors import ServerError

    where = error.where if isinstance(exc, ServerError) else classify(exc)
    return ErrorInfo(
        type(exc).__name__,
        f"{' '.join(str(exc).split())}; so the episode was not retried after its attempt "
        f"failed with {error.type}: {error.message}",
        where,  # type: ignore[arg-type]
    )


def _budget_ran_out(
    request: EpisodeRequest, attempt: _Attempt, model: ChatModel
) -> tuple[StopReason, ErrorInfo | None]:
    """What it means that the episode's budget ran out, by what the attempt was waiting on."""
    budget = request.limits.timeout_s
    now = time.monotonic()
    pending = attempt.env_requests.oldest()
    if pending is not None:
        return "error", ErrorInfo(
            "EnvTimeout",
            f"{pending.describe()}: no answer after {now - pending.sent_at:.1f} s, when the "
            f"episode budget of {budget:g} s ran out (the per-request timeout, "
            f"envs.{request.spec.name}.request_timeout, is {request.spec.request_timeout:g} s); "
            "is the server stuck? its log may say why",
            "env",
        )
    if attempt.turns:
        return "timeout", None  # the budget ran out mid-episode: a policy outcome
    if attempt.model_asked_at is not None:
        endpoint = getattr(model, "base_url", None)
        where = f"model endpoint {endpoint} (model {model.name})" if endpoint else f"model {model.name}"
        return "error", ErrorInfo(
            "EndpointTimeout",
            f"{where}: no answer to the first round after {now - attempt.model_asked_at:.1f} s, "
            f"when the episode budget of {budget:g} s ran out; check the model endpoint, "
            "or raise episode_timeout if the model is only slow",
            "model",
        )
    return "error", ErrorInfo(
        "TimeoutError",
        f"the episode budget of {budget:g} s ran out before the first round, outside any "
        "request to the environment server or the model; raise episode_timeout",
        "harness",
    )

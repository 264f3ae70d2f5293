"""What every environment adapter provides, and the three ways AgentGym reads actions.

An adapter holds what differs between environments: how an episode is opened
(create, reset payload, the first observation and the instruction prompt), how
the action is extracted from the model's reply, and how a step's answer is read.
Facts about where the server lives (port, dialect, path prefix, max rounds,
success rule) come from :class:`~pytest_agentgym.envs.spec.EnvSpec`, loaded from
configs/envs.yaml, so users can change them without code.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal

import jinja2

from pytest_agentgym.envs.protocol import EnvClient

#: AgentGym's usual acknowledgement turn after the instructions.
ACK_LONG = "OK. I'll follow your instructions and try my best to solve the task."
ACK_SHORT = "Ok."


@dataclass(frozen=True)
class Opening:
    """An environment instance, reset to its task, and the conversation so far.

    ``messages`` are OpenAI chat messages; the last one is the user turn holding
    the first observation, which the model answers first.
    """

    env_id: int
    messages: tuple[dict[str, str], ...]

    @property
    def first_observation(self) -> str:
        return self.messages[-1]["content"]


@dataclass(frozen=True)
class ParsedAction:
    """The action to send, or the message shown instead when the reply is refused
    client-side (the server is then not called; reward 0, not done)."""

    action: str | None
    rejection: str | None = None


@dataclass(frozen=True)
class StepResult:
    """One step's answer, as the AgentGym client reports it.

    ``reward`` is the value the AgentGym client returns for the step (for BabyAI
    and SciWorld that is the server's ``score``); the episode's reward is the
    last step's ``reward``.
    """

    observation: str
    reward: float
    done: bool
    score: float | None = None
    #: The whole conversation the model answers next, when the server keeps it (an
    #: AgentBench task server sends its own history); None: the episode appends the
    #: reply and ``observation`` to what it has.
    conversation: tuple[dict[str, str], ...] | None = None


# -- reading numbers and flags out of an answer -----------------------------------------


def _as_json(value: Any) -> str:
    """How the server wrote ``value``: ``NaN``, ``Infinity``, ``"1"``, ``true``."""
    try:
        return json.dumps(value)[:80]
    except (TypeError, ValueError):
        return repr(value)[:80]


def finite_number(body: dict[str, Any], key: str, where: str) -> float:
    """``body[key]`` as a float; it must be a finite JSON number (not NaN or
    Infinity, which Python's json accepts, not a string, not a boolean), else
    ``ValueError`` naming ``where`` (e.g. ``Maze /step``), the field and the value."""
    value = body[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    raise ValueError(f"{where} answered {key!r}: {_as_json(value)}, which is not a finite number")


def json_boolean(body: dict[str, Any], key: str, where: str) -> bool:
    """``body[key]``, which must be a JSON ``true`` or ``false``, else ``ValueError``."""
    value = body[key]
    if isinstance(value, bool):
        return value
    raise ValueError(f"{where} answered {key!r}: {_as_json(value)}, which is not a JSON boolean")


#: Fields that AgentGym servers send as numbers, or as a flag, in their answers.
NUMBER_FIELDS = ("reward", "score")
FLAG_FIELDS = ("done",)


def check_fields(body: Any, where: str) -> None:
    """Raise ``ValueError`` when a dict answer carries ``reward``/``score`` that are not
    finite numbers or ``done`` that is not a boolean (e.g. the reset answers of
    BabyAI and SciWorld, which carry all three)."""
    if not isinstance(body, dict):
        return
    for key in NUMBER_FIELDS:
        if key in body:
            finite_number(body, key, where)
    for key in FLAG_FIELDS:
        if key in body:
            json_boolean(body, key, where)


class EnvAdapter:
    """Base class: subclass it, set the class attributes, override what differs."""

    #: The environment's name as users write it: "BabyAI", "TextCraft", ...
    name: ClassVar[str]
    #: File name of the instruction template under pytest_agentgym/envs/prompts/.
    prompt_template: ClassVar[str]
    acknowledgement: ClassVar[str] = ACK_LONG
    #: Which field of the id dialect's step answer the AgentGym client returns as
    #: the step's reward: "reward", or "score" (BabyAI and SciWorld, where the
    #: score is the running total and "reward" only the change).
    reward_from: ClassVar[Literal["reward", "score"]] = "reward"

    def __init__(self, template_path: str | Path | None = None) -> None:
        """``template_path`` replaces the shipped prompt (configs: envs.<Name>.prompt_template)."""
        if template_path is not None:
            source = Path(template_path).read_text(encoding="utf-8")
        else:
            source = (
                resources.files("pytest_agentgym.envs") / "prompts" / self.prompt_template
            ).read_text(encoding="utf-8")
        #: identifies the prompt across runs (a resumed run refuses another prompt)
        self.prompt_sha256 = hashlib.sha256(source.encode("utf-8")).hexdigest()
        env = jinja2.Environment(
            autoescape=False,  # plain text for a model, not HTML
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=False,
        )
        self._template = env.from_string(source)

    def make_client(self, spec: Any, server_url: str) -> EnvClient:
        """The protocol client the engine uses for this environment (one per run);
        ``spec`` is its :class:`~pytest_agentgym.envs.spec.EnvSpec`."""
        return EnvClient(spec.base_url(server_url), env=spec.name, dialect=spec.dialect,
                         timeout=spec.request_timeout)

    # -- opening an episode -----------------------------------------------------

    def instructions(self, **context: Any) -> str:
        """The rendered instruction prompt."""
        return self._template.render(**context).strip()

    def create_body(self) -> dict[str, Any] | None:
        """JSON body of ``POST /create`` (None: no body; TextCraft's server wants one)."""
        return None

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        """Body fields of ``POST /reset`` besides the env id."""
        return {"data_idx": task_index}

    def first_observation(self, reset_body: Any) -> str:
        """The text of the first observation, from the reset answer."""
        if isinstance(reset_body, dict) and isinstance(reset_body.get("observation"), str):
            return reset_body["observation"]
        raise TypeError(f"reset answer has no 'observation' string: {reset_body!r:.200}")

    async def open(self, client: EnvClient, task_index: int) -> Opening:
        """Create an env, reset it to ``task_index``, and build the opening conversation.

        Default: [user: instructions, assistant: acknowledgement, user: first observation].
        """
        env_id = await client.create(self.create_body())
        observation = await self.reset_and_observe(client, env_id, task_index)
        return Opening(env_id, self.conversation(observation))

    async def reset_and_observe(self, client: EnvClient, env_id: int, task_index: int) -> str:
        """``POST /reset`` to ``task_index``; the first observation, read by
        :meth:`first_observation`. A malformed answer, or one whose reward, score or
        done is present but not a finite number / a boolean, is :class:`EnvBadResponse`."""
        body = await client.reset(env_id, self.reset_payload(task_index))
        try:
            check_fields(body, f"{self.name} /reset")
            return self.first_observation(body)
        except (TypeError, ValueError) as exc:
            raise client.bad_answer("/reset", str(exc), env_id) from exc

    def conversation(self, observation: str, **context: Any) -> tuple[dict[str, str], ...]:
        return (
            {"role": "user", "content": self.instructions(**context)},
            {"role": "assistant", "content": self.acknowledgement},
            {"role": "user", "content": observation},
        )

    # -- during an episode --------------------------------------------------------

    def parse_action(self, reply: str) -> ParsedAction:
        return ParsedAction(extract_react(reply))

    def read_step(self, body: Any) -> StepResult:
        """Read ``POST /step``'s answer (id dialect: observation, reward, done, maybe score).

        The step's reward is the field named by :attr:`reward_from`, which must
        be present; ``score`` is kept when the server sends one. Rewards and
        scores must be finite numbers and ``done`` a boolean (``ValueError``).
        """
        required = {"observation", "done", self.reward_from}
        if not isinstance(body, dict) or not required <= body.keys():
            raise TypeError(
                f"{self.name} /step should answer {{{', '.join(sorted(required))}}}, "
                f"got {body!r:.200}"
            )
        where = f"{self.name} /step"
        return StepResult(
            observation=str(body["observation"]),
            reward=finite_number(body, self.reward_from, where),
            done=json_boolean(body, "done", where),
            score=finite_number(body, "score", where) if body.get("score") is not None else None,
        )


# -- the three action-extraction families of AgentGym clients ----------------------

_ONE_LINE_ACTION = re.compile(r"Action:\s*(.*?)(?=\n|$)", re.DOTALL)
_NOT_ACTION_CHARS = re.compile(r"[^A-Za-z0-9, ]+")
TOO_MANY_ACTIONS = (
    "Error: Only one 'Action' is allowed per response. Please adjust your response."
)


#: Without an ``Action:`` marker, a reply holding one of these is sent whole
#: (the rule sits in AgentGym's shared ``parse_react``; WebShop's actions look so).
BARE_ACTION_MARKERS = ("search[", "click[")


def drop_end_of_sequence(reply: str) -> str:
    """AgentGym's ALFWorld, SciWorld, WebShop, Maze and Wordle clients: a reply that
    ends in ``</s>`` loses its last 5 characters, the marker and the character before
    it (the space of ``" </s>"``, else a character of the action). Nothing else is
    removed; a ``</s>`` elsewhere stays."""
    return reply[:-5] if reply.endswith("</s>") else reply


def extract_react(reply: str) -> str:
    """Family (a), AgentGym's ``BaseAdapter.parse_react`` (ALFWorld, SciWorld, WebShop).

    A trailing ``</s>`` goes as in the original clients (:func:`drop_end_of_sequence`);
    with an ``Action:`` marker the action is everything after the **last** one,
    stripped (it may span lines). Without a marker the original sends an empty
    action, unless the reply contains ``search[`` or ``click[``: then the whole
    reply, stripped, is the action.
    """
    text = drop_end_of_sequence(reply)
    if "Action:" in text:
        return text.rsplit("Action:", 1)[1].strip()
    if any(marker in text for marker in BARE_ACTION_MARKERS):
        return text.strip()
    return ""


def extract_one_line(reply: str) -> ParsedAction:
    """Family (b), BabyAI and TextCraft (2025 clients): exactly one ``Action:``;
    the action is the first non-blank line after it, reduced to ``[A-Za-z0-9, ]``
    with runs of spaces collapsed. More than one ``Action:`` is refused; with
    none the original clients send the empty action (not the reply), which the
    servers answer with their usual message (BabyAI: "No change in state.")."""
    matches = _ONE_LINE_ACTION.findall(reply)
    if len(matches) > 1:
        return ParsedAction(None, TOO_MANY_ACTIONS)
    raw = matches[0] if matches else ""
    return ParsedAction(" ".join(_NOT_ACTION_CHARS.sub("", raw).split()))


def extract_first_split(reply: str) -> str:
    """Family (c), Maze and Wordle: drop a trailing ``</s>`` the way the original
    does (:func:`drop_end_of_sequence`), then the text between the first and second
    ``Action:``, stripped; the whole text when there is none."""
    text = drop_end_of_sequence(reply)
    parts = text.split("Action:")
    return (parts[1] if len(parts) > 1 else text).strip()

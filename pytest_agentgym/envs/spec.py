"""Where an environment's server lives and how episodes on it are judged.

One :class:`EnvSpec` per entry of configs/envs.yaml. Nothing here talks to a
server; the lifecycle (servers/) and the episode runner read these facts.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

#: Seconds one request to an environment server may take (envs.<Name>.request_timeout).
DEFAULT_REQUEST_TIMEOUT = 60.0


Category = Literal["lightweight", "moderate", "heavy"]
_CATEGORIES = ("lightweight", "moderate", "heavy")
_DIALECTS = ("id", "env_idx")


class EnvConfigError(ValueError):
    """A bad environment definition; the message names the file, the key and the fix."""


#: How a suite names a verifiers environment: ``verifiers:<module>`` (integrations/verifiers_suite.py).
VERIFIERS_PREFIX = "verifiers:"


def is_verifiers(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(VERIFIERS_PREFIX)


_TASKS = re.compile(r"^\d+-\d*$")
_RULE = re.compile(r"^\s*(reward|score)\s*(==|>=|>|<=|<)\s*(-?\d+(?:\.\d+)?)\s*$")
_OPS = {"==": operator.eq, ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


@dataclass(frozen=True)
class SuccessRule:
    """``reward == 1``, ``score == 100``, ``reward > 0``: a field, a comparison, a number."""

    text: str

    def __post_init__(self) -> None:
        if not _RULE.match(self.text):
            raise EnvConfigError(
                f"success rule {self.text!r} is not of the form '<reward|score> <op> <number>' "
                "(op one of ==, >=, >, <=, <), e.g. 'reward == 1'"
            )

    def __call__(self, reward: float | None, score: float | None) -> bool:
        name, op, number = _RULE.match(self.text).groups()  # type: ignore[union-attr]
        value = reward if name == "reward" else score
        return value is not None and _OPS[op](float(value), float(number))


@dataclass(frozen=True)
class EnvSpec:
    name: str
    category: Category
    port: int
    dialect: Literal["id", "env_idx"] = "id"
    path_prefix: str = ""
    max_rounds: int = 20
    success: SuccessRule = field(default_factory=lambda: SuccessRule("reward == 1"))
    has_close: bool = False
    #: Shell command that starts the real AgentGym server ({host} and {port} are filled in).
    command: str | None = None
    #: Name of the plugin's own server for this environment (``pytest-agentgym serve NAME``).
    embedded: str | None = None
    #: A user's replacement for the shipped instruction prompt (a jinja2 file).
    prompt_template: str | None = None
    #: An explicit URL; when set the server is attached to, never spawned. A YAML list
    #: (``url: [http://a:36001, http://b:36001]``) attaches to each as a replica: this is
    #: its first, :attr:`replica_urls` holds them all.
    url: str | None = None
    #: Every URL of a ``url:`` list, in order (empty when ``url`` is one URL or unset).
    replica_urls: tuple[str, ...] = ()
    #: How many server processes to spawn for this environment: a whole number, or
    #: ``"auto"`` (one per :data:`EPISODES_PER_REPLICA` episodes in flight, at most one
    #: per core). None: the node's ``envs.replicas`` (default 1). Ignored when attaching.
    replicas: int | str | None = None
    #: How long to wait for the server's health, in seconds.
    startup_timeout: float = 60.0
    #: Seconds one request to the server may take before it is ``env:EnvTimeout``
    #: (separate from the model's request timeout and the episode's budget).
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: How many times a spawned server is started before giving up, when it exits
    #: or never gets healthy during start-up; waits ``start_backoff * 2**(n-1)``
    #: seconds before attempt n+1.
    start_attempts: int = 3
    start_backoff: float = 1.0
    description: str = ""
    #: The task indices that exist: "0-24", or "0-" when any index from 0 up is a task.
    tasks: str = "0-"

    def task_range(self) -> tuple[int, int | None]:
        """(lowest, highest) valid task index; highest None when there is no end."""
        low, _, high = self.tasks.partition("-")
        return int(low), int(high) if high else None
    #: Lowest and highest reward an episode can get; bounds the mean reward's interval.
    reward_range: tuple[float, float] | None = None
    #: What only this environment's adapter reads (an AgentBench task's name, ...).
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def in_process(self) -> bool:
        """Played inside the harness's process by its adapter (a verifiers environment):
        there is no server to start, attach to or restart."""
        return bool(self.options.get("in_process"))

    def default_url(self, host: str = "127.0.0.1") -> str:
        return self.url or f"http://{host}:{self.port}"

    @property
    def attach_urls(self) -> tuple[str, ...]:
        """The servers to attach to: every URL of a ``url:`` list, the one ``url``, or none."""
        return self.replica_urls or ((self.url,) if self.url else ())

    def base_url(self, server_url: str) -> str:
        """The URL the protocol client uses: the server's plus the path prefix."""
        return server_url.rstrip("/") + self.path_prefix

    def with_overrides(self, **changes: Any) -> "EnvSpec":
        return replace(self, **changes)


def spec_from_mapping(name: str, data: dict[str, Any], source: str) -> EnvSpec:
    """Build an EnvSpec from one YAML entry; ``source`` names the file for errors."""
    where = f"{source}: environments.{name}"
    if not isinstance(data, dict):
        raise EnvConfigError(f"{where} must be a mapping of keys, got {type(data).__name__}")
    known = {f for f in EnvSpec.__dataclass_fields__} - {"name"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise EnvConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known keys are {', '.join(sorted(known))}"
        )
    for required in ("category", "port"):
        if required not in data:
            raise EnvConfigError(f"{where}: missing key '{required}'")
    if data["category"] not in _CATEGORIES:
        raise EnvConfigError(
            f"{where}.category is {data['category']!r}; use one of {', '.join(_CATEGORIES)}"
        )
    if data.get("dialect", "id") not in _DIALECTS:
        raise EnvConfigError(f"{where}.dialect is {data['dialect']!r}; use 'id' or 'env_idx'")
    for key in ("port", "max_rounds", "start_attempts"):
        if key in data and (not _is_number(data[key], int) or data[key] <= 0):
            raise EnvConfigError(f"{where}.{key} must be a positive integer, got {data[key]!r}")
    for key in ("startup_timeout", "request_timeout", "start_backoff"):
        if key in data and (not _is_number(data[key], (int, float)) or data[key] <= 0):
            raise EnvConfigError(
                f"{where}.{key} must be a positive number of seconds, got {data[key]!r}"
            )
    values = dict(data)
    _read_urls(values, data, where)
    if values.get("replicas") is not None:
        values["replicas"] = read_replicas(values["replicas"], f"{where}.replicas")
    if "options" in values:
        if not isinstance(values["options"], dict) or not all(isinstance(k, str) for k in values["options"]):
            raise EnvConfigError(f"{where}.options must be a mapping of names to values, "
                                 f"got {data['options']!r}")
        values["options"] = dict(values["options"])
    if "tasks" in values:
        values["tasks"] = str(values["tasks"]).replace(" ", "")
        if not _TASKS.match(values["tasks"]):
            raise EnvConfigError(f"{where}.tasks is {data['tasks']!r}; write the valid task indices as "
                                 "'0-24', or '0-' when every index from 0 up is a task")
    if data.get("reward_range") is not None:
        values["reward_range"] = _reward_range(data["reward_range"], where)
    try:
        values["success"] = SuccessRule(str(data.get("success", "reward == 1")))
    except EnvConfigError as exc:
        raise EnvConfigError(f"{where}.success: {exc}") from None
    return EnvSpec(name=name, **values)


#: Episodes in flight that one spawned server process is given by ``replicas: auto``:
#: one embedded server keeps up with about this many at a 200 ms model (docs/scale-out.md).
EPISODES_PER_REPLICA = 64


def read_replicas(value: Any, where: str) -> int | str:
    """``replicas``: a whole number >= 1 or ``auto``; anything else names the fix."""
    if value == "auto" or (_is_number(value, int) and value >= 1):
        return value
    if isinstance(value, str) and value.strip().isdigit() and int(value) >= 1:
        return int(value)
    raise EnvConfigError(f"{where} is {value!r}; give a whole number of server processes (>= 1) "
                         "or 'auto' (one per 64 episodes in flight, at most one per core)")


def resolve_replicas(value: int | str | None, concurrency: int, cores: int) -> int:
    """How many processes ``replicas: value`` means for ``concurrency`` episodes in flight
    on ``cores`` cores: ``auto`` gives one per :data:`EPISODES_PER_REPLICA`, between 1 and
    ``cores``; None gives 1."""
    if value is None:
        return 1
    if value == "auto":
        return max(1, min(cores, math.ceil(concurrency / EPISODES_PER_REPLICA)))
    return int(value)


def _read_urls(values: dict[str, Any], data: dict[str, Any], where: str) -> None:
    """``url``: one URL, or a list of them (replicas attached to); kept as ``url`` (the
    first) and ``replica_urls`` (all)."""
    url = data.get("url")
    if isinstance(url, (list, tuple)):
        if not url or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in url):
            raise EnvConfigError(f"{where}.url is {url!r}; give one URL or a list of http:// URLs, one per "
                                 "running server of this environment")
        if len(set(url)) != len(url):
            raise EnvConfigError(f"{where}.url lists a server twice ({url!r}); give each running server once")
        values["url"], values["replica_urls"] = url[0], tuple(url) if len(url) > 1 else ()
    elif url is not None and not isinstance(url, str):
        raise EnvConfigError(f"{where}.url is {url!r}; give one URL or a list of URLs")
    else:
        values["replica_urls"] = tuple(data.get("replica_urls") or ())


def _reward_range(value: Any, where: str) -> tuple[float, float]:
    """``[low, high]`` with low < high, both finite numbers."""
    numbers = value if isinstance(value, (list, tuple)) and len(value) == 2 else None
    if numbers is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                  and math.isfinite(v) for v in numbers) or not numbers[0] < numbers[1]:
        raise EnvConfigError(
            f"{where}.reward_range must be [low, high], two numbers with low < high "
            f"(e.g. reward_range: [0, 1]), got {value!r}"
        )
    return float(numbers[0]), float(numbers[1])
def _is_number(value: Any, kinds: type | tuple[type, ...]) -> bool:
    """A YAML number of ``kinds`` (``true``/``false`` load as bool, which is not one)."""
    return isinstance(value, kinds) and not isinstance(value, bool)


#: libyaml's loader where PyYAML was built with it (about ten times faster than the
#: pure-Python one; every run reads envs.yaml, the node profile and the suites)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, with libyaml when it is there."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader


def load_specs(path: str | Path) -> dict[str, EnvSpec]:
    """Read an envs.yaml file: ``environments: {Name: {...}, ...}``."""
    path = Path(path)
    try:
        document = read_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise EnvConfigError(f"{path}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise EnvConfigError(f"{path}: cannot read: {exc.strerror}") from None
    entries = document.get("environments") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise EnvConfigError(f"{path}: expected a top-level 'environments:' mapping")
    return {name: spec_from_mapping(name, entry, str(path)) for name, entry in entries.items()}


#: The shipped definitions (configs/envs.yaml in a source checkout is the same file).
DEFAULT_ENVS_FILE = Path(__file__).resolve().parents[1] / "configs" / "envs.yaml"


def load_default_specs() -> dict[str, EnvSpec]:
    return load_specs(DEFAULT_ENVS_FILE)

"""The plugin's options: ``--agentgym-*`` flags, ``agentgym_*`` ini keys, ``AGENTGYM_*`` variables.

Every option is declared once in :data:`OPTIONS`; the same row gives the flag,
the ini key, the environment variable and the parse function (a ``ValueError``
for a bad value). Pytest-free: plugin/options.py registers the rows with pytest
and reads them in one order (command line, environment variable, ini);
config/settings.py then adds the suite YAML, the node profile and the defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable




def _parse_int(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"expected a number >= {minimum}, got {value}")
    return value


def parse_shard(text: str) -> Any:
    """--agentgym-shard (config/shard.py, imported when the option is given: these rows load
    in every pytest session, plugin/dormancy.py)."""
    from pytest_agentgym.config.shard import parse_option

    return parse_option(text)


def parse_tasks(text: str) -> Any:
    """--agentgym-tasks (config/tasks.py, imported when the option is given)."""
    from pytest_agentgym.config.tasks import parse_tasks as parse

    return parse(text)


def parse_positive_int(text: str) -> int:
    return _parse_int(text, 1)


def parse_replicas(text: str) -> int | str:
    if text.strip() == "auto":
        return "auto"
    try:
        return _parse_int(text, 1)
    except ValueError:
        raise ValueError(f"expected a whole number of server processes (>= 1) or 'auto', got {text!r}") from None


def parse_non_negative_int(text: str) -> int:
    return _parse_int(text, 0)


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"expected a positive number of seconds, got {value:g}")
    return value


def parse_queue(text: str) -> Any:
    from pytest_agentgym.queue.address import QueueAddress

    return QueueAddress.parse(parse_text(text), where="")


def parse_nats(text: str) -> str:
    """The events URL as given, once its auth and TLS keys check out (files there, variables set)."""
    from pytest_agentgym.transport.nats_options import nats_server

    text = parse_text(text)
    nats_server(text)
    return text


def parse_names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in str(text).split(",") if part.strip())
    if not names:
        raise ValueError("expected comma-separated names, e.g. BabyAI,Maze")
    return names


def parse_battery(text: str) -> Any:
    """--agentgym-battery (config/suite_files.py, imported when the option is given)."""
    from pytest_agentgym.config.suite_files import packaged_battery

    return packaged_battery(text)




def parse_notify(text: str) -> tuple[str, ...]:
    """``https://a/hook,http://127.0.0.1:9000/x`` -> both URLs; each must be http(s)."""
    from urllib.parse import urlsplit

    from pytest_agentgym.results.redact import redact_url

    urls = tuple(part.strip() for part in str(text).split(",") if part.strip())
    if not urls:
        raise ValueError("expected one or more http:// or https:// URLs, comma-separated")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{redact_url(url)} is not an http:// or https:// URL; give where to POST the run's "
                             f"summary, e.g. https://hooks.example.org/agentgym (comma-separate several)")
    return urls


#: A selector of --agentgym-endpoint that is a position in the chain: 0 is the primary.
_POSITION = re.compile(r"\d+")


def parse_endpoints(text: str | list[str]) -> tuple[tuple[str, str], ...]:
    """--agentgym-endpoint: ``tensorzero=http://gpu:3030,ollama=http://127.0.0.1:11434`` ->
    ``(("tensorzero", "http://gpu:3030"), ("ollama", "http://127.0.0.1:11434"))``.

    The flag may be repeated (pytest hands over a list); pairs are separated by commas or
    white space (an ini value may hold one a line). A selector is an endpoint kind or a
    position in the profile's chain (``0`` the primary, ``1`` the first fallback); which
    endpoint it names is decided against the profile (model/endpoint_settings.py
    ``override_urls``), where a kind the profile has none of is refused."""
    from urllib.parse import urlsplit

    from pytest_agentgym.model.endpoint_settings import KINDS
    from pytest_agentgym.results.redact import redact_url

    texts = text if isinstance(text, list) else [text]
    pairs: dict[str, str] = {}
    for part in (p for t in texts for p in re.split(r"[,\s]+", str(t)) if p):
        selector, sep, url = part.partition("=")
        selector = selector.strip().lower()
        if not sep or not url:
            raise ValueError(f"{redact_url(part)!r} is not KIND=URL; write e.g. tensorzero=http://gpu:3030 "
                             f"(comma-separate several, or repeat the flag)")
        if selector not in KINDS and not _POSITION.fullmatch(selector):
            raise ValueError(f"{selector!r} in {redact_url(part)!r} is neither an endpoint kind "
                             f"({', '.join(KINDS)}) nor a position in the chain (0 the primary, 1 the first "
                             f"fallback, ...)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{selector}={redact_url(url)}: the URL must start with http:// or https:// and "
                             f"name a host, e.g. {selector}=http://127.0.0.1:3030")
        if selector in pairs:
            raise ValueError(f"{selector} is given twice ({redact_url(pairs[selector])} and {redact_url(url)}); "
                             f"give each endpoint one URL")
        pairs[selector] = url.rstrip("/")
    if not pairs:
        raise ValueError("expected KIND=URL, e.g. tensorzero=http://gpu:3030,ollama=http://127.0.0.1:11434")
    return tuple(pairs.items())


def parse_fraction(text: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise ValueError(f"expected a number from 0 to 1 (e.g. 0.05 for 5%), got {value:g}")
    return value


def parse_margin(text: str) -> float:
    """--agentgym-max-drop: the baseline comparison's margin, in [0, 1) (compare refuses 1:
    no change is a drop larger than 1, so nothing could be regressed)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number from 0 to 1, below 1 (the range is [0, 1)), got {text!r}") from None
    if not 0 <= value < 1:
        raise ValueError(f"expected a number from 0 to 1, below 1 (the range is [0, 1); e.g. 0.05 for a drop of "
                         f"5 points: at 1 no drop could be larger than the margin, so nothing would be "
                         f"regressed), got {value:g}")
    return value


def parse_metric(text: str) -> str:
    value = str(text).strip().lower()
    if value not in ("success", "reward"):
        raise ValueError(f"expected success or reward, got {text!r}")
    return value


def _scalar(text: str) -> bool | int | float | str:
    if text.lower() in ("true", "false"):  # logprobs=true, return_token_ids=true
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_sampling(text: str) -> dict[str, Any]:
    """``temperature=0.7,max_tokens=512,logprobs=true`` -> {"temperature": 0.7, "max_tokens": 512,
    "logprobs": True}."""
    out: dict[str, Any] = {}
    for part in str(text).split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"sampling {part!r} is not KEY=VALUE; write e.g. temperature=0.7,max_tokens=512")
        out[key.strip()] = _scalar(value.strip())
    return out


def parse_progress(text: str) -> float | str:
    """--agentgym-progress: a number of seconds between progress lines, ``each`` (a line
    per finished episode) or ``off``."""
    value = str(text).strip().lower()
    if value in ("each", "off"):
        return value
    try:
        return parse_seconds(value)
    except ValueError:
        raise ValueError(f"expected a number of seconds between progress lines, each (a line per "
                         f"finished episode) or off, got {text!r}") from None


def parse_text(text: str) -> str:
    text = str(text).strip()
    if not text:
        raise ValueError("expected a non-empty value")
    return text


def parse_run_id(text: str) -> str:
    text = parse_text(text)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", text) or text in (".", "..", "latest"):
        raise ValueError(
            f"run id {text!r} must be letters, digits, '.', '_' or '-' (it names a directory) "
            "and not 'latest'"
        )
    return text


@dataclass(frozen=True)
class Option:
    name: str  # settings field, e.g. "max_rounds"
    metavar: str | None
    help: str
    parse: Callable[[str], Any] | None = None  # None: a flag
    default_text: str = "none"
    aliases: tuple[str, ...] = ()  # more flags for the same option
    repeatable: bool = False  # the flag may be given more than once: parse gets the list

    @property
    def flag(self) -> str:
        return "--agentgym-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "agentgym_" + self.name

    @property
    def env_var(self) -> str:
        return "AGENTGYM_" + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("node", "NAME|PATH", "node profile: a name under configs/nodes/ or a YAML file", parse_text, "local"),
    Option("envs", "A,B", "only these environments", parse_names, "all in the suites"),
    Option("battery", "NAME,...", "collect these packaged suites too (lightweight, moderate: folders of suite "
           "files the package ships; with no path given, only them)", parse_battery, "none"),
    Option("tasks", "SPEC", "only these task indices, e.g. 0-9,12", parse_tasks, "the suite's"),
    Option("repeat", "N", "run each task N times", parse_positive_int, "the suite's, else 1"),
    Option("max_rounds", "N", "rounds per episode", parse_positive_int, "suite, node cap, env"),
    Option("episode_timeout", "S", "wall-clock budget per episode in seconds", parse_seconds, "suite, node"),
    Option("concurrency", "N", "episodes in flight at once (per process)", parse_positive_int, "node"),
    Option("replicas", "N|auto", "server processes per spawned environment server (auto: one per 64 "
           "episodes in flight, at most one per core); creates go to the least loaded", parse_replicas,
           "the node's envs.replicas, else 1"),
    Option("model", "NAME", "model name to request from the endpoint", parse_text, "node"),
    Option("base_url", "URL", "any OpenAI-compatible endpoint (replaces the node's)", parse_text, "node"),
    Option("endpoint", "KIND=URL", "point the node's endpoint of this kind (or at this position of its "
           "chain: 0 the primary) at URL, keeping its model, the chain and the fallbacks; comma-separate "
           "several or repeat the flag", parse_endpoints, "the node's", repeatable=True),
    Option("api_key_env", "VAR", "environment variable holding the endpoint's API key", parse_text, "node"),
    Option("checkpoint", "PATH", "serve this checkpoint with vLLM and evaluate it", parse_text, "none"),
    Option("baseline", "RUN_DIR", "compare with this run, paired per task, and fail on a regression "
           "(a run directory, a run id, or latest)", parse_text, "none"),
    Option("max_drop", "X", "the margin: a drop larger than this against the baseline is a regression",
           parse_margin, "0.05"),
    Option("baseline_metric", "success|reward", "what the baseline comparison compares", parse_metric,
           "the suite's, else success"),
    Option("strict_gates", None, "an inconclusive baseline comparison fails the run too"),
    Option("allow_mismatch", None, "compare with a baseline whose settings differ (the verdict lists them)"),
    Option("stop_when_decided", None, "stop each environment once its verdicts (the baseline comparison, "
           "its threshold gates) can no longer change; its tasks are played in a seeded random order"),
    Option("reports", "DIR", "where runs are written", parse_text, "reports"),
    Option("run_id", "ID", "name of this run's directory", parse_run_id, "a timestamp"),
    Option("seed", "N", "sampling seed: each model call sends one drawn from it, the task and the turn", parse_non_negative_int, "none"),
    Option("sampling", "K=V,...", "sampling sent to the model, over the node's and the suites' "
           "(e.g. temperature=0,max_tokens=512)", parse_sampling, "node, then suite"),
    Option("max_error_rate", "X", "share of an environment's episodes that may error before its gates "
           "are an ERROR", parse_fraction, "suite, node, 0.05"),
    Option("resume", "RUN_DIR", "continue a killed or errored run: keep its scored episodes, run the "
           "missing and errored ones (a run directory, a run id, or latest); it plays the run's whole "
           "selection: -k, --agentgym-envs, --agentgym-tasks or paths that leave out an episode it has "
           "left to play are refused (exit 4)", parse_text, "none"),
    Option("shard", "I/N|auto", "run only the I-th of N slices of the episodes, into reports/<run_id>/"
           "shard-I-of-N (auto: from the batch scheduler's variables); join them with pytest-agentgym merge",
           parse_shard, "none"),
    Option("retries", "N", "retries of an episode after an infrastructure error", parse_non_negative_int, "1"),
    Option("nats", "URL", "publish events to this NATS server (nats://HOST:PORT or tls://HOST:PORT, signing "
           "in with ?creds=PATH, ?user=NAME&password_env=VAR, ?token_env=VAR, ...; docs/events.md)",
           parse_nats, "node"),
    Option("queue", "URL", "coordinate a fleet: each episode goes to this NATS JetStream work queue "
           "(nats://HOST:PORT[?name=NAME&ack_wait=S&max_deliver=N]) and `pytest-agentgym worker` "
           "processes play them", parse_queue, "none: played here"),
    Option("progress", "SECONDS|each|off", "a progress line (done per environment, success rate, "
           "errors, elapsed, ETA) every SECONDS, after each finished episode, or never",
           parse_progress, "30 on a terminal, 60 in a log, off with -qq"),
    Option("no_nats", None, "do not publish NATS events"),
    Option("notify", "URL,...", "when the run ends, POST a JSON summary (status, counts, per-environment "
           "figures, gate verdicts) to each URL (docs/notifications.md)", parse_notify, "none"),
    Option("no_report", None, "do not write report.html"),
    Option("preflight", None, "check model, environment servers and NATS, run no episode; "
           "--agentgym-dry-run is the same", aliases=("--agentgym-dry-run",)),
    Option("list_envs", None, "list configured environments with URL and health, run nothing"),
)

BY_NAME = {option.name: option for option in OPTIONS}

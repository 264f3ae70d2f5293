"""A suite runs a verifiers environment: ``environment: verifiers:<module>``.

The other direction of :mod:`.verifiers` (docs/training.md, "A suite runs a
verifiers environment"). A suite names a module that defines
``load_environment(**kwargs)`` returning a verifiers 0.4 ``Env``; collection
calls it with the suite's ``args`` and makes one item per example of its
taskset (and repeat). Each item plays its example through verifiers' own
rollout and rubric (``Env.run_slot``) against the run's model endpoint, and
becomes an episode record like any other:

* **reward**: the rubric's weighted reward of the episode's trace (the mean over
  its traces when the environment has several agents), what ``vf-eval`` reports;
* **success**: ``reward >= 1`` (the environment's success rule, as
  ``pytest-agentgym envs`` shows it); a suite's ``min_reward`` decides pass or
  fail as for any environment;
* **rounds and turns**: one turn per model reply of the trace, the whole reply
  as the action, the next user message as the feedback, the reward on the last;
* **errors**, by the boundary verifiers names: a ``ProviderError`` (the model
  endpoint failed or refused) is ``model``; the environment's own code
  (``EnvError``, ``TaskError`` from its rubric or hooks, ``ToolsetError``,
  ``SandboxError``) is ``env``; anything else is ``harness``. As in every run, an
  error is retried up to ``--agentgym-retries`` times, except a model's refusal
  (HTTP 4xx), and the episode budget (``episode_timeout``) is enforced: when it
  runs out after a reply the episode ends as ``timeout``, before any reply as
  ``model:EndpointTimeout``.

The environment runs in the harness's own process (verifiers' serving resources
are entered once, on the engine's loop, and left when the engine closes): its
spec says ``options.in_process``, so no server is started for it.

This module imports verifiers only when a suite names one, so a Python without
it (the project's main environment, CI) gets a collection error that says how to
install it, not an ImportError.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import sys
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.spec import VERIFIERS_PREFIX, EnvSpec, SuccessRule
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, Turn, outcome_of

if TYPE_CHECKING:  # the engine plays this adapter; only the request's type is needed here
    from pytest_agentgym.engine.episode import EpisodeRequest

#: The success rule of every verifiers environment (docs/training.md).
SUCCESS_RULE = "reward >= 1"
#: verifiers reads the model's API key from the variable it is told; this one is
#: never set, for an endpoint that needs no key (the reference agent, a local vLLM).
NO_KEY_VAR = "AGENTGYM_VERIFIERS_NO_API_KEY"
INSTALL_HINT = ("install the extra into this environment: pip install 'pytest-agentgym[verifiers]' "
                "(verifiers 0.4 pins openai 2.x, which the plugin takes; docs/training.md, verifiers)")
#: verifiers' error types by the side of this project's failure taxonomy they name
_ENV_ERRORS = {"EnvError", "TaskError", "ToolsetError", "SandboxError"}


class VerifiersSuiteError(ValueError):
    """A verifiers environment that cannot be loaded; the message says why and what to do."""


class LoadedEnvironment:
    """One verifiers environment of the run: its module, its arguments, the ``Env``
    and its examples (tasks in taskset order: the task index is the position)."""

    def __init__(self, name: str, module: str, args: dict[str, Any], env: Any, tasks: list, version: str) -> None:
        self.name, self.module, self.args, self.env, self.tasks = name, module, args, env, tasks
        self.version = version

    def spec(self) -> EnvSpec:
        return EnvSpec(name=self.name, category="lightweight", port=0, success=SuccessRule(SUCCESS_RULE),
                       tasks=f"0-{len(self.tasks) - 1}",
                       description=f"verifiers environment {self.module} ({len(self.tasks)} examples, "
                                   f"verifiers {self.version}), played in-process",
                       options={"in_process": True, "module": self.module, "args": dict(self.args)})


#: (name, args as JSON) -> the environment loaded for them: a process (collection, the
#: warm-up, an xdist controller) loads each once
_LOADED: dict[tuple[str, str], LoadedEnvironment] = {}


def load_for_suite(data: dict[str, Any], specs: dict[str, EnvSpec] | None) -> dict[str, Any]:
    """A suite's keys (``data``) once its environment is loaded and its spec put into
    ``specs`` (the run's environments): ``tasks`` defaults to every example."""
    args = data.get("args") or {}
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise VerifiersSuiteError(f"'args' must be a mapping of load_environment's keyword arguments, "
                                  f"e.g. {{count: 10}}; got {args!r}")
    if data.get("max_rounds") is not None:
        raise VerifiersSuiteError("a verifiers environment sets its own turn limits (its agents' max_turns): "
                                  "remove max_rounds, or pass load_environment an argument for it in 'args'")
    name = data["environment"]
    earlier = specs.get(name) if specs is not None else None
    if earlier is not None and earlier.options.get("args") != args:
        raise VerifiersSuiteError(
            f"environment {name} is loaded with args {earlier.options.get('args')!r} by another suite and "
            f"{args!r} here; a run holds one environment per module: give both suites the same args")
    loaded = load(name, args)
    if specs is not None:
        specs[name] = loaded.spec()
        # the adapter that plays this run's examples (the registry is looked up by name)
        register(type(f"VerifiersAdapter[{loaded.module}]", (VerifiersAdapter,), {"name": name, "loaded": loaded}))
    return {"tasks": f"0-{len(loaded.tasks) - 1}", **data}


def load(name: str, args: dict[str, Any]) -> LoadedEnvironment:
    """The environment ``verifiers:<module>`` built by ``<module>.load_environment(**args)``;
    its spec joins the run's environments and its adapter the registry."""
    key = (name, json.dumps(args, sort_keys=True, default=repr))
    if key in _LOADED:
        return _LOADED[key]
    module_name = name[len(VERIFIERS_PREFIX):].strip()
    if not module_name:
        raise VerifiersSuiteError(f"environment {name!r} names no module; write verifiers:<module>, "
                                  f"e.g. verifiers:my_env")
    try:
        import verifiers
        import verifiers.v1 as vf
    except ImportError:
        raise VerifiersSuiteError(f"environment {name} needs the verifiers package, which this Python "
                                  f"({sys.executable}) does not have; {INSTALL_HINT}") from None
    module = _import(module_name, name)
    factory = getattr(module, "load_environment", None)
    if not callable(factory):
        raise VerifiersSuiteError(
            f"environment {name}: module {module_name} ({getattr(module, '__file__', '?')}) has no "
            f"load_environment function; a verifiers environment module defines load_environment(**kwargs) "
            f"returning a verifiers.v1.Env")
    try:
        env = factory(**args)
    except Exception as exc:  # noqa: BLE001 - the module's own failure, reported with its kind
        raise VerifiersSuiteError(f"environment {name}: {module_name}.load_environment(**{args!r}) raised "
                                  f"{type(exc).__name__}: {exc}; check the suite's args") from None
    if not isinstance(env, vf.Env):
        raise VerifiersSuiteError(f"environment {name}: {module_name}.load_environment() returned a "
                                  f"{type(env).__name__}, not a verifiers.v1.Env")
    if not env.taskset.bounded:
        raise VerifiersSuiteError(f"environment {name}: its taskset has no end; give load_environment an "
                                  f"argument (in the suite's args) that bounds it")
    tasks = list(env.taskset)
    if not tasks:
        raise VerifiersSuiteError(f"environment {name}: its taskset has no examples with args {args!r}")
    loaded = LoadedEnvironment(name, module_name, args, env, tasks, getattr(verifiers, "__version__", "?"))
    _LOADED[key] = loaded
    return loaded


def _import(module_name: str, name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise VerifiersSuiteError(
                f"environment {name}: there is no module {module_name} on this Python's path; install the "
                f"environment's package, or put the directory holding {module_name}.py on PYTHONPATH") from None
        raise VerifiersSuiteError(f"environment {name}: importing {module_name} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a module that breaks on import
        raise VerifiersSuiteError(f"environment {name}: importing {module_name} failed: "
                                  f"{type(exc).__name__}: {exc}") from None


class VerifiersAdapter:
    """Plays the examples of one loaded verifiers environment (a subclass per module,
    made by :func:`load`); the engine asks :meth:`play` instead of its own loop."""

    name: str
    loaded: LoadedEnvironment

    def __init__(self, template_path: Any = None) -> None:
        if template_path is not None:
            raise ValueError(f"environment {self.name}: a verifiers environment writes its own prompts; "
                             f"it takes no prompt_template")
        identity = json.dumps({"module": self.loaded.module, "args": self.loaded.args,
                               "verifiers": self.loaded.version}, sort_keys=True, default=str)
        #: what a resumed run compares: the module, its args and the verifiers version
        self.prompt_sha256 = hashlib.sha256(identity.encode()).hexdigest()
        self._serving: Any = None
        self._lock: asyncio.Lock | None = None

    async def _serve(self) -> None:
        """Enter the environment's serving resources (interception, shared tools) once."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._serving is None:
                serving = self.loaded.env.serving()
                await serving.__aenter__()
                self._serving = serving

    async def aclose(self) -> None:
        if self._serving is not None:
            serving, self._serving = self._serving, None
            await serving.__aexit__(None, None, None)

    async def play(self, request: EpisodeRequest, model: Any) -> EpisodeRecord:
        """One example as one episode, retried like any episode on an infrastructure error."""
        import verifiers.v1 as vf
        from verifiers.v1.env import RunSlot

        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        started = time.monotonic()
        ctx = vf.ModelContext(
            model=model.name,
            client=vf.EvalClientConfig(base_url=model.base_url,
                                       api_key_var=getattr(model, "api_key_env", None) or NO_KEY_VAR),
            sampling=vf.SamplingConfig(**{k: v for k, v in request.sampling.items() if v is not None}))
        retried: list[ErrorInfo] = []
        while True:
            slot = RunSlot(self.loaded.tasks[request.task_index])
            stop, error, retry = "done", None, True
            try:
                await self._serve()
                episode = await asyncio.wait_for(self.loaded.env.run_slot(slot, ctx), request.limits.timeout_s)
                traces = list(episode.traces)
                error, retry = episode_error(episode)
            except (asyncio.TimeoutError, TimeoutError):
                traces = list(slot.traces)
                if not any(trace.num_turns for trace in traces):
                    error = ErrorInfo("EndpointTimeout", f"model {model.name} at {model.base_url}: no reply within "
                                      f"the episode budget of {request.limits.timeout_s:g} s; check the model "
                                      f"endpoint, or raise episode_timeout if the model is only slow", "model")
                stop = "timeout"
            except Exception as exc:  # noqa: BLE001 - every failure is stored as data
                traces, error = list(slot.traces), ErrorInfo.from_exception(exc, "harness")
            if error is not None and retry and len(retried) < request.limits.retries:
                retried.append(error)
                continue
            break
        return self._record(request, model, traces, "error" if error else stop, error, retried,
                            started_at, time.monotonic() - started)

    def _record(self, request: EpisodeRequest, model: Any, traces: list, stop: str, error: ErrorInfo | None,
                retried: list[ErrorInfo], started_at: str, duration_s: float) -> EpisodeRecord:
        scored = [trace for trace in traces if trace.rewards]
        reward = None if error else (sum(t.reward for t in scored) / len(scored) if scored else 0.0)
        success = error is None and request.spec.success(reward, None)
        turns = tuple(turn for trace in traces for turn in turns_of(trace, reward or 0.0))
        return EpisodeRecord(
            run_id=request.run_id, env=request.spec.name, task_index=request.task_index, repeat=request.repeat,
            reward=reward, success=success, rounds=len(turns), stop_reason=stop,  # type: ignore[arg-type]
            started_at=started_at, duration_s=round(duration_s, 3), model=model.name, turns=turns,
            error=error, retried=tuple(retried),
            prompt_tokens=sum(t.prompt_tokens or 0 for t in turns),
            completion_tokens=sum(t.completion_tokens or 0 for t in turns),
            min_reward=request.min_reward, outcome=outcome_of(error, reward, request.min_reward, success),
            max_rounds=None, sampling=dict(request.sampling), nodeid=request.nodeid,  # the env's own limits
            checkpoint=request.checkpoint, node=request.node)


def episode_error(episode: Any) -> tuple[ErrorInfo | None, bool]:
    """The episode's failure in this project's taxonomy (None when it played to the
    end), and whether a fresh attempt could end differently (not a model's HTTP 4xx)."""
    if episode.ok:
        return None, True
    errors = [*episode.errors, *(e for trace in episode.traces for e in trace.errors)]
    if not errors:
        return ErrorInfo("EnvError", "the verifiers episode did not complete and recorded no error", "env"), True
    first = errors[0]
    where = "model" if first.type == "ProviderError" else "env" if first.type in _ENV_ERRORS else "harness"
    refused = where == "model" and first.status_code is not None and 400 <= first.status_code < 500 \
        and first.status_code not in (408, 429)
    status = f" (HTTP {first.status_code})" if first.status_code else ""
    return ErrorInfo(first.type, f"verifiers {first.type}{status}: {first.message}", where), not refused  # type: ignore[arg-type]


def turns_of(trace: Any, reward: float) -> list[Turn]:
    """The trace's conversation as turns: one per model reply (its last branch, the
    whole conversation), what came before it since the previous reply as the
    observation, what came after as the feedback; the episode's reward on the last."""
    from verifiers.v1.types import content_text

    calls = {id(trace.nodes[c.node]): c for c in trace.calls if c.node is not None and c.node < len(trace.nodes)}
    branches = trace.branches
    nodes = branches[-1].nodes if branches else trace.nodes
    said: list[tuple[str, str, Any]] = []  # (observation, reply, model call)
    pending: list[str] = []
    for node in nodes:
        text = content_text(node.message.content) if node.message.content is not None else ""
        if node.message.role == "assistant":
            said.append(("\n\n".join(pending), text, calls.get(id(node))))
            pending = []
        elif text:
            pending.append(text)
    turns = []
    for index, (observation, reply, call) in enumerate(said):
        last = index == len(said) - 1
        usage = call.usage if call is not None else None
        turns.append(Turn(index=index, observation=observation, reply=reply, action=reply,
                          feedback="\n\n".join(pending) if last else said[index + 1][0],
                          reward=reward if last else 0.0, done=last,
                          model_latency_s=round(call.time.duration, 4) if call is not None else 0.0,
                          env_latency_s=0.0, prompt_tokens=usage.prompt_tokens if usage else None,
                          completion_tokens=usage.completion_tokens if usage else None))
    return turns

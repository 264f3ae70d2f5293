"""``--agentgym-list-envs`` and ``--agentgym-preflight`` (alias ``--agentgym-dry-run``):
look, start nothing, run no episode.

Preflight is the field runner's dry run. It checks every endpoint of the
model chain (not only up to the first healthy one) with the run's own check
(model/endpoints.py ``probe``: its health, then one real chat with its model and
``max_tokens: 1``) and says which one a run would use; then the environment
servers the suites need, as the node's servers mode would provide them, and NATS.
It prints one line per check and returns 0 when a run could go ahead: some
endpoint of the chain can chat and no needed environment server is down (an
unreachable NATS only sends events to the outbox, so it is reported, not
counted); 3 when a run would play nothing of what is missing (NOT PLAYED, exit 3,
as the run itself would end); 1 for any other problem (a suite that would not load).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO


def list_envs(settings: Any, out: TextIO | None = None) -> int:
    from pytest_agentgym.servers import status

    out = out or sys.stdout
    status.render(status.check_all(settings.env_specs, "127.0.0.1", 1.0, settings.servers_mode,
                                   settings.skip_envs), out)
    return 0


@dataclass(frozen=True)
class EndpointCheck:
    """One endpoint of the chain: ``label`` (primary, fallback N), what it is, and whether a run could use it."""

    label: str
    describe: str
    usable: bool
    state: str  # "healthy", "launchable (...)", "unhealthy: ...", "unusable: ..."


def _check_endpoint(position: int, endpoint: Any, model: Any) -> EndpointCheck:
    """Like ``choose_endpoint`` decides, without launching anything."""
    from pytest_agentgym.model.call_settings import read_api_key
    from pytest_agentgym.model.endpoints import probe

    label = "primary" if position == 0 else f"fallback {position}"
    if endpoint.launched:
        if endpoint.kind == "vllm":
            if not endpoint.checkpoint:
                return EndpointCheck(label, endpoint.describe(), False,
                                     "unusable: no checkpoint; pass --agentgym-checkpoint PATH")
            from pytest_agentgym.model.checkpoint import check_checkpoint

            problems = check_checkpoint(endpoint.checkpoint, model.vllm)  # as the launch reads it
            if problems:  # what vLLM would refuse after a minute or more, one line each
                return EndpointCheck(label, endpoint.describe(), False,
                                     f"unusable: checkpoint {endpoint.checkpoint} cannot be served:"
                                     + "".join(f"\n      {problem}" for problem in problems))
        return EndpointCheck(label, endpoint.describe(), True,
                             f"launchable ({endpoint.kind} is started by the plugin)")
    try:
        key_env = model.key_env(endpoint)
        key = read_api_key(key_env) if key_env else None
    except ValueError as exc:
        return EndpointCheck(label, endpoint.describe(), False, f"unusable: {exc}")
    health = probe(endpoint, timeout=model.health_timeout, api_key=key, chat_timeout=model.request_timeout)
    return EndpointCheck(label, endpoint.describe(), health.ok,
                         (f"healthy ({health.checked_by})" if health.checked_by else "healthy") if health.ok
                         else f"unhealthy: {health.reason}")


def check_model_chain(model: Any) -> list[EndpointCheck]:
    """Every endpoint of ``model.endpoints`` (a ``ModelSettings``), probed at once, in chain order."""
    jobs = list(enumerate(model.endpoints))
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(lambda job: _check_endpoint(job[0], job[1], model), jobs))


def _nats_check(url: str, timeout: float = 1.0) -> str | None:
    """None when a NATS server answers its INFO line at ``url``, else why not."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(url if "://" in url else f"nats://{url}")
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 4222), timeout) as sock:
            sock.settimeout(timeout)
            greeting = sock.recv(4096)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if greeting.startswith(b"INFO") else f"not a NATS server (said {greeting[:40]!r})"


def preflight(settings: Any, paths: list[str] | None = None, out: TextIO | None = None,
              model: Any = None, places: Any = None) -> int:
    """Check what a run of the suites under ``paths`` would need (every environment
    that is not skipped when no suite is found there). ``places``: where the user said
    suites are (plugin/suite_places.py), whose broken files are named as collection
    would stop at them. ``model``: the run's
    ``ModelSettings`` (default: the profile's, with the command line applied as a
    run applies it: --agentgym-base-url, --agentgym-model, --agentgym-checkpoint, ...)."""
    from pytest_agentgym.servers import status
    from pytest_agentgym.servers.modes import SERVERS_MODES

    out = out or sys.stdout
    problems = 0
    not_played = False  # what a run would end as NOT PLAYED, exit 3
    out.write(f"agentgym preflight: node {settings.node} ({settings.node_file})\n")
    if model is None:
        from pytest_agentgym.run.evaluation import EvaluationRun

        model = EvaluationRun(settings).model_settings()
    checks = check_model_chain(model)
    for check in checks:
        out.write(f"  model {check.label}: {check.describe}: {check.state}\n")
    chosen = next((check for check in checks if check.usable), None)
    if chosen is None:
        problems += 1
        not_played = True
        out.write("  would use: nothing, no endpoint of the chain is usable: a run would play no episode "
                  "(NOT PLAYED, exit 3)\n")
    else:
        out.write(f"  would use: {chosen.label} {chosen.describe}\n")
    from pytest_agentgym.config.suites import suites_under

    broken: list[str] = []
    names = {suite.environment for suite in suites_under(paths or [], settings, broken, places=places)}
    for error in broken:  # a run would stop at collection with this usage error
        problems += 1
        out.write(f"  suite {error}\n")
    wanted = {n: s for n, s in settings.env_specs.items()
              if (n in names if names else n not in settings.skip_envs)
              and (not settings.envs or n.lower() in {e.lower() for e in settings.envs})}
    out.write(f"  servers {settings.servers_mode}: {SERVERS_MODES.get(settings.servers_mode, '')}\n")
    for name in [n for n, spec in wanted.items() if spec.in_process]:  # loaded already, by suites_under
        out.write(f"  env {name}: no server: {wanted.pop(name).description}\n")
    for st in status.check_all(wanted, "127.0.0.1", 1.0, settings.servers_mode):
        out.write(f"  env {st.name}: {st.url}: {st.health}" + (f" ({st.detail})" if st.detail else "") + "\n")
        if st.health == "down":
            problems += 1
            not_played = True
    if settings.nats:
        reason = _nats_check(settings.nats)
        out.write(f"  nats {settings.nats}: {'reachable' if reason is None else 'unreachable: ' + reason}"
                  + (" (events would go to the outbox)" if reason else "") + "\n")
    else:
        out.write("  nats: off\n")
    out.write("preflight: " + ("ready" if problems == 0 else f"{problems} problem(s)") + "\n")
    return 0 if problems == 0 else 3 if not_played else 1

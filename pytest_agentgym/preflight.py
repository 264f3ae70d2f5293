"""``--agentgym-list-envs`` and ``--agentgym-preflight``: look, start nothing, run no episode.

Preflight is the field runner's dry run: is the model endpoint healthy (or
launchable), are the environment servers up (or spawnable), is NATS reachable?
It prints one line per check and returns 0 when everything needed is usable.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


def list_envs(settings: Any, out: TextIO | None = None) -> int:
    from pytest_agentgym.servers import status

    out = out or sys.stdout
    status.render(status.check_all(settings.env_specs, "127.0.0.1", 1.0), out)
    return 0


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


def preflight(settings: Any, paths: list[str] | None = None, out: TextIO | None = None) -> int:
    """Check what a run of the suites under ``paths`` would need (every environment
    that is not skipped when no suite is found there)."""
    from pytest_agentgym.model.endpoints import ModelSettings, probe
    from pytest_agentgym.servers import status

    out = out or sys.stdout
    problems = 0
    out.write(f"agentgym preflight: node {settings.node} ({settings.node_file})\n")
    model = ModelSettings.from_profile(settings.profile, where=str(settings.node_file))
    healthy = False
    for position, endpoint in enumerate(model.endpoints):
        label = "primary" if position == 0 else f"fallback {position}"
        if endpoint.launched:
            line, healthy = f"launchable ({endpoint.kind} is started by the plugin)", True
        else:
            health = probe(endpoint, timeout=model.health_timeout)
            line = "healthy" if health.ok else f"unhealthy: {health.reason}"
            healthy = healthy or health.ok
        out.write(f"  model {label}: {endpoint.describe()}: {line}\n")
        if healthy:
            break
    if not healthy:
        problems += 1
    from pytest_agentgym.collect import suites_under

    names = {suite.environment for suite in suites_under(paths or [], settings)}
    wanted = {n: s for n, s in settings.env_specs.items()
              if (n in names if names else n not in settings.skip_envs)
              and (not settings.envs or n.lower() in {e.lower() for e in settings.envs})}
    for st in status.check_all(wanted, "127.0.0.1", 1.0):
        out.write(f"  env {st.name}: {st.url}: {st.health}" + (f" ({st.detail})" if st.detail else "") + "\n")
        if st.health == "down":
            problems += 1
    if settings.nats:
        reason = _nats_check(settings.nats)
        out.write(f"  nats {settings.nats}: {'reachable' if reason is None else 'unreachable: ' + reason}"
                  + (" (events would go to the outbox)" if reason else "") + "\n")
    else:
        out.write("  nats: off\n")
    out.write("preflight: " + ("ready" if problems == 0 else f"{problems} problem(s)") + "\n")
    return 0 if problems == 0 else 1

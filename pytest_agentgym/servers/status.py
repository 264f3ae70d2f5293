"""`pytest-agentgym envs`: every configured environment, where its server is, and its health.

Health is one of:

* ``up``: something answers HTTP at the environment's URL (``GET /``, any status);
* ``spawnable``: nothing answers, but this installation can start it (an
  embedded server, or the real command is on PATH);
* ``down``: nothing answers and nothing here can start it (the line says what to do).

All probes run at once, each bounded by ``timeout`` seconds, so the whole
listing takes about ``timeout`` seconds however many environments there are.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Mapping, TextIO

from pytest_agentgym.envs.spec import EnvConfigError, EnvSpec, load_default_specs, load_specs
from pytest_agentgym.servers.pool import plan_server
from pytest_agentgym.servers.health import probe

Health = Literal["up", "spawnable", "down"]


@dataclass(frozen=True)
class EnvStatus:
    name: str
    category: str
    url: str
    health: Health
    detail: str


def check(spec: EnvSpec, host: str, timeout: float) -> EnvStatus:
    """Probe one environment's server and say how it is, or would be, provided."""
    plan = plan_server(spec, host=host)
    shown_url = spec.base_url(plan.url)
    reason = probe(plan.url, timeout)
    if reason is None:
        source = "envs url" if plan.how == "attach" else "running"
        return EnvStatus(spec.name, spec.category, shown_url, "up", source)
    if plan.how == "attach":
        detail = f"no answer ({reason}); check envs.{spec.name}.url or start that server"
        return EnvStatus(spec.name, spec.category, shown_url, "down", detail)
    if plan.how in ("embedded", "command"):
        return EnvStatus(spec.name, spec.category, shown_url, "spawnable", plan.detail)
    hint = plan.detail.split("cannot be started here: ", 1)[-1]
    return EnvStatus(spec.name, spec.category, shown_url, "down", f"{reason}; {hint}")


def check_all(specs: Mapping[str, EnvSpec], host: str, timeout: float) -> list[EnvStatus]:
    """Probe every environment concurrently; results in configuration order."""
    if not specs:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(specs))) as pool:
        return list(pool.map(lambda spec: check(spec, host, timeout), specs.values()))


def render(statuses: list[EnvStatus], out: TextIO) -> None:
    """A plain table: NAME CATEGORY URL HEALTH DETAIL."""
    header = ("ENVIRONMENT", "CATEGORY", "URL", "HEALTH", "DETAIL")
    rows = [header] + [(s.name, s.category, s.url, s.health, s.detail) for s in statuses]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(4)] + [row[4]]
        out.write("  ".join(cells).rstrip() + "\n")


def main(config: str | None, host: str, timeout: float, out: TextIO | None = None) -> int:
    """Print the table; 0 when it could be made, 2 when the configuration is bad."""
    out = out or sys.stdout
    if timeout <= 0:
        print(f"pytest-agentgym envs: --timeout must be positive, got {timeout:g}", file=sys.stderr)
        return 2
    try:
        specs = load_specs(config) if config else load_default_specs()
    except EnvConfigError as exc:
        print(f"pytest-agentgym envs: {exc}", file=sys.stderr)
        return 2
    statuses = check_all(specs, host, timeout)
    render(statuses, out)
    counts = {h: sum(s.health == h for s in statuses) for h in ("up", "spawnable", "down")}
    out.write(f"\n{counts['up']} up, {counts['spawnable']} spawnable, {counts['down']} down\n")
    return 0

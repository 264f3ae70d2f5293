"""Where each environment's server is and its health (the table of `pytest-agentgym envs`,
cli/envs.py, and of --agentgym-list-envs).

Health is one of:

* ``up``: something answers HTTP at the environment's URL (``GET /``, any status);
* ``spawnable``: the run would start it (an embedded server, or the real
  command is on PATH);
* ``down``: the run could not have it (the detail says what to do);
* ``skipped``: the node profile's ``envs.skip`` lists it; not probed.

A node profile's view of them (``pytest-agentgym envs --node``) takes its
``envs.overrides``, its skip list, and its servers mode, which decides what a
run does with an environment that has no ``url``:

* ``auto``: attach to what answers on the configured port, else spawn;
* ``spawn``: always a fresh server on a free port (the configured port is not probed);
* ``attach``: the configured port must answer.

All probes run at once, each bounded by ``timeout`` seconds, so the whole
listing takes about ``timeout`` seconds however many environments there are.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Collection, Literal, Mapping, TextIO

from pytest_agentgym.envs.spec import EnvSpec
from pytest_agentgym.servers.pool import plan_server
from pytest_agentgym.process.health import probe

Health = Literal["up", "spawnable", "down", "skipped"]
HEALTHS: tuple[Health, ...] = ("up", "spawnable", "down", "skipped")
#: What a run does with an environment that has no url, per node ``envs.servers``.


@dataclass(frozen=True)
class EnvStatus:
    name: str
    category: str
    url: str
    health: Health
    detail: str


def check(spec: EnvSpec, host: str, timeout: float, servers: str = "auto") -> EnvStatus:
    """Probe one environment's server and say how a run in ``servers`` mode would have it."""
    plan = plan_server(spec, host=host)
    if servers == "attach" and plan.how != "attach":
        plan = plan_server(spec.with_overrides(url=plan.url), host=host)
    shown_url = spec.base_url(plan.url)
    if servers == "spawn" and plan.how != "attach":
        fresh = spec.base_url(plan.url.rsplit(":", 1)[0] + ":<free-port>")
        if plan.how in ("embedded", "command"):
            return EnvStatus(spec.name, spec.category, fresh, "spawnable", f"fresh on a free port: {plan.detail}")
        hint = plan.detail.split("cannot be started here: ", 1)[-1]
        return EnvStatus(spec.name, spec.category, fresh, "down", f"cannot be started here: {hint}")
    if len(spec.replica_urls) > 1 and plan.how == "attach":  # a list of running servers: each must answer
        shown = ", ".join(spec.base_url(url) for url in spec.replica_urls)
        silent = [f"{url} ({why})" for url in spec.replica_urls if (why := probe(url, timeout)) is not None]
        if not silent:
            return EnvStatus(spec.name, spec.category, shown, "up", f"envs url: {len(spec.replica_urls)} replicas")
        return EnvStatus(spec.name, spec.category, shown, "down",
                         f"no answer from {', '.join(silent)}; start those servers or take them out of "
                         f"envs.{spec.name}.url")
    reason = probe(plan.url, timeout)
    if reason is None:
        source = "envs url" if spec.url else ("attached" if plan.how == "attach" else "running")
        return EnvStatus(spec.name, spec.category, shown_url, "up", source)
    if plan.how == "attach":
        where = f"check envs.{spec.name}.url or start that server" if spec.url else (
            f"servers mode attach: start it on port {spec.port} or set envs.{spec.name}.url")
        return EnvStatus(spec.name, spec.category, shown_url, "down", f"no answer ({reason}); {where}")
    if plan.how in ("embedded", "command"):
        return EnvStatus(spec.name, spec.category, shown_url, "spawnable", plan.detail)
    hint = plan.detail.split("cannot be started here: ", 1)[-1]
    return EnvStatus(spec.name, spec.category, shown_url, "down", f"{reason}; {hint}")


def _skipped(spec: EnvSpec, host: str) -> EnvStatus:
    url = spec.url or spec.default_url(host)
    return EnvStatus(spec.name, spec.category, spec.base_url(url), "skipped", "in the node's envs.skip")


def check_all(specs: Mapping[str, EnvSpec], host: str, timeout: float, servers: str = "auto",
              skip: Collection[str] = ()) -> list[EnvStatus]:
    """Probe every environment concurrently (those in ``skip`` are not probed);
    results in configuration order."""
    if not specs:
        return []

    def one(spec: EnvSpec) -> EnvStatus:
        return _skipped(spec, host) if spec.name in skip else check(spec, host, timeout, servers)

    with ThreadPoolExecutor(max_workers=min(16, len(specs))) as pool:
        return list(pool.map(one, specs.values()))


def render(statuses: list[EnvStatus], out: TextIO) -> None:
    """A plain table: NAME CATEGORY URL HEALTH DETAIL."""
    header = ("ENVIRONMENT", "CATEGORY", "URL", "HEALTH", "DETAIL")
    rows = [header] + [(s.name, s.category, s.url, s.health, s.detail) for s in statuses]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(4)] + [row[4]]
        out.write("  ".join(cells).rstrip() + "\n")

"""`pytest-agentgym envs`: every configured environment, where its server is, and its health.

Health is one of:

* ``up``: something answers HTTP at the environment's URL (``GET /``, any status);
* ``spawnable``: the run would start it (an embedded server, or the real
  command is on PATH);
* ``down``: the run could not have it (the detail says what to do);
* ``skipped``: the node profile's ``envs.skip`` lists it; not probed.

With ``--node NAME|PATH`` the listing is the node profile's view, resolved like
the plugin resolves ``--agentgym-node`` (the current directory as the rootdir):
its ``envs.overrides``, its skip list, and its servers mode, which decides what
a run does with an environment that has no ``url``:

* ``auto``: attach to what answers on the configured port, else spawn;
* ``spawn``: always a fresh server on a free port (the configured port is not probed);
* ``attach``: the configured port must answer.

All probes run at once, each bounded by ``timeout`` seconds, so the whole
listing takes about ``timeout`` seconds however many environments there are.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Literal, Mapping, TextIO

from pytest_agentgym.envs.spec import EnvConfigError, EnvSpec, load_default_specs, load_specs
from pytest_agentgym.servers.pool import plan_server
from pytest_agentgym.servers.health import probe

Health = Literal["up", "spawnable", "down", "skipped"]
HEALTHS: tuple[Health, ...] = ("up", "spawnable", "down", "skipped")
#: What a run does with an environment that has no url, per node ``envs.servers``.
SERVERS_MODES = {
    "auto": "attach to what answers on the configured port, spawn the rest",
    "spawn": "start every server fresh on a free port",
    "attach": "every server must already answer on its configured port",
}


@dataclass(frozen=True)
class EnvStatus:
    name: str
    category: str
    url: str
    health: Health
    detail: str


@dataclass(frozen=True)
class NodeView:
    """What a node profile says about the environment servers."""

    name: str
    file: Path
    specs: dict[str, EnvSpec]
    servers: str  # auto | spawn | attach
    skip: tuple[str, ...]

    def describe(self) -> str:
        line = f"node {self.name} ({self.file}): servers {self.servers} ({SERVERS_MODES[self.servers]})"
        return line + (f"; skips {', '.join(self.skip)}" if self.skip else "")


def load_node(node: str, rootdir: Path) -> NodeView:
    """The node profile ``node`` (a name or a YAML path) as the plugin resolves it.
    Raises ``pytest.UsageError`` (unknown node, bad profile) naming the fix."""
    import pytest

    from pytest_agentgym.config.settings import find_node_file, load_env_specs, load_profile

    path = find_node_file(node, rootdir)
    profile = load_profile(path)
    specs = load_env_specs(rootdir, profile, path)
    envs = profile.get("envs") or {}
    servers = envs.get("servers", "spawn")
    if servers not in SERVERS_MODES:
        raise pytest.UsageError(f"{path}: envs.servers is {servers!r}; use one of "
                                + ", ".join(f"{m!r} ({why})" for m, why in SERVERS_MODES.items()))
    return NodeView(str(profile.get("name", node)), path, specs, servers, tuple(envs.get("skip") or ()))


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


def main(config: str | None, host: str, timeout: float, out: TextIO | None = None,
         node: str | None = None, rootdir: Path | None = None) -> int:
    """Print the table; 0 when it could be made, 2 when the configuration is bad.
    ``node``: list what that node profile sees (resolved from ``rootdir``, default the
    current directory) instead of ``config`` or the shipped envs.yaml."""
    out = out or sys.stdout
    if timeout <= 0:
        print(f"pytest-agentgym envs: --timeout must be positive, got {timeout:g}", file=sys.stderr)
        return 2
    if node is not None:
        import pytest

        try:
            view = load_node(node, rootdir or Path.cwd())
        except pytest.UsageError as exc:
            reason = str(exc).removeprefix(f"--agentgym-node={node}: ")
            print(f"pytest-agentgym envs --node {node}: {reason}", file=sys.stderr)
            return 2
        out.write(view.describe() + "\n")
        statuses = check_all(view.specs, host, timeout, view.servers, view.skip)
    else:
        try:
            specs = load_specs(config) if config else load_default_specs()
        except EnvConfigError as exc:
            print(f"pytest-agentgym envs: {exc}", file=sys.stderr)
            return 2
        statuses = check_all(specs, host, timeout)
    render(statuses, out)
    counts = [f"{sum(s.health == h for s in statuses)} {h}" for h in HEALTHS
              if h != "skipped" or node is not None]
    out.write("\n" + ", ".join(counts) + "\n")
    return 0

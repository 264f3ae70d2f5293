"""`pytest-agentgym envs`: every configured environment's server, probed, in a table
(servers/status.py); with ``--node NAME``, as that node profile would have them."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pytest_agentgym.config.profile import NodeProfile, ProfileError
from pytest_agentgym.envs.spec import EnvConfigError, EnvSpec, load_default_specs, load_specs
from pytest_agentgym.servers.modes import SERVERS_MODES
from pytest_agentgym.servers.status import HEALTHS, check_all, render


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
    Raises :class:`~pytest_agentgym.config.profile.ProfileError` naming the fix."""
    profile = NodeProfile.load(node, rootdir, flag="--node")
    return NodeView(profile.name, profile.file, profile.specs, profile.servers_mode, profile.skip)


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
        try:
            view = load_node(node, rootdir or Path.cwd())
        except ProfileError as exc:
            print(f"pytest-agentgym envs --node {node}: {exc.reason}", file=sys.stderr)
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

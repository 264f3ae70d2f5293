"""``pytest_agentgym.evaluate``: a run from inside a training script, as a function.

A training loop that evaluates "every N steps" wants the numbers back, not a
process to parse. :func:`evaluate` runs the same pytest session as the command
line (``pytest.main`` in this process, so the same suites, options, gates,
baseline comparison, run directory and report), and hands back what the run
concluded: per-environment summaries, the gate and baseline verdicts, the run
directory and the exit status. Every call is a whole run: its servers, endpoint
and threads are stopped when it returns, so it can be called again and again in
one process (docs/training.md).
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pytest


@dataclass(frozen=True)
class Evaluation:
    """What one :func:`evaluate` call concluded."""

    #: pytest's exit status: 0 every gate passed, 1 an episode or gate failed, 2 interrupted,
    #: 3 NOT PLAYED or an internal error, 4 a usage error (bad options), 5 nothing selected
    exit_code: int
    #: the run directory (run.json, episodes.jsonl, report.html); None when the run never began
    run_dir: Path | None
    #: env -> :class:`~pytest_agentgym.results.aggregate.EnvSummary` (mean_reward, success_rate, ...)
    summaries: dict[str, Any] = field(default_factory=dict)
    #: every gate and baseline verdict (:class:`~pytest_agentgym.results.gates.GateVerdict`)
    verdicts: list[Any] = field(default_factory=list)
    #: what pytest and the plugin wrote to the terminal, kept here by a quiet call ("" otherwise)
    output: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Per environment, the figures a training log wants: ``mean_reward``,
        ``success_rate``, ``episodes``, ``errors``, ``mean_rounds``."""
        return {env: {"mean_reward": s.mean_reward, "success_rate": s.success_rate, "episodes": s.episodes,
                      "errors": s.errors, "mean_rounds": s.mean_rounds} for env, s in self.summaries.items()}


class _Collector:
    """A plugin of one :func:`evaluate` call: keeps what the run hands its hook."""

    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.summaries: dict[str, Any] = {}
        self.verdicts: list[Any] = []

    @pytest.hookimpl
    def pytest_agentgym_run_finished(self, config: pytest.Config, summaries: dict, verdicts: list) -> None:
        from pytest_agentgym.plugin.stash import RUN_KEY

        self.summaries, self.verdicts = dict(summaries), list(verdicts)
        run = config.stash.get(RUN_KEY, None)
        self.run_dir = Path(run.run_dir.path) if run is not None else None


class _Quiet:
    """A plugin of a quiet :func:`evaluate` call: pytest's terminal reporter, made at
    configure time on ``sys.stdout``, is made on a buffer instead. Everything pytest and the
    plugin print goes through it; ``sys.stdout`` itself is the buffer only while pytest
    configures (first and last of that hook's implementations)."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.stdout: Any = None

    @pytest.hookimpl(tryfirst=True, specname="pytest_configure")
    def pytest_configure_first(self, config: pytest.Config) -> None:
        self.stdout, sys.stdout = sys.stdout, self.buffer

    @pytest.hookimpl(trylast=True, specname="pytest_configure")
    def pytest_configure_last(self, config: pytest.Config) -> None:
        self.restore()

    def restore(self) -> None:
        if self.stdout is not None:
            sys.stdout, self.stdout = self.stdout, None


#: The exit statuses of a run that was judged (every gate passed; an episode or a gate failed).
_JUDGED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


def evaluate(*paths: str | Path, pytest_args: Sequence[str] = (), quiet: bool = True,
             **options: Any) -> Evaluation:
    """Run the suites at ``paths`` (files or directories, as on the command line) now,
    in this process, and return what the run concluded.

    Keyword options are the plugin's own, by the name of their flag without
    ``--agentgym-`` (``node="4090"``, ``checkpoint=...``, ``baseline=...``,
    ``run_id=...``, ``max_rounds=10``; flags take True: ``stop_when_decided=True``);
    None leaves an option out. Anything else goes in ``pytest_args`` as on the command
    line (``["-k", "Maze"]``).

    ``quiet`` (the default) prints nothing for a run that was judged (exit status 0 or 1:
    the figures and verdicts are in the result); for any other end (2 interrupted, 3 NOT
    PLAYED or an internal error, 4 a usage error, 5 nothing selected) what the run would
    have printed, with ``-q``, goes to stderr, so the reason is seen. Either way it is in
    :attr:`Evaluation.output`. ``quiet=False`` prints as ``pytest`` does.

    An unknown keyword is a ``TypeError`` naming the known ones. Usage errors of the
    run itself (a node that does not exist) are exit status 4, as with pytest."""
    from pytest_agentgym.config.options import BY_NAME

    unknown = sorted(set(options) - set(BY_NAME))
    if unknown:
        raise TypeError(f"evaluate() got unknown option(s) {', '.join(unknown)}; it takes the plugin's options "
                        f"by name ({', '.join(sorted(BY_NAME))}), and any other flag in pytest_args")
    args = [str(p) for p in paths]
    for name, value in options.items():
        option = BY_NAME[name]
        if value is None or value is False:
            continue
        args.append(option.flag if option.parse is None else f"{option.flag}={value}")
    args += ["-q"] if quiet else []
    args += list(pytest_args)
    collector, muted = _Collector(), _Quiet()
    try:
        code = pytest.main(args, plugins=[collector, muted] if quiet else [collector])
    finally:
        muted.restore()  # a plugin's pytest_configure that raised leaves it to here
    output = muted.buffer.getvalue()
    if quiet and code not in _JUDGED:
        sys.stderr.write(output)
    return Evaluation(int(code), collector.run_dir, collector.summaries, collector.verdicts, output if quiet else "")

"""``pytest-agentgym init [DIR]``: a project to start from, for someone who installed the
package with pip and has no clone.

It writes ``DIR/suites/<battery>/`` (copies of the suite files the package ships, to
edit) and the CI job files of ``pytest_agentgym/scaffold/`` where each CI looks for
them: ``github-actions.yml`` as ``.github/workflows/agentgym.yml``, ``gitlab-ci.yml`` as
``.gitlab-ci.yml``, any other ``NAME.yml`` as ``NAME.yml``. A file that is there already
is kept (and named) unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pytest_agentgym.config.suite_files import PACKAGED_SUITES, batteries

SCAFFOLD = Path(__file__).resolve().parent.parent / "scaffold"

#: where each CI reads its job file, by the scaffold file's name
JOB_FILE_PLACES = {
    "github-actions.yml": Path(".github") / "workflows" / "agentgym.yml",
    "gitlab-ci.yml": Path(".gitlab-ci.yml"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    init = sub.add_parser("init", help="write a suites folder (the packaged suites) and CI job files into DIR")
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the project's folder (default: .)")
    init.add_argument("--force", action="store_true", help="overwrite files that are there already")


def planned_files(target: Path) -> list[tuple[Path, Path]]:
    """(source, destination) of every file init writes into ``target``."""
    pairs = []
    for battery in batteries():
        for source in sorted((PACKAGED_SUITES / battery).iterdir()):
            if source.is_file():
                pairs.append((source, target / "suites" / battery / source.name))
    for source in sorted(SCAFFOLD.glob("*.yml")) if SCAFFOLD.is_dir() else []:
        pairs.append((source, target / JOB_FILE_PLACES.get(source.name, Path(source.name))))
    return pairs


def init_command(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        print(f"pytest-agentgym init: {target} is a file; name a folder (it is made when missing)", file=sys.stderr)
        return 2
    written, kept = [], []
    for source, destination in planned_files(target):
        if destination.exists() and not args.force:
            kept.append(destination)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
        written.append(destination)
    for path in written:
        print(f"wrote {path}")
    for path in kept:
        print(f"kept {path} (there already; --force overwrites it)")
    suites = target / "suites" / "lightweight"
    print(f"next: pytest {suites} --agentgym-tasks=0-4 (the local node: embedded servers and a scripted "
          f"reference agent, no GPU); point it at your model with --agentgym-base-url=URL --agentgym-model=NAME; "
          f"the job files run it in CI (pytest-agentgym's docs/ci.md)")
    return 0

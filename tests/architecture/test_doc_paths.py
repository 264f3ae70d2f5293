"""The files the docs name exist (issue 41: docs/suites.md named pytest_agentgym/hookspecs.py,
which is pytest_agentgym/plugin/hookspecs.py). Every `pytest_agentgym/...` or `tests/...` path
written in backticks in README.md or docs/ must be a file or folder of the repository."""

from __future__ import annotations

import re

from helpers import REPO

PATH = re.compile(r"`((?:pytest_agentgym|tests)/[\w./-]+)`")


def test_every_path_the_docs_name_exists():
    missing = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for match in PATH.finditer(line):
                path = match.group(1).rstrip(".")
                if not (REPO / path).exists():
                    missing.append(f"{doc.relative_to(REPO)}:{number}: {path}")
    assert missing == [], "the docs name files that do not exist:\n" + "\n".join(missing)

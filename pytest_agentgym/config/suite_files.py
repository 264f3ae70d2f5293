"""Which files are suites, and where they are under the command line's paths.

Light on purpose (no YAML parser): the plugin asks this of every pytest session, to
stay dormant in a project that has no suite (plugin/dormancy.py), and the servers of
the suites found are spawned ahead of collection. A suite file is a ``.yaml``/``.yml``
file with a top-level ``environment:`` key (config/suites.py reads it). The walk leaves
out the directories pytest's collection leaves out: those matching ``norecursedirs``
and virtual environments.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Iterator, Sequence

_SUITE_MARK = re.compile(r"^environment\s*:", re.MULTILINE)

#: pytest's own default of the ``norecursedirs`` ini key
DEFAULT_SKIP_DIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")


def is_suite_file(path: Path) -> bool:
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        return bool(_SUITE_MARK.search(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def _is_virtualenv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file() or (directory / "conda-meta" / "history").is_file()


def suite_files(paths: Sequence[str], skip_dirs: Sequence[str] = DEFAULT_SKIP_DIRS) -> Iterator[Path]:
    """The suite files under ``paths`` (files, directories, or node ids ``file::item``),
    in a stable order."""
    for root in paths:
        root_path = Path(str(root).split("::")[0])
        if root_path.is_file():
            if is_suite_file(root_path):
                yield root_path
            continue
        for directory, subdirs, files in os.walk(root_path):
            subdirs[:] = sorted(d for d in subdirs if not any(fnmatch.fnmatch(d, p) for p in skip_dirs)
                                and not _is_virtualenv(Path(directory) / d))
            for name in sorted(files):
                if name.endswith((".yaml", ".yml")) and is_suite_file(Path(directory) / name):
                    yield Path(directory) / name

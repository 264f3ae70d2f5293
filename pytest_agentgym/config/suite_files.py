"""Which files are suites, and where they are under the command line's paths.

Light on purpose: the plugin asks this of every pytest session, to stay dormant in a
project that has no suite (plugin/dormancy.py), and the servers of the suites found are
spawned ahead of collection. A ``.yaml``/``.yml`` file is a suite when its top-level
``environment:`` line names a known environment (one of configs/envs.yaml, any case, or
``verifiers:<module>``), read from that line alone; or, when it names another, when the
file reads as a mapping that has ``tasks`` and no key a suite does not know (an
environment a plugin adds, or a misspelt name: config/suites.py then says which). So a
deployment config's ``environment: staging`` is not a suite. The top-level keys are read
off the lines first; the YAML parser is loaded only for a file whose keys are a suite's.

Where the user said suites are (:class:`SuitePlaces`: a YAML file named on the command
line, a folder of the ``agentgym_suites`` ini key, a packaged battery), every YAML file
is a suite without that test, so a broken one is an error naming what is wrong rather
than a file passed over. The walk leaves out the directories pytest's collection leaves
out: those matching ``norecursedirs`` and virtual environments.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

#: the keys a suite file may have (config/suites.py says what each means)
SUITE_KEYS = frozenset({
    "environment", "tasks", "repeat", "max_rounds", "episode_timeout", "sampling",
    "min_reward", "gates", "nodes", "description", "max_error_rate", "baseline_metric", "args",
    "when_set",
})

_ENVIRONMENT_LINE = re.compile(r"^environment\s*:[ \t]*(?P<value>[^\n#]*)", re.MULTILINE)
_SPEC_NAME = re.compile(r"^  (?P<name>[A-Za-z][\w.-]*)\s*:\s*(?:#.*)?$", re.MULTILINE)
_VERIFIERS = "verifiers:"
#: a key of the top-level mapping: a line that starts with it, quoted or not
_TOP_LEVEL_KEY = re.compile(r"""^["']?(?P<key>[A-Za-z_][\w.-]*)["']?[ \t]*:""", re.MULTILINE)

#: pytest's own default of the ``norecursedirs`` ini key
DEFAULT_SKIP_DIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")

#: the packaged batteries: folders of suite files shipped in the wheel
PACKAGED_SUITES = Path(__file__).resolve().parent.parent / "suites"


def is_yaml(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml")


@functools.cache
def known_environments() -> frozenset[str]:
    """The environment names of the shipped configs/envs.yaml, lower case, read by their
    indentation under ``environments:`` (no YAML parser)."""
    text = (Path(__file__).resolve().parent.parent / "configs" / "envs.yaml").read_text(encoding="utf-8")
    block = text.split("\nenvironments:", 1)[-1]
    return frozenset(m["name"].lower() for m in _SPEC_NAME.finditer(block))


def _has_suite_shape(text: str) -> bool:
    keys = {m["key"] for m in _TOP_LEVEL_KEY.finditer(text)}
    if "tasks" not in keys or not keys <= SUITE_KEYS:  # read off the lines: most files end here, unparsed
        return False
    from pytest_agentgym.envs.spec import read_yaml

    try:
        data: Any = read_yaml(text)
    except Exception:  # not YAML (a template, say): not a suite by its looks
        return False
    return isinstance(data, dict) and "tasks" in data and set(data) <= SUITE_KEYS


def looks_like_suite(path: Path) -> bool:
    """Whether ``path`` is a suite by what it holds (the rule in the module docstring)."""
    if not is_yaml(path):
        return False
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    line = _ENVIRONMENT_LINE.search(text)
    if line is None:
        return False
    name = line["value"].strip().strip("'\"").strip().lower()
    if name.startswith(_VERIFIERS) or name in known_environments():
        return True
    return _has_suite_shape(text)


@dataclass(frozen=True)
class SuitePlaces:
    """Where the user said suites are: every YAML file there is a suite, and one that
    cannot be read as a suite is an error rather than a file passed over."""

    files: frozenset[Path] = frozenset()
    folders: tuple[Path, ...] = ()

    @classmethod
    def of(cls, args: Sequence[str], folders: Sequence[str | Path] = (), base: Path | None = None) -> SuitePlaces:
        """The YAML files among the command line's ``args`` (node ids allowed), the packaged
        batteries' folders among them, and the ``folders`` (relative ones to ``base``)."""
        base = base or Path.cwd()
        named = [(base / str(a).split("::")[0]).resolve() for a in args]
        packaged = [p for p in named if not is_yaml(p) and p.is_relative_to(PACKAGED_SUITES)]
        return cls(frozenset(p for p in named if is_yaml(p)),
                   tuple((base / f).resolve() for f in folders) + tuple(packaged))

    def hold(self, path: Path) -> bool:
        if not (self.files or self.folders) or not is_yaml(path):
            return False
        path = path.resolve()
        return path in self.files or any(path.is_relative_to(f) for f in self.folders)


NOWHERE = SuitePlaces()


def batteries() -> list[str]:
    """The names of the packaged batteries."""
    return sorted(p.name for p in PACKAGED_SUITES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def packaged_battery(text: str) -> tuple[Path, ...]:
    """The folders of the packaged batteries named in ``text`` (``lightweight,moderate``)."""
    names = [part.strip() for part in str(text).split(",") if part.strip()]
    known = batteries()
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise ValueError(f"{', '.join(unknown) or repr(text)}: not a packaged battery; the package ships "
                         f"{', '.join(known)} (name one or more, comma-separated)")
    return tuple(PACKAGED_SUITES / n for n in dict.fromkeys(names))


def is_suite_file(path: Path, places: SuitePlaces = NOWHERE) -> bool:
    """A YAML file in one of ``places``, or one that looks like a suite."""
    return places.hold(path) or looks_like_suite(path)


def _is_virtualenv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file() or (directory / "conda-meta" / "history").is_file()


def suite_files(paths: Sequence[str], skip_dirs: Sequence[str] = DEFAULT_SKIP_DIRS,
                places: SuitePlaces | None = None) -> Iterator[Path]:
    """The suite files under ``paths`` (files, directories, or node ids ``file::item``),
    in a stable order. A YAML file named in ``paths`` is a suite whatever it holds;
    ``places`` (default: just those) says where else that holds."""
    places = places if places is not None else SuitePlaces.of(paths)
    for root in paths:
        root_path = Path(str(root).split("::")[0])
        if root_path.is_file():
            if is_yaml(root_path):
                yield root_path
            continue
        for directory, subdirs, files in os.walk(root_path):
            subdirs[:] = sorted(d for d in subdirs if not any(fnmatch.fnmatch(d, p) for p in skip_dirs)
                                and not _is_virtualenv(Path(directory) / d))
            for name in sorted(files):
                if is_suite_file(Path(directory) / name, places):
                    yield Path(directory) / name

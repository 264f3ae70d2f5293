"""The package's architecture, checked: the import contracts and the absence of import cycles.

The contracts live in pyproject.toml (``[tool.importlinter]``) and are checked by
``lint-imports`` in CI (.ci/run); docs/developing.md explains the layers. These
tests make sure that the check itself works (a deliberate upward import breaks
it), that the package keeps it, and that no two Python files of the repository
(the package, the verifiers taskset, benchmarks/, tests/ with its helpers and
conftests) import each other through any chain, at whatever level the import sits
(module level, inside a function, under ``if TYPE_CHECKING``), bare names resolved
the way each folder is put on sys.path.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from helpers import REPO as ROOT

PACKAGE = ROOT / "pytest_agentgym"
PYPROJECT = ROOT / "pyproject.toml"


def _lint_imports() -> str:
    found = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(found).exists():
        pytest.fail("lint-imports is not installed (pip install import-linter)")
    return found


def _copy(tmp_path: Path) -> Path:
    """A copy of the package and of the contracts under ``tmp_path``; returns the source root."""
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    # the contracts as they are in the project; lint-imports reads [tool.importlinter]
    shutil.copy(PYPROJECT, tmp_path / "contracts.toml")
    return src


def _run_lint(tmp_path: Path, src: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # the copy first: lint-imports finds the root package through sys.path, ahead
    # of the project's own (editable) install
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [_lint_imports(), "--no-cache", "--no-logo", str(tmp_path / "contracts.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )


def _contracts() -> dict[str, dict]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def test_an_upward_import_breaks_the_contracts(tmp_path):
    src = _copy(tmp_path)
    records = src / "pytest_agentgym" / "results" / "records.py"
    with records.open("a", encoding="utf-8") as f:
        f.write("\n\nimport pytest_agentgym.plugin  # deliberate: the bottom layer imports the top\n"
                "import pytest  # deliberate: pytest outside the plugin package\n")

    result = _run_lint(tmp_path, src)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    # the layers contract names the new import, with its line
    assert "pytest_agentgym.results is not allowed to import pytest_agentgym.plugin" in output, output
    assert "pytest_agentgym.results.records -> pytest_agentgym.plugin (l." in output, output
    # and so does the pytest contract
    assert "pytest_agentgym.results is not allowed to import pytest" in output, output
    assert "pytest_agentgym.results.records -> pytest (l." in output, output


def test_the_package_keeps_its_contracts(tmp_path):
    """FAILS while the package breaks a contract: the message is lint-imports' report.

    This is the same check as CI's ``lint-imports`` step, run on an unmodified
    copy through the same harness as the test above (so a harness that could
    not see the copy would show here too).
    """
    src = _copy(tmp_path)
    result = _run_lint(tmp_path, src)
    output = result.stdout + result.stderr
    assert "Contracts:" in output, output  # it ran and checked something
    assert result.returncode == 0, f"import contracts broken:\n{output}"


def test_every_subpackage_is_placed():
    """A new top-level module or package must be given a layer (and, outside the
    plugin package, be held to the pytest contract); otherwise nothing checks it."""
    children = sorted(
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")
    )
    contracts = _contracts()
    layered = {
        name.strip().removeprefix("pytest_agentgym.")
        for layer in contracts["layers"]["layers"]
        for name in layer.split("|")
    }
    sources = {name.removeprefix("pytest_agentgym.") for name in contracts["pytest-only-in-plugin"]["source_modules"]}
    # __main__ only calls the CLI: it sits above every layer, like the package itself
    missing_layer = [c for c in children if c not in layered and c != "__main__"]
    missing_source = [c for c in children if c not in sources and c != "plugin"]
    assert missing_layer == [], f"give these a layer in pyproject.toml [tool.importlinter]: {missing_layer}"
    assert missing_source == [], f"add these to the pytest contract's source_modules: {missing_source}"


# --- cycles -------------------------------------------------------------------------


#: Where the repository's Python lives, and the folders on sys.path, in order, when a file of
#: that place runs: a bare ``import name`` resolves to the first of them that holds ``name.py`` or
#: ``name/__init__.py`` (a folder without ``__init__.py`` is only a namespace portion, which a
#: regular module of that name anywhere on sys.path, the standard library's too, wins over: it
#: is not followed).
#: ``{own}`` is the file's own folder: a script's (``python benchmarks/<area>/x.py``; its first
#: lines put the repository root and tests/ in front of it, benchmarks/README.md) or a test
#: module's (pytest's "prepend" import mode puts it first; tests/ is there as the rootdir
#: conftest's folder). The package and the verifiers taskset import by installed names only.
SEARCH_PATHS: dict[str, tuple[str, ...]] = {
    "pytest_agentgym": (".",),
    "pytest_agentgym_verifiers": (".",),
    "benchmarks": (".", "tests", "{own}"),
    "tests": ("{own}", "tests", "."),
}


def _python_files(root: Path) -> list[Path]:
    return sorted(p for top in SEARCH_PATHS for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts)


def _regular(folder: Path, name: str) -> Path | None:
    """The module ``name`` in ``folder``, when it is a regular one: ``name/__init__.py`` or ``name.py``."""
    for candidate in (folder / name / "__init__.py", folder / f"{name}.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve(dotted: str, search: list[Path]) -> Path | None:
    """The file an import of ``dotted`` loads from ``search`` (the folders on sys.path): the
    module itself, or the nearest enclosing one when the tail is an attribute (``pkg.mod.Class``)."""
    first, *rest = dotted.split(".")
    found = next((m for m in (_regular(folder, first) for folder in search) if m is not None), None)
    for part in rest:
        if found is None or found.name != "__init__.py":
            break
        inner = _regular(found.parent, part)
        if inner is None:
            break
        found = inner
    return found


def _import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[int]]]:
    """Every import of every Python file under ``root``'s places (SEARCH_PATHS) that lands on
    another file there, by repository-relative path; and the lines of each."""
    graph: dict[str, set[str]] = defaultdict(set)
    lines: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path in _python_files(root):
        source = path.relative_to(root).as_posix()
        search = [path.parent if entry == "{own}" else root / entry
                  for entry in SEARCH_PATHS[path.relative_to(root).parts[0]]]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        # every import statement, wherever it is: ast.walk visits function
        # bodies and ``if TYPE_CHECKING:`` blocks alike
        for node in ast.walk(tree):
            targets: list[Path | None] = []
            if isinstance(node, ast.Import):
                targets = [_resolve(alias.name, search) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: the file's own folder, one up for each further dot
                    base = path.parents[node.level - 1]
                    parts = node.module.split(".") if node.module else []
                    if parts:
                        module = _regular(base.joinpath(*parts[:-1]), parts[-1])
                    else:  # ``from . import name``: the package itself
                        module = _regular(base.parent, base.name)
                else:
                    module = _resolve(node.module or "", search)
                # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name``, mod
                for alias in node.names:
                    inner = (_regular(module.parent, alias.name)
                             if module is not None and module.name == "__init__.py" else None)
                    targets.append(inner or module)
            for target in targets:
                if target is None or root not in target.parents:
                    continue
                name = target.relative_to(root).as_posix()
                if name != source:
                    graph[source].add(name)
                    lines[(source, name)].append(node.lineno)
    return graph, lines


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def test_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(c for c in _strongly_connected(graph) if len(c) > 1) == [["a", "b", "c"]]


def _cycles(graph: dict[str, set[str]], lines: dict[tuple[str, str], list[int]]) -> list[str]:
    """One paragraph per import cycle: its files, and each import that closes it, with its lines."""
    cycles = sorted((c for c in _strongly_connected(graph) if len(c) > 1), key=lambda c: (-len(c), c))
    report = []
    for component in cycles:
        members = set(component)
        report.append(f"{len(component)} modules: {', '.join(component)}")
        for source in component:
            for target in sorted(graph[source] & members):
                where = ", ".join(f"l.{n}" for n in sorted(set(lines[(source, target)])))
                report.append(f"    {source} -> {target} ({where})")
    return report


def test_the_import_graph_reads_every_place_as_it_runs():
    """Each place's imports land where Python finds them: dotted names of the package, the
    benchmarks' own package, tests' helpers, and bare names from a file's own folder."""
    graph, _ = _import_graph()
    assert "pytest_agentgym/results/jsonl.py" in graph["pytest_agentgym/results/store.py"]
    assert "pytest_agentgym/integrations/verifiers.py" in graph["pytest_agentgym_verifiers/__init__.py"]
    assert "benchmarks/gates/simulated_runs.py" in graph["benchmarks/gates/gate_calibration.py"]
    assert "tests/helpers/report_fixtures.py" in graph["benchmarks/data/report_10k.py"]
    assert "tests/helpers/waiting.py" in graph["tests/helpers/queue_fleet.py"]
    assert "tests/transport/_keepalive_server.py" in graph["tests/transport/test_back_pressure.py"]  # a bare name
    assert "tests/conftest.py" not in {t for targets in graph.values() for t in targets}


def test_a_cycle_through_bare_names_is_found(tmp_path):
    """Two benchmark scripts of one folder that import each other by bare name (the way
    calibration_studies.py and gate_calibration.py once did, one of them inside a function),
    and a conftest and a test helper that import each other through tests/: both are cycles."""
    (tmp_path / "benchmarks" / "gates").mkdir(parents=True)
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "gates" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "gates" / "study.py").write_text("from calibration import write_run\n")
    (tmp_path / "benchmarks" / "gates" / "calibration.py").write_text(
        "def main():\n    from benchmarks.gates.study import run\n")
    (tmp_path / "tests" / "helpers").mkdir(parents=True)
    (tmp_path / "tests" / "helpers" / "__init__.py").write_text("")
    (tmp_path / "tests" / "helpers" / "shop.py").write_text("from conftest import product\n")
    (tmp_path / "tests" / "conftest.py").write_text("from helpers.shop import served\n")
    report = _cycles(*_import_graph(tmp_path))
    assert report == ["2 modules: benchmarks/gates/calibration.py, benchmarks/gates/study.py",
                      "    benchmarks/gates/calibration.py -> benchmarks/gates/study.py (l.2)",
                      "    benchmarks/gates/study.py -> benchmarks/gates/calibration.py (l.1)",
                      "2 modules: tests/conftest.py, tests/helpers/shop.py",
                      "    tests/conftest.py -> tests/helpers/shop.py (l.1)",
                      "    tests/helpers/shop.py -> tests/conftest.py (l.1)"], report


def test_no_import_cycles():
    """No two Python files of the repository (the package, the verifiers taskset, benchmarks/,
    tests/ with its helpers and conftests) import each other through any chain."""
    graph, lines = _import_graph()
    assert {source.split("/")[0] for source in graph} == set(SEARCH_PATHS), "a place with no imports found"
    report = _cycles(graph, lines)
    if report:
        pytest.fail("import cycles (modules that import each other through some chain):\n"
                    + "\n".join(report), pytrace=False)

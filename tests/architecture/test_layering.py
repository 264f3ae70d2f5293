"""The package's architecture, checked: the import contracts and the absence of import cycles.

The contracts live in pyproject.toml (``[tool.importlinter]``) and are checked by
``lint-imports`` in CI (.ci/run); docs/developing.md explains the layers. These
tests make sure that the check itself works (a deliberate upward import breaks
it), that the package keeps it, and that no two modules import each other
through any chain, at whatever level the import sits (module level, inside a
function, under ``if TYPE_CHECKING``).
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The package's module that an import of ``name`` loads: ``name`` itself, or
    the nearest enclosing module when ``name`` is an attribute (``pkg.mod.Class``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[int]]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    modules = set(files)
    graph: dict[str, set[str]] = defaultdict(set)
    lines: dict[tuple[str, str], list[int]] = defaultdict(list)
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        # every import statement, wherever it is: ast.walk visits function
        # bodies and ``if TYPE_CHECKING:`` blocks alike
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = module.split(".") if is_package else module.split(".")[:-1]
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name``, mod
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != module:
                    graph[module].add(resolved)
                    lines[(module, resolved)].append(node.lineno)
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


def test_no_import_cycles():
    graph, lines = _import_graph()
    assert graph, "found no imports: is PACKAGE right?"
    cycles = sorted((c for c in _strongly_connected(graph) if len(c) > 1), key=lambda c: (-len(c), c))
    if cycles:
        report = []
        for component in cycles:
            members = set(component)
            report.append(f"{len(component)} modules: {', '.join(component)}")
            for source in component:
                for target in sorted(graph[source] & members):
                    where = ", ".join(f"l.{n}" for n in sorted(set(lines[(source, target)])))
                    report.append(f"    {source} -> {target} ({where})")
        pytest.fail("import cycles (modules that import each other through some chain):\n"
                    + "\n".join(report), pytrace=False)

"""Which YAML files a session takes for suites, as users meet it through pytest: a project
of other tests with a deployment config's ``environment: staging`` runs exactly as without
the plugin; where the user said suites are, a broken one is an error; the packaged battery
runs from an empty directory; an empty selection says what to do and leaves no reports/;
and the example suite of docs/suites.md passes on the local node as written. Each test runs
pytest in a subprocess inside a fresh project, with real servers and the reference agent."""

from __future__ import annotations

import re

import pytest

from helpers import REPO
from helpers.projects import run, suite
from pytest_agentgym.config.suite_files import PACKAGED_SUITES

pytestmark = pytest.mark.heavy

STAGING = "environment: staging\ndatabase: {host: db.internal, port: 5432}\n"


def _unrelated_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_math="def test_add():\n    assert 1 + 1 == 2\n")
    (pytester.path / "config").mkdir()
    (pytester.path / "config" / "app.yaml").write_text(STAGING)


def _said(result: pytest.RunResult) -> tuple[str, str]:
    def timeless(text: str) -> str:
        return re.sub(r"\d+\.\d+s", "T", text)

    return timeless(result.stdout.str()), timeless(result.stderr.str())


@pytest.mark.parametrize("flags", [[], ["--collect-only"], ["-k", "add"], ["-n", "2"]],
                         ids=["plain", "collect-only", "k", "xdist"])
def test_an_unrelated_project_with_an_environment_key_runs_as_without_the_plugin(pytester, flags):
    _unrelated_project(pytester)
    without = run(pytester, "-q", "-p", "no:agentgym", *flags)
    with_plugin = run(pytester, "-q", *flags)
    assert without.ret == 0, without.stdout.str()
    assert with_plugin.ret == 0, with_plugin.stdout.str() + with_plugin.stderr.str()
    assert _said(with_plugin) == _said(without)
    assert not (pytester.path / "reports").exists()


def test_where_the_user_said_suites_are_a_file_that_is_not_one_is_an_error(pytester):
    _unrelated_project(pytester)
    pytester.makeini("[pytest]\nagentgym_suites = evals\n")
    (pytester.path / "evals").mkdir()
    (pytester.path / "evals" / "app.yaml").write_text(STAGING)
    (pytester.path / "evals" / "maze.yaml").write_text("tasks: 0-3\n")  # no environment: not a suite by its looks
    in_folder = run(pytester, "evals", "--collect-only")
    assert in_folder.ret == pytest.ExitCode.USAGE_ERROR, in_folder.stdout.str()
    in_folder.stderr.fnmatch_lines(["ERROR: *evals/app.yaml: unknown key(s) database; known: *tasks*",
                                    "*evals/maze.yaml: missing key 'environment' (the environment's name, "
                                    "e.g. 'environment: BabyAI')"])
    named = run(pytester, "config/app.yaml", "--collect-only")
    assert named.ret == pytest.ExitCode.USAGE_ERROR, named.stdout.str()
    named.stderr.fnmatch_lines(["ERROR: *config/app.yaml: unknown key(s) database; known: *"])
    elsewhere = run(pytester, "test_math.py")  # the ini key says where suites are; it runs none by itself
    assert elsewhere.ret == 0 and "agentgym:" not in elsewhere.stdout.str(), elsewhere.stdout.str()
    assert not (pytester.path / "reports").exists()


def test_the_packaged_battery_runs_from_an_empty_directory(pytester):
    listed = run(pytester, "--agentgym-battery=lightweight", "--agentgym-tasks=0", "--collect-only", "-q")
    assert listed.ret == 0, listed.stdout.str() + listed.stderr.str()
    items = [line for line in listed.stdout.lines if "::" in line]
    assert items == ["babyai.yaml::BabyAI[0]", "maze.yaml::Maze[0]", "textcraft.yaml::TextCraft[0]",
                     "wordle.yaml::Wordle[0]"]
    named_too = run(pytester, str(PACKAGED_SUITES / "lightweight"), "--agentgym-battery=lightweight",
                    "--agentgym-tasks=0", "--collect-only", "-q")  # the folder named as well: collected once
    assert named_too.ret == 0 and len([line for line in named_too.stdout.lines if "::" in line]) == 4, (
        named_too.stdout.str() + named_too.stderr.str())
    played = run(pytester, "--agentgym-battery=lightweight", "--agentgym-envs=Maze", "--agentgym-tasks=0-1",
                 "-n", "2")
    assert played.ret == 0, played.stdout.str()
    played.stdout.fnmatch_lines(["GATE PASSED: Maze success_rate >= 0.85*", "*3 passed*"])
    unknown = run(pytester, "--agentgym-battery=light")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["ERROR: --agentgym-battery: light: not a packaged battery; the package ships "
                                  "lightweight, moderate*"])


def test_a_suite_reached_twice_through_a_link_is_collected_once(pytester):
    """The checkout's layout: ``suites`` links to the package's suites, so ``pytest .`` reaches
    every suite file twice; each episode is collected once (it was a usage error per episode)."""
    package = pytester.path / "pkg" / "suites"
    package.mkdir(parents=True)
    (package / "maze.yaml").write_text("environment: Maze\ntasks: 0-2\n")
    (package / "wordle.yaml").write_text("environment: Wordle\ntasks: 0-1\n")
    (pytester.path / "suites").symlink_to(package, target_is_directory=True)
    result = run(pytester, ".", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    collected = sorted(line.split("::")[1] for line in result.outlines if "::" in line)
    assert collected == ["Maze[0]", "Maze[1]", "Maze[2]", "Wordle[0]", "Wordle[1]"], result.outlines
    assert "are the same episode" not in result.stderr.str()
    # two files of one folder named on the command line: pytest collects the folder once per
    # argument, and each file is still collected by its own path
    named = run(pytester, "suites/maze.yaml", "suites/wordle.yaml", "--collect-only", "-q")
    assert named.ret == 0, named.stdout.str() + named.stderr.str()
    assert sorted(line for line in named.outlines if "::" in line) == [
        "suites/maze.yaml::Maze[0]", "suites/maze.yaml::Maze[1]", "suites/maze.yaml::Maze[2]",
        "suites/wordle.yaml::Wordle[0]", "suites/wordle.yaml::Wordle[1]"], named.outlines


def test_an_empty_selection_says_what_to_do_and_leaves_no_reports(pytester):
    nothing = run(pytester, "--agentgym-envs=BabyAI")
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED, nothing.stdout.str()
    nothing.stdout.fnmatch_lines([
        f"agentgym: no episode collected: no suite file under {pytester.path}. To run the suites the package "
        "ships: pytest --agentgym-battery=lightweight or --agentgym-battery=moderate; for copies to edit and "
        "CI job files: pytest-agentgym init (then pytest suites/lightweight)"])
    assert not (pytester.path / "reports").exists()
    (pytester.path / "suites").mkdir()
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    other = run(pytester, "suites", "--agentgym-envs=BabyAI")
    assert other.ret == pytest.ExitCode.NO_TESTS_COLLECTED, other.stdout.str()
    other.stdout.fnmatch_lines(["agentgym: no episode collected: the suites under the paths given hold no "
                                "episode that the selection keeps*pytest-agentgym init*"])
    assert not (pytester.path / "reports").exists()


def _example_suites(page: str) -> list[str]:
    """The YAML blocks of a page that are suites (they begin with ``environment:``)."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / page).read_text(encoding="utf-8"), flags=re.S)
    return [b for b in blocks if b.startswith("environment:")]


def test_the_example_suite_passes_on_the_local_node_as_written(pytester):
    [example] = _example_suites("docs/suites.md")
    (pytester.path / "suites").mkdir()
    suite(pytester, "babyai", example)
    result = run(pytester, "suites")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["GATE PASSED: BabyAI success_rate >= 0.6*", "GATE PASSED: BabyAI mean_reward >= 0.3*"])
    result.stdout.fnmatch_lines(["*run * finished (20 episodes)"])


def test_the_readme_shows_the_tested_example_or_none():
    [example] = _example_suites("docs/suites.md")
    for shown in _example_suites("README.md"):
        assert shown == example, "README.md's example suite differs from docs/suites.md's, the one tested above"

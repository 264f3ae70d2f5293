"""What a pytest run starts, imports and keeps: servers and the reference agent launched
at configure time (before collection), nothing launched for a run without suites, the
clients left out of what is imported before the servers are spawned, and no finished
record kept in the pytest process."""

from __future__ import annotations

import sys

import pytest
from helpers.projects import episodes, make_project, run, suite

pytestmark = pytest.mark.heavy


_STARTED_AT_COLLECTION = """
import pathlib

def pytest_collection_finish(session):
    logs = [p for p in pathlib.Path("reports").rglob("*.log") if "starting:" in p.read_text()]
    pathlib.Path("started-at-collection.txt").write_text("\\n".join(sorted(p.name for p in logs)))
"""


def test_the_servers_and_the_reference_agent_are_launched_before_collection(pytester):
    """The first episode waits for the slowest process, not their sum: both were started
    at configure time, so by the end of collection each has logged its start."""
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0\n")
    pytester.makeconftest(_STARTED_AT_COLLECTION)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=early", "-q")
    assert result.ret == 0, result.stdout.str()
    started = (pytester.path / "started-at-collection.txt").read_text().split()
    assert "reference-agent.log" in started
    assert [name for name in started if name.startswith("Maze-")], started


def test_a_run_of_other_tests_launches_nothing(pytester):
    """With the plugin installed, a run whose paths hold no suite starts no process, not
    even for the header's endpoint line."""
    node = make_project(pytester)
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = run(pytester, "test_plain.py", f"--agentgym-node={node}", "--agentgym-run-id=plain")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["agentgym: model endpoint reference* (not contacted)"])
    assert not list(pytester.path.rglob("reference-agent.log"))


RETAINED_CONFTEST = """
import gc, os
import pytest
from pytest_agentgym.results.records import EpisodeRecord

def pytest_runtest_logfinish(nodeid, location):
    gc.collect()
    alive = sum(1 for o in gc.get_objects() if isinstance(o, EpisodeRecord))
    with open(os.environ["ALIVE_LOG"], "a") as log:
        log.write(f"{alive}\\n")

@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    carrying = sum(1 for reports in terminalreporter.stats.values() for r in reports
                   if getattr(r, "agentgym_record", None) is not None)
    with open(os.environ["ALIVE_LOG"], "a") as log:
        log.write(f"reports {carrying}\\n")
"""


def test_finished_records_are_not_kept_in_the_pytest_process(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-15\n")
    pytester.makeconftest(RETAINED_CONFTEST)
    log = pytester.path / "alive.log"
    monkeypatch.setenv("ALIVE_LOG", str(log))
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=kept",
                 "--agentgym-concurrency=2", "--agentgym-max-rounds=2")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    lines = log.read_text().split()
    assert len(episodes(pytester, "kept")) == 16
    counts = [int(n) for n in lines[:-2]] + [int(lines[-1])]
    alive_after_items, carrying_reports = counts[:-1], counts[-1]
    assert len(alive_after_items) == 16
    # once the last item is reported nothing is held (before: every record, twice over);
    # on the way, only those the engine has finished ahead of the items, each let go
    # as its item is reported
    assert alive_after_items[-1] <= 1, alive_after_items
    assert carrying_reports == 0


_SPAWN_PATH = """
import sys
import pytest_agentgym.plugin, pytest_agentgym.run.evaluation, pytest_agentgym.results.ledger, pytest_agentgym.plugin.items
import pytest_agentgym.servers.pool
print(sorted(m for m in ("httpx", "jinja2", "openai", "fastapi") if m in sys.modules))
"""


def test_what_a_run_imports_before_it_spawns_its_servers_leaves_out_the_clients():
    """The servers are spawned at configure time (EvaluationRun.warm_up): the plugin, the
    run and the server pool must not import the HTTP client, the prompt templates or the
    SDK, so that the servers boot while those are imported."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _SPAWN_PATH], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

"""A resume's figures and refusals: the progress lines count as kept what the header
says is kept (the episodes played now are not), and a resume whose model differs from
its run's is refused before any server or model is started or contacted. Real runs:
the reference agent, embedded servers, real signals."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

from helpers.projects import ConnectionCounter, episodes, make_project, run, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]


def _project(pytester: pytest.Pytester):
    node = make_project(pytester, latency_ms=40)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-14\n")
    return node


def test_the_progress_lines_keep_what_the_header_keeps(pytester):
    node = _project(pytester)
    results = pytester.path / "reports" / "cut" / "episodes.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", "--agentgym-run-id=cut"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_until(lambda: written_lines(results) >= 10, 180, "10 episodes recorded", procs=(proc,))
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    first = [r for r in episodes(pytester, "cut") if r["error"] is None]
    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=reports/cut",
                  "--agentgym-progress=each", "-v")
    out = resumed.stdout.str()
    assert resumed.ret == 0, out
    header = re.search(r"as generation 2: (\d+) scored episode\(s\) kept", out)
    assert header is not None and int(header[1]) == len(first), out
    kept = [int(m) for m in re.findall(r"agentgym: \d+/40 done .*?, (\d+) kept, elapsed", out)]
    assert kept and kept[-1] == len(first), out  # every line of the 40 counted all 40 as kept before
    assert f"agentgym: run cut finished (40 episodes, {len(first)} kept)" in out
    played = {f"{r['env']}[{r['task_index']}]" for r in episodes(pytester, "cut") if r["generation"] == 2}
    for name in played:  # -v says "kept" of the kept items only
        line = next(line for line in out.splitlines() if line.startswith(("suites/maze.yaml::", "suites/wordle"))
                    and f"::{name} " in line)
        assert ", kept)" not in line, line


def test_a_resume_with_another_model_is_refused_before_anything_starts(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    assert run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base").ret == 0
    logs = pytester.path / "reports" / "base" / "logs"
    before = sorted(p.name for p in logs.iterdir())
    counter = ConnectionCounter()  # the other model's endpoint: it records any probe
    try:
        other = node.with_name("other.yaml")
        other.write_text(f"name: other\nmodel:\n  endpoints:\n    - kind: openai\n      url: "
                         f"http://127.0.0.1:{counter.port}/v1\n      model: gpt-other\n"
                         "envs: {servers: spawn}\n")
        refused = run(pytester, "suites", f"--agentgym-node={other}", "--agentgym-resume=base",
                      "--agentgym-max-rounds=3")
        assert refused.ret == 4, refused.stdout.str()
        refused.stderr.fnmatch_lines(["*cannot resume run base*",
                                      "*- model: 'reference' then, 'gpt-other' now",
                                      "*- endpoint_kind: 'reference' then, 'openai' now",
                                      "*- Maze max_rounds: 15 then, 3 now",
                                      "*restore them*"])
        assert counter.count == 0  # the endpoint was never probed
    finally:
        counter.close()
    assert sorted(p.name for p in logs.iterdir()) == before  # no server and no model was started
    assert len(episodes(pytester, "base")) == 2


def test_a_resume_with_the_same_model_on_a_fallback_is_let_through(pytester):
    """The first endpoint of the chain differs, its fallback is the run's model: the check
    before the start lets the resume through (the chosen endpoint is checked once chosen)."""
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    assert run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base").ret == 0
    counter = ConnectionCounter()  # the first endpoint: answers nothing, so the fallback is chosen
    try:
        chain = node.with_name("chain.yaml")
        chain.write_text(f"name: chain\nmodel:\n  endpoints:\n    - kind: openai\n      url: "
                         f"http://127.0.0.1:{counter.port}/v1\n      model: gpt-other\n"
                         "    - kind: reference\n      policy: reference\n"
                         "  health_timeout: 2\nlimits: {max_rounds: 15}\nenvs: {servers: spawn}\n")
        resumed = run(pytester, "suites", f"--agentgym-node={chain}", "--agentgym-resume=base")
        assert resumed.ret == 0, resumed.stdout.str() + resumed.stderr.str()
    finally:
        counter.close()

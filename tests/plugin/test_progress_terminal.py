"""What a long run shows while it runs (plugin/progress.py): progress lines with done per
environment, errors, elapsed and an ETA; bounded in a log; a heartbeat on a terminal that
does not garble pytest's characters; each item's reward, rounds and time under ``-v``.

Real runs: pytest in a subprocess against the reference agent, whose ``latency_ms``
makes each model call take a known time. The assertions read the printed fields (the
elapsed and the ETA the run printed), never the test's own clock."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from helpers.projects import episodes, make_project, run, suite
from helpers.usage_errors import settings_refusal, says
from pytest_agentgym.run.progress import parse_duration

pytestmark = pytest.mark.heavy

LINE = re.compile(r"agentgym: (?P<done>\d+)/(?P<planned>\d+) done(?: \((?P<envs>[^)]*)\))?, "
                  r"(?P<errors>\d+) errors?(?:, (?P<kept>\d+) kept)?, elapsed (?P<elapsed>\S+), ETA (?P<eta>\S+)$")


def progress_lines(text: str) -> list[re.Match]:
    """Every progress line of ``text``; a line that starts like one but does not parse fails
    the test (a progress line glued to pytest's characters, or cut)."""
    found = []
    for line in re.split(r"[\r\n]+", text):
        if " done " in line and "agentgym: " in line:
            match = LINE.fullmatch(line.rstrip())
            assert match is not None, f"a progress line that does not parse: {line!r}"
            found.append(match)
    return found


def one_step_maze(pytester: pytest.Pytester, tasks: int, max_rounds: int = 1) -> None:
    suite(pytester, "maze", f"environment: Maze\ntasks: [{', '.join(map(str, range(tasks)))}]\n"
                            f"max_rounds: {max_rounds}\n")


def test_a_steady_model_prints_an_eta_within_20_percent_of_the_time_it_then_took(pytester):
    """The issue's acceptance: 1.5 s per episode, one at a time; the ETA printed once 10
    episodes are done against the elapsed printed at the end."""
    node = make_project(pytester, latency_ms=1500)
    one_step_maze(pytester, 15)  # one model call per episode: 1.5 s each
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-concurrency=1",
                 "--agentgym-progress=each", "--agentgym-run-id=steady")
    out = result.stdout.str()
    assert result.ret == 0, out
    lines = progress_lines(out)
    assert [int(m["done"]) for m in lines] == list(range(1, 16)), out  # one line per finished episode
    assert all(m["planned"] == "15" and m["errors"] == "0" for m in lines), out
    assert [m["envs"].split()[:2] for m in lines] == [["Maze", f"{n}/15"] for n in range(1, 16)], out
    assert lines[0]["eta"] != "?", out
    tenth, last = lines[9], lines[-1]
    eta = parse_duration(tenth["eta"])
    took = parse_duration(last["elapsed"]) - parse_duration(tenth["elapsed"])
    assert abs(eta - took) <= 0.2 * took, f"ETA {eta:.1f}s after 10 episodes, the last 5 took {took:.1f}s\n{out}"
    assert parse_duration(last["eta"]) == 0.0


def test_a_log_gets_at_most_one_line_per_finished_episode_and_v_shows_each_items_figures(pytester):
    """Not a terminal (pytest's output is a pipe here), a line every 0.1 s asked for while
    each episode takes about 0.6 s: lines come only after finished episodes."""
    node = make_project(pytester, latency_ms=200)
    one_step_maze(pytester, 5, max_rounds=3)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-concurrency=1",
                 "--agentgym-progress=0.1", "-v", "--agentgym-run-id=log")
    out = result.stdout.str()
    assert result.ret == 0, out
    done = [int(m["done"]) for m in progress_lines(out)]
    assert done and done == sorted(set(done)) and done[-1] == 5, out  # never two lines for one count
    records = {r["task_index"]: r for r in episodes(pytester, "log")}
    shown = re.findall(r"suites/maze\.yaml::Maze\[(\d+)\] (?:PASSED|FAILED|UNSOLVED) \(reward (\S+), "
                       r"(\d+) rounds?, (\S+) s\)", out)
    assert len(shown) == 5, out
    for task, reward, rounds, seconds in shown:
        record = records[int(task)]
        assert float(reward) == pytest.approx(record["reward"], abs=0.005)
        assert int(rounds) == record["rounds"]
        assert float(seconds) == pytest.approx(record["duration_s"], abs=0.05)


def test_by_default_a_short_run_in_a_log_prints_one_line_at_its_end_and_qq_prints_none(pytester):
    node = make_project(pytester)
    one_step_maze(pytester, 3)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=default")
    assert result.ret == 0, result.stdout.str()
    assert [(m["done"], m["planned"], m["eta"]) for m in progress_lines(result.stdout.str())] == [("3", "3", "0.0s")]
    quiet = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=quiet", "-qq")
    assert quiet.ret == 0, quiet.stdout.str()
    assert progress_lines(quiet.stdout.str()) == []


def test_collect_only_prints_no_progress(pytester):
    node = make_project(pytester)
    one_step_maze(pytester, 3)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only", "--agentgym-progress=each")
    assert result.ret == 0, result.stdout.str()
    assert "<EpisodeItem Maze[2]>" in result.stdout.str()
    assert " done " not in result.stdout.str()


def test_a_progress_value_that_is_none_of_the_three_forms_is_refused(pytester):
    make_project(pytester)
    message = settings_refusal(pytester, "--agentgym-progress=often")
    assert says(message, ["--agentgym-progress: *seconds between progress lines, each * or off, got 'often'"])


def run_on_a_terminal(pytester: pytest.Pytester, *args: str, timeout: float = 120) -> tuple[int, str]:
    """pytest in a subprocess whose output is a pseudo-terminal (pytest sees a tty), and
    everything it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=no", *args],
                            cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal: it is done
                break
            if not chunk:
                break
            chunks.append(chunk)
        else:
            proc.kill()
        assert proc.wait(timeout=30) is not None
    finally:
        os.close(leader)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("verbosity", [[], ["-v"]], ids=["dots", "verbose"])
def test_on_a_terminal_a_heartbeat_shows_while_an_episode_is_waited_for_without_garbling(pytester, verbosity):
    """Episodes of 1.5 s, a line every 0.3 s: lines come while an item waits (through
    pytest's output capture), every one whole, and pytest's own results all still shown."""
    node = make_project(pytester, latency_ms=1500)
    one_step_maze(pytester, 2)
    status, out = run_on_a_terminal(pytester, "suites", f"--agentgym-node={node}", "--agentgym-concurrency=1",
                                    "--agentgym-progress=0.3", *verbosity)
    assert status == 0, out
    lines = progress_lines(out)
    assert len(lines) > 2, out  # more lines than finished episodes: the heartbeat
    assert [m["done"] for m in lines].count("0") >= 1, out  # during the first episode
    assert int(lines[-1]["done"]) == 2, out
    if verbosity:
        assert len(re.findall(r"suites/maze\.yaml::Maze\[[01]\] UNSOLVED \(reward", out)) == 2, out
    else:
        letters = "".join(re.findall(r"^suites/maze\.yaml (u*)", out.replace("\r\n", "\n"), flags=re.M))
        assert letters == "uu", out
    assert "2 unsolved" in out, out


def test_under_xdist_the_controller_counts_every_workers_episodes(pytester):
    node = make_project(pytester, latency_ms=100)
    one_step_maze(pytester, 4)
    result = run(pytester, "suites", f"--agentgym-node={node}", "-n", "2", "--agentgym-progress=each",
                 "--agentgym-run-id=xdist")
    out = result.stdout.str()
    assert result.ret == 0, out
    # two workers' reports may both arrive before the controller's next chance to print
    # (pytest_runtest_logfinish): then one line counts both, never one line twice
    counted = [(int(m["done"]), m["planned"]) for m in progress_lines(out)]
    done = [n for n, _ in counted]
    assert done == sorted(set(done)) and done[-1] == 4 and {p for _, p in counted} == {"4"}, out

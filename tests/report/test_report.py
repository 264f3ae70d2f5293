"""The HTML report, read as a file: escaping, figures, edge-case runs, the CLI.

The browser side (scripts, rendering, screenshots) is in test_report_browser.py.
Expected numbers here are worked out by hand from the inputs, not taken from
the code under test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from pytest_agentgym.report import charts
from pytest_agentgym.report.page import script_json
from pytest_agentgym.report.render import render_run_dir, trajectory_json
from pytest_agentgym.results.records import ErrorInfo

from helpers.report_fixtures import make_episode, make_info, make_turn, write_run
from helpers.page_icon import without_the_icon
from helpers.report_pages import chunk_texts, decode_chunk, index_of, parse

HOSTILE_REPLY = "Thought: hi</script><script>alert(1)</script>\nAction:\n<b>go</b>"
HOSTILE_OBSERVATION = '<img src=x onerror="alert(2)"> You see a door. --> <!-- & &amp;'
HOSTILE_FEEDBACK = "</script><script>alert(3)</script>"
HOSTILE_MESSAGE = "<script>alert(4)</script> from /step"


def hostile_run(tmp_path: Path):
    turns = (
        make_turn(0, observation=HOSTILE_OBSERVATION, reply=HOSTILE_REPLY, action="<b>go</b>",
                  feedback=HOSTILE_FEEDBACK),
        make_turn(1, observation=HOSTILE_FEEDBACK, reply="Action:\nstop", action="stop",
                  feedback="done", reward=1.0, done=True),
    )
    info = make_info(model='<svg onload="alert(5)">', notes=("<i>fallback</i> endpoint used",),
                     command="pytest suites/x -k '<script>'",
                     gates=({"env": "BabyAI", "gate": "mean_reward >= 0.5", "value": 1.0, "passed": True,
                             "detail": "<b>meets</b>"},))
    episodes = [
        make_episode("BabyAI", 0, turns=turns),
        make_episode("BabyAI", 1, outcome="error",
                     error=ErrorInfo("EnvServerError", HOSTILE_MESSAGE, "env")),
    ]
    return write_run(tmp_path, info, episodes)


# --------------------------------------------------------------------------- (a) escaping


@pytest.mark.parametrize("compress", [False, True], ids=["plain-json", "gzip"])
def test_markup_from_models_and_servers_is_escaped(tmp_path, compress):
    html = render_run_dir(hostile_run(tmp_path).path, compress=compress).read_text(encoding="utf-8")
    page = parse(html)

    # Server-rendered part: no tag or handler came from data, the text is there escaped.
    assert not [tag for tag, _ in page.tags if tag in ("img", "b", "i")]
    assert not [(tag, name) for tag, attrs in page.tags for name in attrs if name.startswith("on")]
    assert [tag for tag, _ in page.tags].count("svg") == 3  # bars, histogram, grid: all ours
    assert "&lt;script&gt;alert(4)&lt;/script&gt; from /step" in html  # error message, no-script table
    assert "&lt;svg onload=&#34;alert(5)&#34;&gt;" in html  # model in the header
    assert "&lt;i&gt;fallback&lt;/i&gt; endpoint used" in html
    assert "&lt;b&gt;meets&lt;/b&gt;" in html

    # Exactly one script runs: ours (trajectory.js, then report.js), unchanged. The rest are data blocks.
    shipped = "\n".join((resources.files("pytest_agentgym.report") / "templates" / name).read_text(encoding="utf-8")
                        for name in ("trajectory.js", "report.js"))
    runnable = [text for attrs, text in page.scripts if "type" not in attrs]
    assert runnable == ["\n" + shipped + "\n"]
    assert {attrs["type"] for attrs, _ in page.scripts if "type" in attrs} <= {
        "application/json", "application/x-gzip-base64"}

    # Embedded JSON: no raw "<" anywhere, and it reads back to the exact original strings.
    for attrs, text in page.scripts:
        if "type" in attrs:
            assert "<" not in text and ">" not in text
    (encoding, text), = chunk_texts(page)
    assert encoding == ("gzip-base64" if compress else "json")
    if not compress:
        assert "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in text
        assert "\\u003cimg src=x onerror=" in text
    first, second = decode_chunk(encoding, text)
    turn = first["turns"][0]
    assert (turn[1], turn[2], turn[3], turn[4]) == (HOSTILE_OBSERVATION, HOSTILE_REPLY, "<b>go</b>",
                                                    HOSTILE_FEEDBACK)
    assert second["error"] == {"type": "EnvServerError", "message": HOSTILE_MESSAGE, "where": "env"}


def test_script_json_cannot_close_its_tag():
    tricky = {"a": "</script><!-- <script>", "b": "x & y > z", "c": "line\u2028sep"}
    text = str(script_json(tricky))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert "\\u003c/script\\u003e" in text
    assert json.loads(text) == tricky


# --------------------------------------------------------------------------- contents


def summary_row(html: str, env: str) -> str:
    match = re.search(rf'<tr[^>]*>\s*<th scope="row">{env}</th>(.*?)</tr>', html, re.S)
    assert match, f"no summary row for {env}"
    return re.sub(r"\s+", " ", match.group(1))


def test_header_summary_and_gates(tmp_path):
    # Rewards 1, 0, 1, 1, 1: every reward 0 or 1, so both intervals are Clopper-Pearson's
    # 95% interval of 4/5: [0.2836, 0.9949].
    # The error episode is left out of both.
    outcomes = ("passed", "failed", "passed", "passed", "passed")
    episodes = [make_episode("BabyAI", n, outcome=o) for n, o in enumerate(outcomes)]
    episodes.append(make_episode("BabyAI", 5, outcome="error",
                                 retried=(ErrorInfo("ReadTimeout", "no answer in 60 s", "model"),)))
    gates = ({"env": "BabyAI", "gate": "mean_reward >= 0.5", "value": 0.8, "passed": True,
              "detail": "mean_reward = 0.800 (meets >= 0.5)"},
             {"env": "BabyAI", "gate": "success_rate >= 0.9", "value": 0.8, "passed": False,
              "detail": "success_rate = 0.800 (misses >= 0.9)"})
    info = make_info(environments=("BabyAI", "Wordle"), gates=gates,
                     notes=("fallback endpoint ollama at http://127.0.0.1:11434 was used",))
    html = render_run_dir(write_run(tmp_path, info, episodes).path).read_text(encoding="utf-8")

    for text in ("20261121-120000-abcd", "4090", "qwen3.5-9b", "ckpt/step-1200",
                 "http://127.0.0.1:3030/openai/v1", "(tensorzero)", "2026-11-21 12:00:00 UTC",
                 "42 min 30 s", "pytest suites/lightweight --agentgym-node=4090 --agentgym-seed=7",
                 "fallback endpoint ollama at http://127.0.0.1:11434 was used"):
        assert text in html, text
    row = summary_row(html, "BabyAI")
    assert "6 <span class=\"dim\">(5 scored)</span>" in row
    assert "0.800 <span class=\"dim sub\">[0.284, 0.995]</span>" in row  # Clopper-Pearson: every reward 0 or 1
    assert "80.0% <span class=\"dim sub\">[28.4%, 99.5%]</span>" in row
    assert "PASSED</span> <span class=\"mono\">mean_reward &gt;= 0.5" in row
    assert "FAILED</span> <span class=\"mono\">success_rate &gt;= 0.9" in row
    assert "no episode recorded" in summary_row(html, "Wordle")  # declared, nothing ran
    assert "GATES FAILED: 1 of 2" in html
    assert "success_rate = 0.800 (misses &gt;= 0.9)" in html
    assert "all 6 episodes are listed" in html  # the no-script list


def test_baseline_comparison(tmp_path):
    base = write_run(tmp_path, make_info(run_id="base"), [make_episode("BabyAI", n, outcome="passed")
                                                          for n in range(2)])
    verdict = {"env": "BabyAI", "gate": "mean_reward >= baseline - 0.1", "value": 0.5, "passed": False,
               "detail": "mean_reward = 0.500 vs baseline 1.000 (floor 0.900): REGRESSION"}
    info = make_info(run_id="new", baseline=str(base.path), gates=(verdict,))
    run = write_run(tmp_path, info, [make_episode("BabyAI", 0, outcome="passed", run_id="new"),
                                     make_episode("BabyAI", 1, outcome="failed", run_id="new")])
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    assert "<th>Baseline mean</th>" in html
    row = summary_row(html, "BabyAI")
    assert '<td class="num">1.000</td>' in row and '<td class="num down">-0.500</td>' in row
    assert "REGRESSION" in html

    missing = write_run(tmp_path, make_info(run_id="lost", baseline="reports/gone", gates=(verdict,)),
                        [make_episode("BabyAI", 0, run_id="lost")])
    html = render_run_dir(missing.path).read_text(encoding="utf-8")
    assert "baseline run reports/gone was not found" in html and "REGRESSION" in html


def test_page_is_self_contained(tmp_path):
    html = render_run_dir(hostile_run(tmp_path).path).read_text(encoding="utf-8")
    page = parse(html)
    for tag, attrs in without_the_icon(page.tags):
        for name in ("src", "href", "action", "poster", "data"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), (tag, name, value)
        assert tag not in ("link", "iframe", "object", "embed", "base", "img")
    assert "@import" not in html and "url(" not in html


def test_charts_show_the_data():
    # 0 and 0.05 fall in [0, 0.1); 0.1 in [0.1, 0.2); 0.95 and 1.0 in the top bin, closed at 1.
    assert charts.histogram_counts([0, 0.05, 0.1, 0.95, 1.0], 10, 0.0, 1.0) == [2, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert charts.reward_domain([-3.0, 0.5]) == (-3.0, 1.0)
    cells = charts.task_cells([(2, "passed"), (0, "failed"), (2, "unsolved"), (1, "error"), (0, "failed"),
                               (3, "unsolved")])
    assert [(c.task_index, c.state) for c in cells] == [(0, "failed"), (1, "error"), (2, "mixed"), (3, "unsolved")]
    grid = str(charts.outcome_grid("Env<1>", cells, 3))
    page = parse(grid)
    fills = [attrs["fill"] for tag, attrs in page.tags if tag == "rect"]
    assert fills == [charts.OUTCOME_COLOURS[s] for s in ("failed", "error", "mixed", "unsolved")]
    assert 'data-env="3"' in grid and "Env&lt;1&gt;" in grid and "task 2: 1 passed, 1 unsolved" in grid

    # A two-episode interval (-4.8, 5.6) does not stretch the [0, 1] axis; its tooltip keeps it whole.
    bars = str(charts.env_bars([charts.EnvBar("Maze", 0.41, (-4.8, 5.6), 0.5)]))
    ticks = re.findall(r'text-anchor="middle">([^<]*)</text>', bars)
    assert ticks == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert "mean reward 0.410 (95% CI -4.800 to 5.600)" in bars


def test_repeated_observation_is_stored_once():
    turns = (make_turn(0, observation="start", feedback="after 0"),
             make_turn(1, observation="after 0", feedback="after 1"),
             make_turn(2, observation="something else", feedback="end"))
    stored = json.loads(trajectory_json(make_episode("Maze", 0, turns=turns)))["turns"]
    assert [t[1] for t in stored] == ["start", None, "something else"]
    assert [t[4] for t in stored] == ["after 0", "after 1", "end"]


def test_large_runs_are_packed_and_small_ones_are_not(tmp_path, monkeypatch):
    from pytest_agentgym.report import payload

    run = write_run(tmp_path, make_info(), [make_episode("Maze", n) for n in range(30)])
    plain = chunk_texts(parse(render_run_dir(run.path, output=tmp_path / "a.html").read_text()))
    assert {e for e, _ in plain} == {"json"}
    monkeypatch.setattr(payload, "COMPRESS_ABOVE", 1000)
    monkeypatch.setattr(payload, "CHUNK_BYTES", 2000)
    packed = chunk_texts(parse(render_run_dir(run.path, output=tmp_path / "b.html").read_text()))
    assert {e for e, _ in packed} == {"gzip-base64"} and len(packed) > 1
    unpacked = [record for e, t in packed for record in decode_chunk(e, t)]
    assert unpacked == [record for e, t in plain for record in decode_chunk(e, t)]


# --------------------------------------------------------------------------- (c) edge-case runs


def test_run_with_no_episodes(tmp_path):
    run = write_run(tmp_path, make_info(gates=()), [])
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    assert index_of(html) == [] and "No episode has been recorded." in html
    assert "no gates declared" in html and "<noscript>" not in html


def test_run_with_only_errors(tmp_path):
    verdict = {"env": "Maze", "gate": "mean_reward >= 0.5", "value": None, "passed": False,
               "detail": "no scored episode of Maze (3 error(s)); the gate cannot be met"}
    run = write_run(tmp_path, make_info(environments=("Maze",), gates=(verdict,), status="failed"),
                    [make_episode("Maze", n, outcome="error") for n in range(3)])
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    row = summary_row(html, "Maze")
    assert "3 <span class=\"dim\">(0 scored)</span>" in row and '<td class="num err">3</td>' in row
    assert "no scored episode" in html  # histogram has nothing and the bar says so
    assert [r["o"] for r in index_of(html)] == ["error"] * 3
    assert html.count("EnvServerError (env): POST /step answered 500") == 3


def test_run_still_running(tmp_path):
    info = make_info(ended_at=None, status="running", gates=())
    run = write_run(tmp_path, info, [make_episode("Wordle", 0)])
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    assert "unfinished (no end time recorded yet)" in html
    assert "The report shows the 1 episode(s) recorded so far." in re.sub(r"\s+", " ", html)
    assert "No gates were checked yet" in html


def test_records_without_outcome_are_classified(tmp_path):
    from dataclasses import replace

    episodes = [replace(make_episode("Maze", 0, outcome="passed"), outcome=None),
                replace(make_episode("Maze", 1, outcome="failed"), outcome=None)]
    html = render_run_dir(write_run(tmp_path, make_info(), episodes).path).read_text()
    assert [r["o"] for r in index_of(html)] == ["passed", "failed"]


# --------------------------------------------------------------------------- (d) the CLI


def test_cli_renders_again_from_the_results_alone(tmp_path):
    run = hostile_run(tmp_path)
    target = run.path / "report.html"
    assert not target.exists()
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "report", str(run.path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target)
    assert "20261121-120000-abcd" in target.read_text(encoding="utf-8")

    other = tmp_path / "elsewhere" / "r.html"
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "report", str(run.path),
                           "--output", str(other)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert index_of(other.read_text(encoding="utf-8")) == index_of(target.read_text(encoding="utf-8"))


def test_cli_compress_flags_override_the_automatic_choice(tmp_path):
    from pytest_agentgym.report.render import COMPRESS_ABOVE

    def render(run, *flags: str) -> list[tuple[str, str]]:
        target = tmp_path / f"{run.path.name}{''.join(flags)}.html"
        done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "report", str(run.path),
                               "--output", str(target), *flags],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return chunk_texts(parse(target.read_text(encoding="utf-8")))

    def records(chunks: list[tuple[str, str]]) -> list[dict]:
        return [record for encoding, text in chunks for record in decode_chunk(encoding, text)]

    small = hostile_run(tmp_path / "small")  # far below COMPRESS_ABOVE: plain JSON by default
    automatic, forced = render(small), render(small, "--compress")
    assert {e for e, _ in automatic} == {"json"} and {e for e, _ in forced} == {"gzip-base64"}
    assert records(forced) == records(automatic)

    # Four distinct observations, together above COMPRESS_ABOVE: gzip by default.
    size = COMPRESS_ABOVE // 3
    large = write_run(tmp_path / "large", make_info(), [
        make_episode("Maze", n, turns=(make_turn(0, observation=f"{n} " + "abcdefghij"[n] * size,
                                                 done=True),))
        for n in range(4)])
    automatic, forbidden = render(large), render(large, "--no-compress")
    assert {e for e, _ in automatic} == {"gzip-base64"} and {e for e, _ in forbidden} == {"json"}
    assert records(forbidden) == records(automatic)


def _report_cli(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "report", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_cli_on_a_directory_without_results(tmp_path):
    done = _report_cli(tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (f"pytest-agentgym report: {tmp_path} has no run.json: it is not a pytest-agentgym run "
                           f"directory; give one that holds run.json and episodes.jsonl (e.g. reports/latest)\n")
    missing = _report_cli(tmp_path / "nope")
    assert missing.returncode == 2 and "nope does not exist; give a run directory" in missing.stderr


def test_cli_on_a_verifiers_output_directory_says_what_it_is(tmp_path):
    """vf-eval -o writes <out>/<run>/traces.jsonl: named as such, with the way to a report."""
    (tmp_path / "vf-out" / "textcraft-reference").mkdir(parents=True)
    (tmp_path / "vf-out" / "textcraft-reference" / "traces.jsonl").write_text('{"ok": true}\n')
    for given in (tmp_path / "vf-out", tmp_path / "vf-out" / "textcraft-reference"):
        done = _report_cli(given)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"pytest-agentgym report: {given} is a verifiers output directory "
                                      f"(vf-eval -o: traces.jsonl), not a pytest-agentgym run directory; for a "
                                      f"report of these episodes run the suite through pytest")

"""The compare view, read as a file: the report's section and the page of
`pytest-agentgym compare --html` from real run directories; the flip grid, its
colours and legend; the first divergent turn; escaping. The browser side is in
test_compare_view_browser.py."""

from __future__ import annotations

import itertools
import json
import re
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import pytest
from markupsafe import escape

from pytest_agentgym.cli import main as cli
from pytest_agentgym.compare import Flip, compare_runs
from pytest_agentgym.report import flips
from pytest_agentgym.report.compare_view import write_compare_html
from pytest_agentgym.report.divergence import first_divergence
from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.results.records import ErrorInfo

from helpers.compare_fixtures import paired_run, plain_turns
from helpers.report_fixtures import make_turn
from helpers.page_icon import without_the_icon
from helpers.report_pages import decode_chunk, parse

HOSTILE_REPLY = "Thought: </script><script>alert(1)</script>\nAction:\n<b>go</b>"
HOSTILE_OBSERVATION = '<img src=x onerror="alert(2)"> a door --> <!-- & &amp;'
HOSTILE_ENV = 'Maze" onmouseover="alert(6)</script><b>x</b>'


def candidate_turns(env, task, repeat, mark):
    """The baseline's turns, except: BabyAI 1 replies otherwise at turn 1, BabyAI 4 takes
    a third turn, BabyAI 8 errored after one turn."""
    turns = list(plain_turns(env, task, repeat, mark))
    if (env, task) == ("BabyAI", 1):
        turns[1] = make_turn(1, observation="You turned left.", reply="Action:\nturn right", action="turn right")
    if (env, task) == ("BabyAI", 4):
        turns[1] = make_turn(1, observation="You turned left.")
        turns.append(make_turn(2, observation="You turned left.", reward=1.0, done=True))
    if (env, task) == ("BabyAI", 8):
        turns = turns[:1]
    return turns


BASE = {"BabyAI": "PPPPFFPPPP", "Maze": ["PPF", "PPF"]}
CAND = {"BabyAI": "PFPPPFPPEP", "Maze": ["PPF", "PFP"]}


@pytest.fixture
def pair(tmp_path):
    reports = tmp_path / "reports"
    base = paired_run(reports, "base", BASE)
    cand = paired_run(reports, "cand", CAND, turns=candidate_turns)
    return reports, base, cand


def grid_classes(page) -> dict[str, dict[int, tuple[str, str | None]]]:
    """env -> task -> (class, data-pair) of each flip-grid square, from the parsed page."""
    grids: dict[str, dict[int, tuple[str, str | None]]] = {}
    current = None
    for tag, attrs in page.tags:
        if tag == "svg":
            current = attrs["aria-label"].split(":")[0] if "flip-grid" in attrs.get("class", "") else None
        elif tag == "rect" and current is not None:
            grids.setdefault(current, {})[int(attrs["data-t"])] = (attrs["class"], attrs.get("data-pair"))
    return grids


def data_of(page) -> dict:
    (text,) = [t for attrs, t in page.scripts if attrs.get("id") == "compare-data"]
    return json.loads(text)


def pair_records(page) -> dict[int, list[dict]]:
    return {int(attrs["id"].rsplit("-", 1)[1]): decode_chunk(attrs["data-encoding"], text)
            for attrs, text in page.scripts if "pair-chunk" in (attrs.get("class") or "")}


# --------------------------------------------------------------------------- the page from run directories


def test_the_page_shows_verdicts_flip_grid_and_changed_episodes(pair, tmp_path):
    reports, base, cand = pair
    comparison = compare_runs(base.path, cand.path, max_error_rate=0.2)
    html = write_compare_html(comparison, tmp_path / "compare.html").read_text(encoding="utf-8")
    page = parse(html)

    for env in ("BabyAI", "Maze"):  # the comparison's own lines, not recomputed
        assert str(escape(comparison.environments[env].line())) in html
    assert "cand</span> against <span class=\"mono\">base" in html

    grids = grid_classes(page)
    assert {t: c for t, (c, _) in grids["BabyAI"].items()} == {
        0: "flip-both-pass", 1: "flip-pass-fail", 2: "flip-both-pass", 3: "flip-both-pass",
        4: "flip-fail-pass", 5: "flip-both-fail", 6: "flip-both-pass", 7: "flip-both-pass", 8: "flip-error",
        9: "flip-both-pass"}
    assert {t: p for t, (_, p) in grids["BabyAI"].items() if p} == {
        1: "BabyAI:1:r0", 4: "BabyAI:4:r0", 8: "BabyAI:8:r0"}
    # Maze task 1: repeat 1 went pass -> fail; task 2: repeat 0 failed twice, repeat 1 went fail -> pass.
    assert grids["Maze"] == {0: ("flip-both-pass", None), 1: ("flip-pass-fail", "Maze:1:r1"),
                             2: ("flip-both-fail", "Maze:2:r1")}
    assert "task 2: 1 both fail, 1 fail → pass" in html
    for words in ("pass → fail", "fail → pass", "both pass", "both fail", "error or missing"):
        assert f"</span>{words}" in html, words  # in the legend, after its swatch
    assert "pass → fail: 1; fail → pass: 1; both pass: 6; both fail: 1; error or missing: 1" in html

    # The list: changed episodes only, worst first, each with its first divergence.
    rows = re.findall(r'<tr class="flip-([a-z-]+)"><td class="num"><a href="#pair=([^"]+)">', html)
    assert rows == [("pass-fail", "BabyAI%3A1%3Ar0"), ("error", "BabyAI%3A8%3Ar0"), ("fail-pass", "BabyAI%3A4%3Ar0"),
                    ("pass-fail", "Maze%3A1%3Ar1"), ("fail-pass", "Maze%3A2%3Ar1")]
    for text in ("turn 1: the reply and the action differ", "turn 2: the baseline ended after 2 turn(s)",
                 "turn 1: the candidate ended after 1 turn(s)"):
        assert f"<td>{text}</td>" in html, text

    # The data: one pair per changed key; baseline and candidate trajectories where it says.
    data = data_of(page)
    assert set(data["pairs"]) == {"BabyAI:1:r0", "BabyAI:4:r0", "BabyAI:8:r0", "Maze:1:r1", "Maze:2:r1"}
    chunks = pair_records(page)
    first = data["pairs"]["BabyAI:1:r0"]
    assert (first["k"], first["b"]["s"], first["c"]["s"]) == ("pass-fail", "pass", "fail")
    assert first["d"] == {"position": 1, "turn": 1, "fields": ["reply", "action"],
                          "text": "turn 1: the reply and the action differ"}
    base_side = chunks[first["b"]["c"]][first["b"]["p"]]
    cand_side = chunks[first["c"]["c"]][first["c"]["p"]]
    assert base_side["turns"][1][2] == "Action:\nturn left" and cand_side["turns"][1][2] == "Action:\nturn right"
    errored = data["pairs"]["BabyAI:8:r0"]
    assert errored["c"]["s"] == "error" and chunks[errored["c"]["c"]][errored["c"]["p"]]["error"]["type"] == "ConnectError"


def test_a_comparison_without_changes_says_so(tmp_path):
    base = paired_run(tmp_path, "base", {"Maze": "PPF"})
    cand = paired_run(tmp_path, "cand", {"Maze": "PPF"})
    html = write_compare_html(compare_runs(base.path, cand.path), tmp_path / "c.html").read_text()
    assert "No episode changed between the runs." in html
    assert data_of(parse(html))["pairs"] == {} and 'class="pair-chunk"' not in html


@pytest.mark.parametrize("compress", [False, True], ids=["plain-json", "gzip"])
def test_markup_from_models_and_servers_is_escaped_in_the_compare_view(tmp_path, compress):
    def hostile(env, task, repeat, mark):
        return (make_turn(0, observation=HOSTILE_OBSERVATION, reply=HOSTILE_REPLY, action="<b>go</b>",
                          feedback="</script><script>alert(3)</script>", reward=1.0 if mark == "P" else 0.0,
                          done=mark == "P"),)

    base = paired_run(tmp_path, "base", {"BabyAI": "PP", HOSTILE_ENV: "FP"}, model='<svg onload="alert(5)">')
    cand = paired_run(tmp_path, "cand", {"BabyAI": "FP", HOSTILE_ENV: "PP"}, turns=hostile,
                      checkpoint="<i>ckpt</i>/7")
    html = write_compare_html(compare_runs(base.path, cand.path), tmp_path / "c.html",
                              compress=compress).read_text(encoding="utf-8")
    page = parse(html)

    assert not [tag for tag, _ in page.tags if tag in ("img", "b", "i")]
    assert not [(tag, name) for tag, attrs in page.tags for name in attrs if name.startswith("on")]
    assert "&lt;svg onload=&#34;alert(5)&#34;&gt;" in html and "&lt;i&gt;ckpt&lt;/i&gt;/7" in html
    assert f"<h3>{escape(HOSTILE_ENV)} <span" in html  # an environment's name, too
    assert f'href="#pair={quote(HOSTILE_ENV + ":0:r0")}"' in html
    shipped = "\n".join((resources.files("pytest_agentgym.report") / "templates" / name).read_text(encoding="utf-8")
                        for name in ("trajectory.js", "compare.js"))
    assert [text for attrs, text in page.scripts if "type" not in attrs] == ["\n" + shipped + "\n"]
    for attrs, text in page.scripts:
        if "type" in attrs:
            assert "<" not in text and ">" not in text
    data = data_of(page)
    assert set(data["pairs"]) == {"BabyAI:0:r0", HOSTILE_ENV + ":0:r0"}
    side = data["pairs"]["BabyAI:0:r0"]["c"]
    turn = pair_records(page)[side["c"]][side["p"]]["turns"][0]
    assert (turn[1], turn[2], turn[3], turn[4]) == (HOSTILE_OBSERVATION, HOSTILE_REPLY, "<b>go</b>",
                                                    "</script><script>alert(3)</script>")
    assert {e for attrs, _ in page.scripts if "pair-chunk" in (attrs.get("class") or "")
            for e in [attrs["data-encoding"]]} == {"gzip-base64" if compress else "json"}
    for tag, attrs in without_the_icon(page.tags):  # self-contained: nothing to fetch
        for name in ("src", "href", "action", "poster", "data"):
            assert attrs.get(name) is None or attrs[name].startswith("#"), (tag, name, attrs[name])
        assert tag not in ("link", "iframe", "object", "embed", "base")
    assert "@import" not in html and "url(" not in html


# --------------------------------------------------------------------------- the report's section


def test_the_report_has_the_compare_section_when_its_baseline_is_readable(tmp_path):
    base = paired_run(tmp_path, "base", BASE)
    cand = paired_run(tmp_path, "cand", CAND, turns=candidate_turns, baseline=str(tmp_path / "base"))
    info = cand.read_info()
    cand.write_info(type(info).from_dict({**info.to_dict(), "settings": {"max_drop": 0.2, "max_error_rate": 0.2}}))
    html = render_run_dir(cand.path).read_text(encoding="utf-8")
    page = parse(html)
    expected = compare_runs(base.path, cand.path, margin=0.2, max_error_rate=0.2)
    assert '<section id="compare">' in html and "(margin 0.2)" in html
    assert str(escape(expected.environments["BabyAI"].line())) in html
    assert set(data_of(page)["pairs"]) == {"BabyAI:1:r0", "BabyAI:4:r0", "BabyAI:8:r0", "Maze:1:r1", "Maze:2:r1"}
    runnable = [text for attrs, text in page.scripts if "type" not in attrs]
    assert len(runnable) == 1 and "AgentgymTrajectory" in runnable[0] and "#pair=" in runnable[0]
    # The run's own comparison, when the caller has it, is what the section shows.
    given = compare_runs(base.path, cand.path, margin=0.3, max_error_rate=0.2)
    html = render_run_dir(cand.path, output=tmp_path / "given.html", comparison=given).read_text(encoding="utf-8")
    assert "(margin 0.3)" in html and "(margin 0.2)" not in html

    # No baseline: no section, no compare script. A baseline that is gone: a note, no section.
    alone = paired_run(tmp_path, "alone", BASE)
    html = render_run_dir(alone.path).read_text(encoding="utf-8")
    assert 'id="compare"' not in html and "compare-data" not in html and "#pair=" not in html
    lost = paired_run(tmp_path, "lost", BASE, baseline=str(tmp_path / "gone"))
    html = render_run_dir(lost.path).read_text(encoding="utf-8")
    assert "was not found from here" in html and 'id="compare"' not in html


def test_a_baseline_with_other_settings_is_shown_with_the_differences(tmp_path):
    paired_run(tmp_path, "base", {"Maze": "PPPF"})
    cand = paired_run(tmp_path, "cand", {"Maze": "PPP"}, baseline=str(tmp_path / "base"))
    html = render_run_dir(cand.path).read_text(encoding="utf-8")
    assert "Settings that differ between the runs (compared anyway)" in html
    assert "Maze tasks: only in the baseline: 3" in html


# --------------------------------------------------------------------------- the command


def test_compare_html_writes_the_page_and_refuses_a_path_it_cannot_write(pair, tmp_path, capsys):
    reports, _, _ = pair
    r = ["--reports", str(reports), "--max-error-rate", "0.2"]
    target = tmp_path / "out" / "compare.html"
    assert cli(["compare", "base", "cand", "--html", str(target), *r]) == 0  # inconclusive
    out = capsys.readouterr().out
    assert f"compare view: {target}" in out and target.is_file()
    assert 'id="compare-data"' in target.read_text(encoding="utf-8")

    assert cli(["compare", "base", "cand", "--html", str(tmp_path), *r]) == 2
    assert "is a directory; give the path of the page" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert cli(["compare", "base", "cand", "--html", str(tmp_path / "afile" / "c.html"), *r]) == 2
    assert "cannot write --html" in capsys.readouterr().err


# --------------------------------------------------------------------------- the pieces


def test_flip_kinds_worst_repeat_and_what_a_square_opens():
    def flip(task, repeat, base, cand):
        return Flip(task, repeat, base, cand, None, None)

    keys = [flip(0, 0, "pass", "pass"), flip(0, 1, "fail", "pass"), flip(0, 2, "fail", "fail"),
            flip(1, 0, "pass", "error"), flip(1, 1, "pass", "fail"), flip(2, 0, "missing", "pass"),
            flip(3, 0, "error", "error")]
    assert [flips.flip_kind(k) for k in keys] == ["both-pass", "fail-pass", "both-fail", "error", "pass-fail",
                                                   "error", "error"]
    cells = flips.flip_cells("Env", keys)
    assert [(c.task_index, c.kind, c.opens) for c in cells] == [
        (0, "both-fail", "Env:0:r1"), (1, "pass-fail", "Env:1:r1"), (2, "error", "Env:2:r0"), (3, "error", None)]
    assert cells[0].describe() == "task 0: 1 both fail, 1 fail → pass, 1 both pass"
    grid = str(flips.flip_grid("Env<1>", cells))
    assert "Env&lt;1&gt;" in grid and grid.count("<polygon") == 1  # a triangle on task 1's pass -> fail only
    legend = str(flips.flip_legend())
    assert [w for w in flips.FLIP_LABELS.values() if str(escape(w)) not in legend] == []


def _lab(hex_colour: str, matrix) -> tuple[float, float, float]:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    rgb = [linear(int(hex_colour[i:i + 2], 16) / 255) for i in (1, 3, 5)]
    if matrix:
        rgb = [min(1.0, max(0.0, sum(matrix[i][j] * rgb[j] for j in range(3)))) for i in range(3)]
    x, y, z = (sum(m * c for m, c in zip(row, rgb)) for row in
               ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505)))

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    fx, fy, fz = f(x / 0.95047), f(y), f(z / 1.08883)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


#: Machado, Oliveira and Fernandes (2009), severity 1, on linear RGB.
DICHROMACY = {
    "normal vision": None,
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}


@pytest.mark.parametrize("vision", DICHROMACY)
def test_flip_colours_stay_apart_for_colour_blind_readers(vision):
    lab = {kind: _lab(colour, DICHROMACY[vision]) for kind, colour in flips.FLIP_COLOURS.items()}
    closest = min((sum((p - q) ** 2 for p, q in zip(lab[a], lab[b])) ** 0.5, a, b)
                  for a, b in itertools.combinations(lab, 2))
    assert closest[0] > 20, f"{closest[1]} and {closest[2]} are {closest[0]:.1f} apart (CIE76) with {vision}"


def test_the_first_divergent_turn_and_what_differs():
    a = (make_turn(0, observation="o0", reply="r0", action="a0"), make_turn(1, observation="o1", reply="r1", action="a1"))
    assert first_divergence(a, a) is None
    b = (a[0], make_turn(1, observation="o1", reply="r1 but longer", action="a1"))
    assert first_divergence(a, b).describe() == "turn 1: the reply differs"
    c = (make_turn(0, observation="other", reply="r0", action=None), a[1])
    found = first_divergence(a, c)
    assert (found.position, found.fields) == (0, ("observation", "action"))
    assert found.describe() == "turn 0: the observation and the action differ"
    d = (make_turn(0, observation="x", reply="y", action="z"),)
    assert first_divergence(a, d).describe() == "turn 0: the observation, the reply and the action differ"
    assert first_divergence(a, a[:1]).describe() == "turn 1: the candidate ended after 1 turn(s)"
    assert first_divergence((), a).describe() == "turn 0: the baseline ended after 0 turn(s)"
    # Feedback and reward are not what the model did: they do not count.
    e = (a[0], make_turn(1, observation="o1", reply="r1", action="a1", feedback="else", reward=1.0))
    assert first_divergence(a, e) is None


# --------------------------------------------------------------------------- real runs of the reference agent


def test_a_real_run_with_a_baseline_reports_its_flips(pytester):
    """The reference agent on Maze 0-5, then its random policy with the first run as
    baseline: the second run's report (written by the plugin) has the compare view."""
    from helpers.projects import NODE, make_project, run, suite

    reference = make_project(pytester)
    random_policy = pytester.path / "nodes" / "random.yaml"
    random_policy.write_text(NODE.format(policy="random", latency_ms=0))
    suite(pytester, "maze", "environment: Maze\ntasks: 0-5\n")
    common = ("suites", "--agentgym-no-nats")
    first = run(pytester, *common, f"--agentgym-node={reference}", "--agentgym-run-id=ref")
    assert first.ret == 0, first.stdout.str()
    run(pytester, *common, f"--agentgym-node={random_policy}", "--agentgym-run-id=rand",
        "--agentgym-baseline=ref", "--agentgym-max-drop=0.1")  # its exit status is the gates' business
    reports = pytester.path / "reports"
    html = (reports / "rand" / "report.html").read_text(encoding="utf-8")
    page = parse(html)

    expected = compare_runs(reports / "ref", reports / "rand", margin=0.1)
    maze = expected.environments["Maze"]
    assert str(escape(maze.line())) in html and "(margin 0.1)" in html
    lost = [f for f in maze.flips if (f.base, f.cand) == ("pass", "fail")]
    assert lost, "the random policy lost no Maze task against the reference agent"
    grid = grid_classes(page)["Maze"]
    assert sorted(t for t, (cls, _) in grid.items() if cls == "flip-pass-fail") == [f.task_index for f in lost]
    data = data_of(page)
    chunks = pair_records(page)
    for flip in lost:
        pair = data["pairs"][f"Maze:{flip.task_index}:r{flip.repeat}"]
        base, cand = (chunks[side["c"]][side["p"]] for side in (pair["b"], pair["c"]))
        assert base["model"] != cand["model"] or base["turns"] != cand["turns"]
        assert pair["d"] is not None and pair["d"]["position"] < len(base["turns"])

"""A node the suites do not name (a renamed copy of a shipped profile, say) gets none of
their gates: the run says so plainly after collection, before its first episode, and
again in its summary, naming the nodes the suites do judge. Real runs: the reference
agent and an embedded Maze server."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, run, suite

pytestmark = pytest.mark.heavy

#: gates for testnode (the project's node) and gpu; none for any other node
MAZE = ("environment: Maze\ntasks: [17, 18]\nmax_rounds: 4\nnodes:\n"
        "  testnode: {gates: [success_rate >= 0.5]}\n  gpu: {gates: [success_rate >= 0.04]}\n")


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_a_node_the_suites_do_not_name_hears_that_nothing_judges_its_run(pytester, xdist):
    node = make_project(pytester)
    mine = node.with_name("mynode.yaml")
    mine.write_text(node.read_text().replace("name: testnode", "name: mynode"))
    suite(pytester, "maze", MAZE)
    result = run(pytester, "suites", f"--agentgym-node={mine}", *xdist)
    assert result.ret == 0, result.stdout.str()
    why = ("the suites give gates to node(s) gpu, testnode, none to node mynode: add "
           "'mynode: {gates: [[]...[]]}' under each suite's nodes:*")
    header = f"agentgym: NOTHING JUDGES THIS RUN, any model passes: {why}"
    # before the first episode: in the header under xdist (its controller plans first), else after collection
    before_items = ([header, "2 workers [[]2 items[]]"] if xdist
                    else ["collected 2 items", header, "suites/maze.yaml ..*"])
    result.stdout.fnmatch_lines([*before_items, "agentgym: no quality assertion: exit 0 means the run completed, "
                                 f"not that the model is good ({why})"])
    assert "GATE" not in result.stdout.str() and result.stdout.str().count("NOTHING JUDGES") == 1


def test_a_node_the_suites_name_is_judged_and_told_nothing(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", MAZE)
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["GATE PASSED: Maze success_rate >= 0.5*"])
    assert "NOTHING JUDGES" not in result.stdout.str() and "no quality assertion" not in result.stdout.str()


def test_a_run_whose_suites_have_no_gates_at_all_says_nothing_judges_it(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: [17]\nmax_rounds: 4\n")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "agentgym: NOTHING JUDGES THIS RUN, any model passes: give the suites gates or a min_reward; "
        "see docs/suites.md",
        "agentgym: no quality assertion: exit 0 means the run completed, not that the model is good "
        "(give the suites gates or a min_reward; see docs/suites.md)",
    ])

"""`pytest suites/moderate --agentgym-envs=SQLGym` on the local node, end to end: the
embedded SQLGym server and the reference agent spawned as real processes."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlgym", reason="the optional extra 'sqlgym' is not installed: pip install -e '.[sqlgym]'")

from helpers.projects import copy_shipped_suite, episodes, run  # noqa: E402

#: the dev questions in the reference policy's five forms (tests/servers/test_sqlgym_data.py)
SOLVED = {9428 + n for n in (0, 1, 2, 3, 4, 16, 17, 18, 19, 20)}


def copy_suite(pytester: pytest.Pytester) -> None:
    copy_shipped_suite(pytester, "suites/moderate/sqlgym.yaml")


def test_the_moderate_suite_runs_sqlgym_on_the_local_node(pytester, monkeypatch):
    monkeypatch.delenv("AGENTENV_SQLGYM_BIRD_PATH", raising=False)
    copy_suite(pytester)
    result = run(pytester, "suites/moderate", "--agentgym-envs=SQLGym", "--agentgym-run-id=sql")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*node local*", "collected 30 items",
                                 "GATE PASSED: SQLGym success_rate >= 0.3: success_rate = 0.333*",
                                 "*11 passed, 20 unsolved*"])
    records = episodes(pytester, "sql")
    assert sorted(r["task_index"] for r in records) == list(range(9428, 9458))
    assert {r["task_index"] for r in records if r["reward"] == 1.0} == SOLVED
    assert all(r["error"] is None and r["rounds"] == 1 and r["stop_reason"] == "done" for r in records)
    by_task = {r["task_index"]: r for r in records}
    first = by_task[9428]["turns"][0]
    assert first["observation"].endswith("\n\nHow many books are there?")
    assert (first["action"], first["feedback"]) == ("SELECT COUNT(*) FROM books", "[(12,)]")


@pytest.mark.faults
def test_a_task_the_data_does_not_have_is_an_env_error_naming_the_range(pytester, monkeypatch):
    monkeypatch.delenv("AGENTENV_SQLGYM_BIRD_PATH", raising=False)
    copy_suite(pytester)
    result = run(pytester, "suites/moderate", "--agentgym-envs=SQLGym", "--agentgym-tasks=9458",
                 "--agentgym-run-id=past")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "SQLGym[[]9458]: env error EnvHTTPError:*HTTP 500*item id 9458 is past the data: it has 30 dev "
        "questions, item ids 9428-9457*"])
    (record,) = episodes(pytester, "past")
    assert record["outcome"] == "error" and record["reward"] is None
    assert record["error"]["type"] == "EnvHTTPError"

"""The shipped SQLGym data set, its BIRD layout, the reference policy's five question
forms, and what a run is told when the 'sqlgym' extra is missing. None of this needs
the extra: the databases are checked with the standard library's sqlite3, by the
same rule as sqlgym's reward (result rows equal as sets)."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from helpers import DATA

from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.envs.sqlgym import extract_sql
from pytest_agentgym.model.reference.sqlgym import POLICY, read_observation
from pytest_agentgym.servers.embedded import sqlgym_bird
from pytest_agentgym.servers.embedded.sqlgym_bird import BirdDataError, build_bird, check_bird_dir, shipped_bird_dir
from pytest_agentgym.servers.pool import plan_server


@pytest.fixture(scope="module")
def bird(tmp_path_factory) -> Path:
    return build_bird(tmp_path_factory.mktemp("bird"))


def questions(bird: Path, split: str) -> list[dict]:
    return json.loads((bird / split / f"{split}.json").read_text())


def rows(bird: Path, split: str, db_id: str, sql: str) -> set:
    path = bird / split / f"{split}_databases" / db_id / f"{db_id}.sqlite"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return set(conn.execute(sql).fetchall())
    finally:
        conn.close()


def test_the_shipped_data_has_birds_layout_and_sizes(bird):
    assert check_bird_dir(bird) == {"train": 10, "dev": 30}
    dev = questions(bird, "dev")
    assert list(dev[0]) == ["question_id", "db_id", "question", "evidence", "SQL", "difficulty"]
    assert [q["question_id"] for q in dev] == list(range(30))
    assert list(questions(bird, "train")[0]) == ["db_id", "question", "evidence", "SQL"]
    assert {q["difficulty"] for q in dev} == {"simple", "moderate", "challenging"}
    assert {q["db_id"] for q in dev} == {"school_library", "city_transit"}


def test_tables_json_is_read_from_the_databases(bird):
    tables = {t["db_id"]: t for t in json.loads((bird / "dev" / "dev_tables.json").read_text())}
    transit = tables["city_transit"]
    assert transit["table_names_original"] == ["lines", "stations", "stops", "ridership"]
    columns = transit["column_names_original"]
    assert columns[:3] == [[-1, "*"], [0, "line_id"], [0, "name"]]
    assert transit["column_names"][4] == [0, "opened year"]
    index = {(transit["table_names_original"][t], name): i for i, (t, name) in enumerate(columns) if t >= 0}
    # stops has a two-column key: one nested list, as BIRD writes it
    assert [index["stops", "line_id"], index["stops", "station_id"]] in transit["primary_keys"]
    assert index["lines", "line_id"] in transit["primary_keys"]
    assert [index["stops", "station_id"], index["stations", "station_id"]] in transit["foreign_keys"]
    assert len(transit["column_types"]) == len(columns)


def test_every_gold_query_has_rows_and_a_fixed_wrong_answer_does_not_match(bird):
    for split in ("train", "dev"):
        for q in questions(bird, split):
            gold = rows(bird, split, q["db_id"], q["SQL"])
            assert gold, q["question"]
            assert rows(bird, split, q["db_id"], "SELECT 1") != gold, q["question"]


def test_a_gold_query_that_fails_stops_the_build(tmp_path, monkeypatch):
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "tiny.sql").write_text("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
    item = {"db_id": "tiny", "difficulty": "simple", "evidence": "", "question": "What is x?"}
    (sources / "questions.json").write_text(json.dumps(
        {"train": [{**item, "SQL": "SELECT x FROM t"}], "dev": [{**item, "SQL": "SELECT y FROM t"}]}))
    monkeypatch.setattr(sqlgym_bird, "_sources", lambda: sources)
    with pytest.raises(BirdDataError, match="gold SQL of 'What is x\\?' fails on tiny: no such column: y"):
        build_bird(tmp_path / "out")


def test_the_shipped_copy_is_built_once_per_version_of_the_sources(tmp_path):
    first = shipped_bird_dir(tmp_path)
    stamp = (first / "dev" / "dev.json").stat().st_mtime_ns
    assert shipped_bird_dir(tmp_path) == first
    assert (first / "dev" / "dev.json").stat().st_mtime_ns == stamp
    assert first.name == f"sqlgym-bird-{sqlgym_bird.sources_digest()}"
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no scratch directory left


def test_an_unwritable_cache_falls_back_to_the_temporary_directory(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(sqlgym_bird.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    built = shipped_bird_dir()
    assert built.parent.parent == tmp_path / "tmp" and check_bird_dir(built) == {"train": 10, "dev": 30}


def test_a_directory_without_bird_data_is_refused_with_the_layout_it_needs(tmp_path):
    with pytest.raises(BirdDataError, match="no BIRD split: expected dev/dev.json with dev/dev_tables.json"):
        check_bird_dir(tmp_path)
    with pytest.raises(BirdDataError, match="is not a directory"):
        check_bird_dir(tmp_path / "nowhere")


# -- the reference policy -------------------------------------------------------------------

#: dev questions in the policy's five forms (read off questions.json by hand)
IN_FORM_DEV = {0, 1, 2, 3, 4, 16, 17, 18, 19, 20}
IN_FORM_TRAIN = {0, 1, 2, 3, 4}


#: the original server's observation per item id (its recorded answers to GET /observation)
ORIGINAL_OBSERVATIONS = {
    int(e["name"].split()[1]): json.loads(e["answer"])
    for e in json.loads((DATA / "sqlgym_original_answers.json").read_text())["exchanges"]
    if e["name"].startswith("observation ") and e["status"] == 200
}


def observation(split: str, n: int) -> str:
    """What the original server shows for question n of ``split``."""
    return ORIGINAL_OBSERVATIONS[n + (9428 if split == "dev" else 0)]


def conversation(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "Answer with SQL."}, {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": text}]


@pytest.mark.parametrize("split, solved", [("dev", IN_FORM_DEV), ("train", IN_FORM_TRAIN)])
def test_the_policy_answers_exactly_the_questions_in_its_forms(bird, split, solved):
    right = set()
    for n, q in enumerate(questions(bird, split)):
        messages = conversation(observation(split, n))
        assert POLICY.recognizes(messages)
        sql = extract_sql(POLICY.reply(messages, random.Random(0)))
        if rows(bird, split, q["db_id"], sql) == rows(bird, split, q["db_id"], q["SQL"]):
            right.add(n)
    assert right == solved


def test_the_random_policy_answers_none_of_the_dev_questions(bird):
    for n, q in enumerate(questions(bird, "dev")):
        for seed in range(3):
            sql = extract_sql(POLICY.random_reply(conversation(observation("dev", n)), random.Random(seed)))
            assert sql.startswith("SELECT ") and rows(bird, "dev", q["db_id"], sql) != rows(
                bird, "dev", q["db_id"], q["SQL"]), (n, sql)


def test_the_policy_reads_only_the_observation_and_leaves_other_environments_alone(bird):
    schema, question = read_observation(observation("dev", 16))
    assert question == "How many stations are there?"
    assert schema.tables["stops"] == ("line id", "station id", "stop order")
    babyai = conversation("Your goal: go to the red ball\nIn front of you in this room, you can see several objects")
    assert not POLICY.recognizes(babyai)


# -- without the extra ----------------------------------------------------------------------


def test_without_the_extra_the_plan_says_which_package_to_install(monkeypatch):
    from pytest_agentgym.servers import embedded
    from pytest_agentgym.servers.embedded import sqlgym_bird

    monkeypatch.setattr(sqlgym_bird, "REQUIRED_MODULE", "no_such_module_for_this_test")
    plan = plan_server(load_default_specs()["SQLGym"], which=lambda name: None)
    assert plan.how == "unavailable"
    assert "needs the package 'no_such_module_for_this_test': pip install 'pytest-agentgym[sqlgym]'" in plan.detail
    monkeypatch.undo()
    assert plan_server(load_default_specs()["SQLGym"], which=lambda name: None).how == (
        "embedded" if embedded.missing_requirements("sqlgym") is None else "unavailable")

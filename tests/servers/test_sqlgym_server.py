"""The embedded SQLGym server (extra 'sqlgym'), run as a real process on loopback.

References, none produced by the code under test:

* tests/data/sqlgym_original_answers.json: AgentGym's original agentenv-sqlgym
  server's answers to the script in tests/helpers/sqlgym_exchanges.py, on the shipped
  data set (see the file's ``source``);
* the shipped questions' gold SQL, whose results were checked by hand when the
  data set was written (docs/envs/sqlgym.md).
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

pytest.importorskip("sqlgym", reason="the optional extra 'sqlgym' is not installed: pip install -e '.[sqlgym]'")

from helpers import DATA  # noqa: E402
from helpers.sqlgym_exchanges import play as play_script  # noqa: E402

from pytest_agentgym.envs import adapter_class  # noqa: E402
from pytest_agentgym.envs.protocol import EnvClient, EnvHTTPError  # noqa: E402
from pytest_agentgym.envs.spec import load_default_specs  # noqa: E402
from pytest_agentgym.servers.embedded.sqlgym_bird import BIRD_PATH_ENV, build_bird, shipped_bird_dir  # noqa: E402
from pytest_agentgym.servers.embedded.sqlgym_server import SQLGymService, Refused  # noqa: E402
from pytest_agentgym.servers.pool import embedded_command  # noqa: E402
from pytest_agentgym.process.errors import ServerStartError  # noqa: E402
from pytest_agentgym.process.managed import ManagedServer  # noqa: E402

GOLDEN = json.loads((DATA / "sqlgym_original_answers.json").read_text())["exchanges"]
DEV = 9428


def start(tmp_path_factory, bird_path: str = "") -> ManagedServer:
    """The embedded server; ``bird_path`` "" means the shipped data (whatever this shell sets)."""
    logs = tmp_path_factory.mktemp("sqlgym-logs")
    return ManagedServer("SQLGym", command=embedded_command("sqlgym"), startup_timeout=60,
                         log_path=logs / "sqlgym.log", env={BIRD_PATH_ENV: bird_path}).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start(tmp_path_factory)
    yield server
    server.stop()


def test_every_answer_equals_the_original_servers(server):
    """181 requests: every shipped question reset, observed and answered with its gold SQL
    and a wrong one; broken SQL; a long result; each error case. Bodies compared as text."""
    ours = play_script(server.url, shipped_bird_dir())
    assert [e["name"] for e in ours] == [e["name"] for e in GOLDEN]
    different = [(mine["name"], mine["status"], mine["answer"], theirs["status"], theirs["answer"])
                 for mine, theirs in zip(ours, GOLDEN) if mine != theirs]
    assert different == []


async def episode(url: str, task_index: int, reply: str):
    """One SQLGym episode through the harness's client and adapter: (opening, step result)."""
    adapter = adapter_class("SQLGym")()
    async with EnvClient(url, env="SQLGym", dialect="env_idx", timeout=30) as client:
        opening = await adapter.open(client, task_index)
        body = await client.step(opening.env_id, adapter.parse_action(reply).action)
        return opening, adapter.read_step(body)


def reply(sql: str) -> str:
    return f"Thought: I query the table.\n\nAction: ```sql\n{sql}\n```"


def test_a_correct_query_gets_reward_1_and_succeeds(server):
    # dev question 1: "How many books have a genre of 'Science'?" (3 books; gold SELECT COUNT(*) ...)
    opening, result = asyncio.run(episode(server.url, DEV + 1, reply(
        "SELECT COUNT(book_id) FROM books WHERE genre = 'Science'")))  # not the gold text, same rows
    assert opening.first_observation.endswith("\n\nHow many books have a genre of 'Science'?")
    assert opening.first_observation.startswith("school_library contains tables such as authors, books")
    assert (result.reward, result.done, result.observation) == (1.0, True, "[(3,)]")
    assert load_default_specs()["SQLGym"].success(result.reward, result.score)


def test_a_wrong_query_gets_reward_0(server):
    _, result = asyncio.run(episode(server.url, DEV + 1, reply("SELECT COUNT(*) FROM books")))
    assert (result.reward, result.done, result.observation) == (0.0, True, "[(12,)]")
    assert not load_default_specs()["SQLGym"].success(result.reward, result.score)


@pytest.mark.parametrize("sql, state", [
    ("SELEC title FROM books", 'near "SELEC": syntax error'),
    ("SELECT colour FROM books", "no such column: colour"),
    ("UPDATE books SET pages = 1", "attempt to write a readonly database"),
    ("SELECT 1; SELECT 2", "You can only execute one statement at a time."),
])
def test_a_broken_query_gets_reward_0_and_the_originals_error_text(server, sql, state):
    _, result = asyncio.run(episode(server.url, DEV, reply(sql)))
    assert (result.reward, result.done, result.observation) == (0.0, True, state)


def test_the_recorded_original_gave_those_error_texts():
    """The texts asserted above are the original server's (its answers to the script)."""
    states = {e["name"]: json.loads(e["answer"])["state"] for e in GOLDEN if e["name"].startswith("step ")
              and e["status"] == 200}
    assert states["step syntax"] == 'near "SELEC": syntax error'
    assert states["step write"] == "attempt to write a readonly database"
    assert states["step two_statements"] == "You can only execute one statement at a time."
    assert states["step long"].endswith("...") and len(states["step long"]) == 103


def test_an_item_id_past_the_data_is_http_500_naming_the_range(server):
    with pytest.raises(EnvHTTPError) as caught:
        asyncio.run(episode(server.url, DEV + 30, reply("SELECT 1")))
    assert caught.value.status_code == 500
    assert ("item id 9458 is past the data: it has 30 dev questions, item ids 9428-9457 (the shipped data set; "
            "set AGENTENV_SQLGYM_BIRD_PATH to use BIRD") in str(caught.value)


def test_the_data_directory_is_configurable(tmp_path, tmp_path_factory):
    """A BIRD directory of one's own (here: the shipped data, edited, without train)."""
    bird = build_bird(tmp_path / "bird")
    questions = json.loads((bird / "dev" / "dev.json").read_text())
    questions[0]["question"] = "How many authors are there?"
    questions[0]["SQL"] = "SELECT COUNT(*) FROM authors"
    (bird / "dev" / "dev.json").write_text(json.dumps(questions))
    for path in sorted((bird / "train").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (bird / "train").rmdir()
    own = start(tmp_path_factory, str(bird))
    try:
        opening, result = asyncio.run(episode(own.url, DEV, reply("SELECT COUNT(*) FROM authors")))
        assert opening.first_observation.endswith("\n\nHow many authors are there?")
        assert (result.reward, result.observation) == (1.0, "[(6,)]")
        with pytest.raises(EnvHTTPError) as caught:
            asyncio.run(episode(own.url, 0, reply("SELECT 1")))
        assert "item id 0 is a BIRD train question, but the data has no train/train.json" in str(caught.value)
    finally:
        own.stop()


def test_a_data_directory_without_bird_data_stops_the_server_saying_what_is_missing(tmp_path, tmp_path_factory):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ServerStartError) as caught:
        start(tmp_path_factory, str(tmp_path / "empty"))
    assert "has no BIRD split: expected dev/dev.json" in caught.value.log_tail
    assert BIRD_PATH_ENV in caught.value.log_tail


# -- the service itself, without HTTP -------------------------------------------------------


def test_every_create_gets_a_new_id_and_the_least_recently_used_env_is_dropped_past_the_limit():
    service = SQLGymService(shipped_bird_dir(), max_envs=3, rng=random.Random(0))
    first, second, third = (service.create() for _ in range(3))
    assert len({first, second, third}) == 3 and all(0 <= i <= 489576 for i in (first, second, third))
    service.reset(first, DEV)  # first is now the most recently used
    fourth = service.create()
    assert service.list_envs() == [third, first, fourth]
    with pytest.raises(Refused, match=f"Env {second} not found"):
        service.step(second, "SELECT 1")
    assert service.step(first, "SELECT COUNT(*) FROM books")["reward"] == 1.0


def test_two_envs_on_different_questions_do_not_share_state():
    """The original hands out 8 ids round-robin; here concurrent episodes stay apart."""
    service = SQLGymService(shipped_bird_dir(), rng=random.Random(1))
    envs = [service.create() for _ in range(12)]
    assert len(set(envs)) == 12
    service.reset(envs[0], DEV)        # How many books are there? (12)
    service.reset(envs[8], DEV + 16)   # How many stations are there? (9)
    assert service.step(envs[0], "SELECT COUNT(*) FROM books")["reward"] == 1.0
    assert service.step(envs[8], "SELECT COUNT(*) FROM stations")["reward"] == 1.0

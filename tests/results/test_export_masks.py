"""The training mask of ``pytest-agentgym export``: what a trainer learns from is what the
model sampled, never the environment's instructions, its messages or the scripted
acknowledgement in the opening.

The runs are real: the rollout service plays episodes against the reference agent, which
answers with token ids of a byte-level tokenizer (pytest_agentgym/model/reference/tokens.py),
so the ids marked as sampled can be decoded and compared with the replies. Each export is
loaded back with ``datasets`` (in a child process: importing it changes httpx's transport in
the importing process), as a trainer would load it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from helpers.masks import mask_spans as spans
from helpers.report_fixtures import make_episode, make_info, make_turn, write_run
from helpers.rollout_services import post, reference_agent, rollout_server

from pytest_agentgym.cli import main as cli
from pytest_agentgym.model.reference import tokens as T
from pytest_agentgym.results.conversation import conversation, opening_key, opening_of, read_sidecars
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.results.tokens import episode_tokens
from pytest_agentgym.results.training import model_weights

LOAD = """\
import json, sys
import datasets
datasets.disable_progress_bars()
how, path = sys.argv[1], sys.argv[2]
if how == "json":
    rows = datasets.load_dataset("json", data_files=path, split="train", cache_dir=sys.argv[3])
elif how == "dir":
    rows = datasets.load_dataset(path, split="train", cache_dir=sys.argv[3])
else:
    rows = datasets.load_from_disk(path)["train"]
print(json.dumps(rows.to_list()))
"""


def load(how: str, path, cache) -> list[dict]:
    """``path`` loaded by ``datasets`` (``json``: a JSON Lines file; ``dir``: load_dataset of a
    directory; ``disk``: load_from_disk), its rows as plain values."""
    done = subprocess.run([sys.executable, "-c", LOAD, how, str(path), str(cache)], capture_output=True,
                          text=True, timeout=300, env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
                                                       "HF_HOME": str(cache), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def token_run(tmp_path_factory):
    """A rollout-service run of Maze and TextCraft episodes whose endpoint sent token ids."""
    root = tmp_path_factory.mktemp("masks")
    agent = reference_agent(root)
    service = rollout_server(root / "service", "--node", "local", "--concurrency", "4", "--allow-base-url", agent.url)
    try:
        for env in ("maze", "textcraft"):
            body = {"env": env, "model": "reference", "base_url": agent.url, "ids": [0, 1], "n": 2,
                    "sampling": {"temperature": 1.0, "return_token_ids": True, "logprobs": True}}
            answer = post(service, body)
            assert answer.status_code == 200, answer.text[:2000]
    finally:
        service.stop()
        agent.stop()
    run = RunDir(root / "service" / "reports" / "rollouts")
    openings = read_sidecars(run.path).openings
    records = {r.episode_id: replace(r, opening=opening_of(r, openings)) for r in run.read().records}
    assert len(records) == 8 and all(r.error is None for r in records.values())
    return run.path, records


def check_chat_row(row: dict, record) -> None:
    """``row`` trains on ``record``'s replies and nothing else, in every shape it has."""
    opening = record.opening
    assert opening and any(m["role"] == "assistant" for m in opening), "no scripted acknowledgement to mask"
    replies = [turn.reply for turn in record.turns]
    messages = row["messages"]
    plain = [{"role": m["role"], "content": m["content"]} for m in messages]
    assert plain == conversation(record, opening, final_feedback=False)  # as it was sent
    weights = [m["weight"] for m in messages]
    # the opening (instructions and acknowledgement) and every environment message: 0
    assert weights[:len(opening)] == [0] * len(opening)
    assert all(w == 0 for m, w in zip(messages, weights) if m["role"] != "assistant")
    # 1 exactly on the replies, in turn order
    assert [m["content"] for m in messages if m["weight"] == 1] == replies
    assert sum(weights) == len(replies) >= 1
    # prompt-completion: the split falls before the first reply
    assert row["prompt"] == plain[:len(opening) + 1] and row["prompt"][-1]["role"] == "user"
    assert row["prompt"] + row["completion"] == plain and row["completion"][0]["content"] == replies[0]
    # the pre-tokenized sample: 1 exactly on the sampled ids, which decode to the replies
    ids, mask = row["input_ids"], row["assistant_masks"]
    assert len(ids) == len(mask) and set(mask) == {0, 1}
    assert [T.decode(ids[a:b]) for a, b in spans(mask)] == [reply + "<|im_end|>" for reply in replies]
    unmasked = T.decode([i for i, bit in zip(ids, mask) if not bit])
    for message in opening:  # the instructions and the acknowledgement are in the sample, untrained
        assert f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>" in unmasked
    view = row["tokens"]
    assert view["rerendered"] is None and ids == view["prompt_ids"] + view["completion_ids"]


def test_chat_jsonl_and_hf_dataset_mark_exactly_the_model_replies(token_run, tmp_path):
    run_dir, records = token_run
    assert cli(["export", str(run_dir)]) == 0
    rows = load("json", run_dir / "export" / "chat-jsonl.jsonl", tmp_path / "cache")
    assert len(rows) == 8
    for row in rows:
        check_chat_row(row, records[row["episode_id"]])
    assert any(len(records[r["episode_id"]].turns) > 1 for r in rows)  # env messages between replies

    out = tmp_path / "dataset"
    assert cli(["export", str(run_dir), "--format", "hf-dataset", "-o", str(out)]) == 0
    by_card = load("dir", out, tmp_path / "cache")
    from_disk = load("disk", out, tmp_path / "cache")
    assert by_card == from_disk == rows


def test_turns_jsonl_trains_each_turn_on_its_own_reply(token_run, tmp_path):
    run_dir, records = token_run
    assert cli(["export", str(run_dir), "--format", "turns-jsonl"]) == 0
    rows = load("json", run_dir / "export" / "turns-jsonl.jsonl", tmp_path / "cache")
    assert len(rows) == sum(len(r.turns) for r in records.values())
    for row in rows:
        record = records[row["episode_id"]]
        reply = record.turns[row["turn"]].reply
        weights = [m["weight"] for m in row["messages"]]
        assert weights == [0] * (len(weights) - 1) + [1] and row["messages"][-1]["content"] == reply
        assert row["completion"] == [{"role": "assistant", "content": reply}]
        assert row["prompt"] == [{"role": m["role"], "content": m["content"]} for m in row["messages"][:-1]]
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert ids == row["prompt_ids"] + row["completion_ids"]
        assert spans(mask) == [(len(row["prompt_ids"]), len(ids))]
        assert T.decode(ids[len(row["prompt_ids"]):]) == reply + "<|im_end|>"


def test_a_reply_a_server_rewrote_and_an_acknowledgement_equal_to_a_reply_are_not_trained():
    opening = ({"role": "user", "content": "You are in a maze. Reply with Action: ..."},
               {"role": "assistant", "content": "OK"})
    first = make_turn(0, observation="Start.", reply="OK", feedback="Moved.")  # a reply that reads as the ack
    rewritten = (*opening, {"role": "user", "content": "Start."},
                 {"role": "assistant", "content": "[earlier action]"}, {"role": "user", "content": "Moved."})
    second = replace(make_turn(1, observation="Moved.", reply="Action:\nup", done=True), sent=rewritten)
    record = replace(make_episode("Maze", 0, turns=(first, second)), opening=opening)
    messages = conversation(record, opening, final_feedback=False)
    assert model_weights(messages, record, opening) == [0, 0, 0, 0, 0, 1]
    plain = conversation(replace(record, turns=(first, replace(second, sent=None))), opening, final_feedback=False)
    assert model_weights(plain, record, opening) == [0, 0, 0, 1, 0, 1]


def with_opening(record):
    """``record`` with an opening of instructions and a scripted acknowledgement, as the engine keeps it."""
    sha, opening = opening_key([{"role": "user", "content": "Play."}, {"role": "assistant", "content": "OK"}])
    return replace(record, opening=opening, opening_sha256=sha)


def test_only_rewarded_and_the_notes_on_unrewarded_and_untokenized_episodes(tmp_path, capsys):
    episodes = [with_opening(make_episode("Maze", index, outcome=outcome, reward=reward))
                for index, (outcome, reward) in enumerate((("passed", 1.0), ("failed", 0.0), ("unsolved", 0.25),
                                                            ("unsolved", 0.0)))]
    # one episode whose endpoint sent token ids: turn 1's prompt repeats turn 0's and adds the env's [6]
    sampled = episode_tokens([{"prompt_token_ids": [1, 2, 3], "token_ids": [4, 5]},
                              {"prompt_token_ids": [1, 2, 3, 4, 5, 6], "token_ids": [7]}])
    episodes[0] = replace(episodes[0], tokens=sampled)
    run = write_run(tmp_path, make_info(environments=("Maze",)), episodes)
    assert cli(["export", str(run.path)]) == 0
    said = capsys.readouterr().out
    assert "4 episodes written" in said and "2 of the episodes kept have no reward above 0" in said
    assert "3 of the episodes kept have no token ids, so their rows have no input_ids" in said
    first, *rest = [json.loads(line) for line in (run.path / "export" / "chat-jsonl.jsonl").read_text().splitlines()]
    assert (first["input_ids"], first["assistant_masks"]) == ([1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 1, 1, 0, 1])
    assert not any("input_ids" in row for row in rest)
    assert cli(["export", str(run.path), "--only", "rewarded"]) == 0
    said = capsys.readouterr().out
    assert "2 episodes written" in said and "left out: 2 without a reward above 0" in said
    assert "1 of the episodes kept have no token ids" in said
    kept = [json.loads(line) for line in (run.path / "export" / "chat-jsonl.jsonl").read_text().splitlines()]
    assert [r["task_index"] for r in kept] == [0, 2] and "no reward above 0" not in said
    assert cli(["export", str(run.path), "--only", "success", "--format", "csv", "-o", "-"]) == 0
    assert capsys.readouterr().err.strip() == "1 episode written to standard output; left out: 3 not successful"


def test_the_help_says_what_each_only_keeps_and_its_default(capsys):
    with pytest.raises(SystemExit):
        cli(["export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for says in ("scored keeps every episode without an infrastructure error, reward 0 included",
                 "rewarded keeps those with a reward above 0", "Default: all for csv, scored for the training",
                 "datasets.load_from_disk(DIR)['train']"):
        assert says in text, says


def test_an_hf_dataset_without_the_datasets_package_says_load_from_disk_cannot_read_it(tmp_path):
    run = write_run(tmp_path, make_info(environments=("Maze",)), [with_opening(make_episode("Maze", 0))])
    hidden = tmp_path / "hidden"  # what an interpreter without the package finds: nothing to import
    hidden.mkdir()
    (hidden / "datasets.py").write_text("raise ModuleNotFoundError(\"No module named 'datasets'\")\n")
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "export", str(run.path), "--format",
                           "hf-dataset"], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{hidden}:{':'.join(sys.path)}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "no Arrow copy for datasets.load_from_disk: the datasets package is not installed" in done.stdout
    target = run.path / "export" / "hf-dataset"
    assert (target / "data" / "train.jsonl").exists() and not (target / "dataset_dict.json").exists()

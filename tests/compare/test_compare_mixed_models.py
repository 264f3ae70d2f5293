"""A run whose environment was played by two models (a model.outage failover) is not
compared as if one model had played it: that environment's verdict is an error that
names both models, the others are judged as usual."""

from __future__ import annotations

import json

from pytest_agentgym.compare.judgement import compare_runs

from helpers.compare_fixtures import paired_run


def _served_by(run_dir, env: str, model: str, tasks: set[int]) -> None:
    """Rewrite the records of ``env``'s ``tasks`` as played by ``model``."""
    path = run_dir.path / "episodes.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["env"] == env and record["task_index"] in tasks:
            record["model"] = model
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


def test_an_environment_of_two_models_is_an_error_naming_them(tmp_path):
    envs = {"BabyAI": "PPPPPPPPFF", "Maze": "PPPPPPPPPP"}
    base = paired_run(tmp_path, "base", envs)
    cand = paired_run(tmp_path, "cand", envs)
    _served_by(cand, "BabyAI", "qwen3:8b", {6, 7, 8, 9})
    comparison = compare_runs(base.path, cand.path)
    babyai, maze = comparison.environments["BabyAI"], comparison.environments["Maze"]
    assert babyai.verdict == "error"
    assert "the candidate run's not judged: episodes of two models: qwen3.5-9b (6), qwen3:8b (4)" in babyai.detail
    assert maze.verdict != "error"  # judged as usual (10 tasks: inconclusive)
    assert comparison.verdict == "error" and comparison.exit_code() == 1


def test_one_model_per_run_is_compared_as_before(tmp_path):
    envs = {"BabyAI": "PPPPPPPPFF"}
    base = paired_run(tmp_path, "base", envs)
    cand = paired_run(tmp_path, "cand", envs)
    assert compare_runs(base.path, cand.path).environments["BabyAI"].verdict != "error"

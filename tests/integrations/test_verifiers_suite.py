"""A suite runs a verifiers environment: ``environment: verifiers:<module>``
(pytest_agentgym/integrations/verifiers_suite.py, docs/training.md).

The environment is tests/helpers/vf_arith.py (six arithmetic questions, a rubric that
gives 1 for the right number); the model is the real reference agent with
tests/helpers/vf_arith_policy.py loaded, which answers sums and differences right and
products one too high. Most tests need verifiers (the ``verifiers`` extra; the ``test`` extra brings it
too) and are skipped, saying why, without it;
the test of what a Python without verifiers says runs everywhere (in a Python
that has it, an import stub stands in for its absence).

Real parts: pytest runs as a process, the reference agent as a process on
loopback, verifiers' own ``vf-eval`` as a process; the run's NATS events are
checked in its outbox (no server listens), against their schemas.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

# Imported now, before any test takes pytester's sys.modules snapshot: a test with
# pytester that first imports httpcore (httpx imports it on first use) has it dropped
# at teardown, and httpx then no longer maps the next copy's errors (a probe of the
# reference agent would raise httpcore.ConnectError). tests/run/test_run_faults.py meets the same.
import httpcore  # noqa: F401
import jsonschema
import pytest

from helpers import HELPERS, pythonpath
from helpers.projects import episodes, make_project, run, suite
from pytest_agentgym.config.suites import SuiteError, load_suite
from pytest_agentgym.publish import load_schema
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, free_port

pytestmark = pytest.mark.heavy  # pytest runs as processes: minutes in all

HAS_VERIFIERS = importlib.util.find_spec("verifiers") is not None
if HAS_VERIFIERS:  # likewise: a pytester test that first imports verifiers would drop half of it
    import verifiers.v1  # noqa: F401
    from verifiers.v1.env import RunSlot  # noqa: F401
needs_verifiers = pytest.mark.skipif(
    not HAS_VERIFIERS, reason="the verifiers extra is not installed (pip install -e '.[test]'; docs/training.md)")
#: what the reference agent's policy earns on the six questions (right on + and -, wrong on *)
EXPECTED = {0: 1.0, 1: 0.0, 2: 1.0, 3: 0.0, 4: 1.0, 5: 0.0}


@pytest.fixture(autouse=True)
def helpers_importable(monkeypatch):
    """tests/helpers/ on this process's path too: suites are loaded here (load_suite), and
    verifiers finds the taskset of vf_arith by its own name."""
    monkeypatch.syspath_prepend(str(HELPERS))


@pytest.fixture
def arith_env(monkeypatch):
    """The reference agent (launched by the run, or by the test) with the vf_arith policy,
    and tests/helpers/ importable by every process: vf_arith and its policy are loaded by
    their own names, as an installed verifiers environment would be."""
    monkeypatch.setenv("AGENTGYM_REFERENCE_POLICIES", "vf_arith_policy:ARITH")
    monkeypatch.setenv("PYTHONPATH", pythonpath(HELPERS))


@contextlib.contextmanager
def reference_agent(tmp_path: Path) -> Iterator[str]:
    """A reference agent of the test's own (with the vf_arith policy); its URL."""
    from pytest_agentgym.process.managed import ManagedServer

    agent = ManagedServer("reference agent", command=[sys.executable, "-m", "pytest_agentgym", "reference-agent",
                                                      "--port", "{port}"],
                          port=free_port(), health=HEALTH_ENDPOINT, startup_timeout=60, label="reference agent",
                          log_path=tmp_path / "agent.log", advice=Advice())
    agent.start()
    try:
        yield agent.url
    finally:
        agent.stop()


def rewards_by_vf_eval(tmp_path: Path, count: int) -> dict[int, float]:
    """verifiers' own evaluation of the first ``count`` examples (``vf-eval`` on the
    taskset vf_arith) against a reference agent of its own: task index -> reward."""
    vf_eval = Path(sys.executable).parent / "vf-eval"
    if not vf_eval.exists():
        pytest.skip(f"vf-eval is not installed next to {sys.executable}")
    with reference_agent(tmp_path) as url:
        out = tmp_path / "vf-out"
        result = subprocess.run(
            [str(vf_eval), "vf_arith", "--env.taskset.count", str(count), "--env.agent.runtime.type", "subprocess",
             "--model", "reference", "--client.base-url", url + "/v1",
             "--client.api-key-var", "AGENTGYM_TEST_NO_KEY", "--no-push", "--no-rich", "-o", str(out)],
            cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    (traces,) = out.rglob("traces.jsonl")
    rewards = {}
    for line in traces.read_text().splitlines():
        episode = json.loads(line)
        assert episode["ok"], episode["errors"]
        (trace,) = episode["traces"]
        rewards[episode["task"]["data"]["idx"]] = sum(r["score"] * r["weight"] for r in trace["rewards"].values())
    return rewards


@needs_verifiers
def test_a_suite_plays_each_example_and_scores_it_as_vf_eval_does(pytester, arith_env, tmp_path):
    node = make_project(pytester)
    suite(pytester, "arith", "environment: verifiers:vf_arith\nargs: {count: 6}\n"
                             "gates: [mean_reward >= 0.4, success_rate >= 0.6]\n")
    # NATS: nothing listens on that port, so every event waits in the run's outbox, as published
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=vf", "-rA",
                 f"--agentgym-nats=nats://127.0.0.1:{free_port()}")
    # the rewards are 1, 0, 1, 0, 1, 0: the mean (0.5) passes its gate, the success rate (50%) fails its
    result.stdout.fnmatch_lines(["agentgym: verifiers:vf_arith: max_rounds its own, sampling endpoint defaults",
                                 "PASSED suites/arith.yaml::verifiers:vf_arith::gate[[]mean_reward >= 0.4[]]",
                                 "FAILED suites/arith.yaml::verifiers:vf_arith::gate[[]success_rate >= 0.6[]]*"])
    assert result.ret == 1, result.stdout.str()[-3000:]
    records = {r["task_index"]: r for r in episodes(pytester, "vf")}
    assert sorted(records) == list(range(6))  # one item, one episode per example
    assert {i: r["reward"] for i, r in records.items()} == EXPECTED
    assert rewards_by_vf_eval(tmp_path, 6) == EXPECTED  # verifiers' own evaluation says the same
    for index, record in records.items():
        assert record["env"] == "verifiers:vf_arith" and record["error"] is None
        assert record["success"] is (record["reward"] == 1.0)
        assert record["outcome"] == ("passed" if record["success"] else "unsolved")
        (turn,) = record["turns"]  # the conversation: the question and the agent's one reply
        assert "Arithmetic quiz: what is" in turn["observation"] and "The answer is" in turn["reply"]
        assert record["rounds"] == 1 and turn["done"] and turn["reward"] == record["reward"]
        assert record["max_rounds"] is None  # the environment's own turn limits, not the node's
    assert "verifiers:vf_arith" in (pytester.path / "reports" / "vf" / "report.html").read_text()
    info = json.loads((pytester.path / "reports" / "vf" / "run.json").read_text())
    assert info["environments"] == ["verifiers:vf_arith"] and info["status"] == "finished"
    events = [json.loads(line) for line in (pytester.path / "reports" / "vf" / "outbox.jsonl").read_text().splitlines()]
    for event in events:
        jsonschema.validate(event["payload"], load_schema(event["subject"]))
    published = {e["payload"]["task_index"]: e["payload"]["reward"] for e in events
                 if e["subject"] == "agentgym.episode.completed.v1" and e["payload"]["env"] == "verifiers:vf_arith"}
    assert published == EXPECTED
    (batch,) = [e["payload"] for e in events if e["subject"] == "agentgym.eval.batch.completed.v1"]
    assert (batch["env"], batch["n_episodes"]) == ("verifiers:vf_arith", 6)


@needs_verifiers
def test_a_multi_turn_example_is_recorded_turn_by_turn(pytester, arith_env, tmp_path):
    node = make_project(pytester)
    suite(pytester, "arith", "environment: verifiers:vf_arith\nargs: {count: 2, follow_up: true}\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=two")
    assert result.parseoutcomes() == {"passed": 1, "unsolved": 1}, result.stdout.str()[-2000:]
    records = {r["task_index"]: r for r in episodes(pytester, "two")}
    assert {i: r["reward"] for i, r in records.items()} == rewards_by_env_api(tmp_path, count=2, follow_up=True)
    assert {i: r["reward"] for i, r in records.items()} == {0: 1.0, 1: 0.0}
    first, second = records[0]["turns"]
    assert first["observation"].startswith("Arithmetic quiz: what is 3 + 4?") and first["reply"].endswith("is 7")
    assert first["feedback"] == second["observation"] == "Now double your answer."
    assert (first["reward"], first["done"]) == (0.0, False)
    assert (second["reply"], second["feedback"], second["reward"], second["done"]) == ("Twice 7 is 14", "", 1.0, True)
    assert records[0]["rounds"] == 2 and records[0]["prompt_tokens"] == first["prompt_tokens"] + second["prompt_tokens"]


def rewards_by_env_api(tmp_path: Path, **args) -> dict[int, float]:
    """The rewards verifiers' own API gives (``load_environment``, ``Env.run_slot``),
    against a reference agent of the test's own: task index -> reward."""
    import verifiers.v1 as vf
    from verifiers.v1.env import RunSlot

    from helpers import vf_arith

    env = vf_arith.load_environment(**args)

    async def play(url: str) -> list:
        ctx = vf.ModelContext(model="reference", sampling=vf.SamplingConfig(),
                              client=vf.EvalClientConfig(base_url=url + "/v1", api_key_var="AGENTGYM_TEST_NO_KEY"))
        async with env.serving():
            return [await env.run_slot(RunSlot(task), ctx) for task in env.taskset]

    with reference_agent(tmp_path) as url:
        played = asyncio.run(play(url))
    assert all(episode.ok for episode in played)
    return {index: episode.traces[0].reward for index, episode in enumerate(played)}


@needs_verifiers
def test_items_have_ids_that_k_and_repeats_select_and_preflight_probes_no_server(pytester, arith_env):
    make_project(pytester)
    suite(pytester, "arith", "environment: verifiers:vf_arith\nargs: {count: 3}\nrepeat: 2\n")
    result = run(pytester, "suites", "--collect-only", "-q", "-k", "vf_arith and (1 or 2-r2)",
                 "--agentgym-envs=verifiers:vf_arith")
    result.stdout.fnmatch_lines(["suites/arith.yaml::verifiers:vf_arith[[]1[]]",
                                 "suites/arith.yaml::verifiers:vf_arith[[]1-r2[]]",
                                 "suites/arith.yaml::verifiers:vf_arith[[]2-r2[]]", "3/6 tests collected*"])
    result = run(pytester, "suites", "--agentgym-preflight")  # no server to probe: it is in this process
    result.stdout.fnmatch_lines(["  env verifiers:vf_arith: no server: verifiers environment vf_arith "
                                 "(3 examples, verifiers 0.4*), played in-process", "preflight: ready"])
    result = run(pytester, "suites", "--collect-only", "-q", "--agentgym-tasks=2-4")  # there are 3 examples
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*arith.yaml: verifiers:vf_arith has no task(s) 3, 4: its task indices are 0-2 "
                                 "(its taskset's examples, as load_environment built them)*"])


@needs_verifiers
def test_an_exception_in_the_rubric_is_an_env_error_and_a_refusing_model_a_model_error(pytester, arith_env):
    node = make_project(pytester)
    suite(pytester, "arith", "environment: verifiers:vf_arith\nargs: {count: 2, broken_rubric: true}\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=env")
    # the sum is scored; the product's rubric raised (1 error of 2 episodes is within the binomial
    # error budget since issue 40, so no budget item: docs/suites.md)
    result.assert_outcomes(passed=1, errors=1)
    records = {r["task_index"]: r for r in episodes(pytester, "env")}
    assert records[0]["reward"] == 1.0 and records[0]["error"] is None
    error = records[1]["error"]
    assert (error["where"], error["type"]) == ("env", "TaskError") and "broken on products" in error["message"]
    assert len(records[1]["retried"]) == 1  # an environment's error is tried again, as for any environment

    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=model",
                 "--agentgym-model=no-such-model")
    result.assert_outcomes(errors=3)
    for record in episodes(pytester, "model"):
        error = record["error"]
        assert (error["where"], error["type"]) == ("model", "ProviderError") and "HTTP 404" in error["message"]
        assert record["retried"] == []  # a model's refusal (HTTP 4xx) would be refused again


@needs_verifiers
def test_the_episode_budget_bounds_a_rollout_whose_model_does_not_answer_in_time(pytester, arith_env):
    node = make_project(pytester, latency_ms=3000)  # the agent answers after 3 s; the budget is 0.5 s
    suite(pytester, "arith", "environment: verifiers:vf_arith\nargs: {count: 1}\nepisode_timeout: 0.5\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=slow")
    result.assert_outcomes(errors=1)  # the episode (1 of 1 errored is within the binomial error budget)
    (record,) = episodes(pytester, "slow")
    assert (record["error"]["where"], record["error"]["type"]) == ("model", "EndpointTimeout")
    assert "no reply within the episode budget of 0.5 s" in record["error"]["message"]
    assert len(record["retried"]) == 1 and record["duration_s"] < 3  # each attempt cut at 0.5 s


def test_without_verifiers_a_suite_naming_one_says_how_to_install_it(pytester, monkeypatch):
    if HAS_VERIFIERS:  # stand in for its absence: an import of verifiers fails, as where it is not installed
        stub = pytester.mkdir("no_verifiers")
        (stub / "verifiers").mkdir()
        (stub / "verifiers" / "__init__.py").write_text("raise ImportError('No module named verifiers')\n")
        monkeypatch.setenv("PYTHONPATH", pythonpath(stub))
    node = make_project(pytester)
    suite(pytester, "arith", "environment: verifiers:vf_arith\n")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*arith.yaml: environment verifiers:vf_arith needs the verifiers package, which "
                                 "this Python (*) does not have; install the extra into this environment: "
                                 "pip install 'pytest-agentgym[[]verifiers[]]'*"])


@needs_verifiers
@pytest.mark.parametrize("body, message", [
    ("environment: verifiers:no_such_env_module\n",
     "environment verifiers:no_such_env_module: there is no module no_such_env_module on this Python's path"),
    ("environment: verifiers:projects\n",
     "environment verifiers:projects: module projects (*) has no load_environment function"),
    ("environment: 'verifiers: '\n", "environment 'verifiers: ' names no module"),
    ("environment: verifiers:vf_arith\nargs: {count: 2, colour: red}\n",
     "environment verifiers:vf_arith: vf_arith.load_environment(**{'count': 2, 'colour': 'red'}) raised TypeError: *unexpected keyword*"),
    ("environment: verifiers:vf_arith\nargs: [2]\n", "'args' must be a mapping of load_environment's*"),
    ("environment: verifiers:vf_arith\nmax_rounds: 4\n", "a verifiers environment sets its own turn limits*"),
    ("environment: verifiers:vf_arith\ntasks: 0-9\n", None),  # loads; collection refuses 6-9 (test above)
    ("environment: TextCraft\ntasks: 0-3\nargs: {count: 2}\n", "'args' is for a verifiers environment*"),
])
def test_a_suite_that_cannot_load_its_environment_says_why(tmp_path, body, message):
    import fnmatch

    path = tmp_path / "suite.yaml"
    path.write_text(body)
    if message is None:
        specs: dict = {}
        loaded = load_suite(path, "local", ["TextCraft"], specs)
        assert loaded.tasks == tuple(range(10)) and specs["verifiers:vf_arith"].tasks == "0-5"
        return
    with pytest.raises(SuiteError) as raised:
        load_suite(path, "local", ["TextCraft"], {})
    assert fnmatch.fnmatch(str(raised.value), f"{path}: {message}*"), str(raised.value)


@needs_verifiers
def test_two_suites_of_one_environment_must_give_it_the_same_args(tmp_path):
    specs: dict = {}
    first, second, third = (tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml")
    first.write_text("environment: verifiers:vf_arith\nargs: {count: 3}\ntasks: 0\n")
    second.write_text("environment: verifiers:vf_arith\nargs: {count: 3}\ntasks: 1-2\n")
    third.write_text("environment: verifiers:vf_arith\nargs: {count: 4}\n")
    assert load_suite(first, "local", [], specs).tasks == (0,)
    assert load_suite(second, "local", [], specs).tasks == (1, 2)
    with pytest.raises(SuiteError, match=r"c.yaml: environment verifiers:vf_arith is loaded with args \{'count': 3\} "
                                         r"by another suite and \{'count': 4\} here; .* give both suites the same"):
        load_suite(third, "local", [], specs)
    assert load_suite(third, "local", [], {}).tasks == (0, 1, 2, 3)  # another run may

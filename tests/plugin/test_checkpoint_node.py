"""--agentgym-checkpoint on a node whose model chain would not play it is a usage error (exit 4)
naming the node and the nodes that serve checkpoints, before anything starts: on the default
``local`` node the run would otherwise play the reference agent and pass, a green run of
another model. A real pytest in a subprocess, as a user types it."""

from __future__ import annotations

import pytest

from helpers.projects import run, suite

LAB = "name: lab\nmodel:\n  endpoints:\n    - {kind: reference}\n    - {kind: vllm}   # serves --agentgym-checkpoint\n"


@pytest.fixture
def project(pytester):
    (pytester.path / "suites").mkdir()
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    (pytester.path / "configs" / "nodes").mkdir(parents=True)
    (pytester.path / "configs" / "nodes" / "lab.yaml").write_text(LAB)
    return pytester


def test_a_checkpoint_on_the_local_node_is_a_usage_error_naming_the_nodes_that_serve_one(project):
    result = run(project, "suites", "--agentgym-checkpoint=ckpt/step-100")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([
        "ERROR: --agentgym-checkpoint=ckpt/step-100: node local (*local.yaml) serves no checkpoint (its model chain: "
        "reference; only a vllm entry without a url launches one), so the run would play another model. Nodes that "
        "serve checkpoints: cpu, gpu, lab; run on one (--agentgym-node=cpu), or drop --agentgym-checkpoint"])
    assert "agentgym:" not in result.stdout.str() and not (project.path / "reports").exists()


def test_an_attached_vllm_does_not_serve_the_checkpoint_either(project):
    attached = project.path / "attached.yaml"
    attached.write_text("name: attached\nmodel: {endpoints: [{kind: vllm, url: 'http://127.0.0.1:9', model: m}]}\n")
    result = run(project, "suites", f"--agentgym-node={attached}", "--agentgym-checkpoint=ckpt/step-100",
                 "--agentgym-preflight")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: *node attached (*attached.yaml) serves no checkpoint (its model chain: "
                                 "vllm (attached); *"])


def test_the_base_url_replaces_the_chain_that_would_serve_the_checkpoint(project):
    result = run(project, "suites", "--agentgym-node=lab", "--agentgym-checkpoint=ckpt/step-100",
                 "--agentgym-base-url=http://127.0.0.1:9/v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: --agentgym-checkpoint=ckpt/step-100 and --agentgym-base-url do not go "
                                 "together: *; drop one of them"])


def test_a_node_with_a_vllm_entry_takes_the_checkpoint(project):
    result = run(project, "suites", "--agentgym-node=lab", "--agentgym-checkpoint=ckpt/step-100", "--collect-only",
                 "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*Maze[[]0[]]*"])

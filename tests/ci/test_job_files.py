"""The CI job files that `pytest-agentgym init` writes (pytest_agentgym/scaffold/) do what
docs/ci.md says, run as written: a push to the default branch plays the battery and keeps its
run as the baseline; a pull (merge) request then plays the battery on its own commit against
that baseline, passing for an unchanged agent and failing for a worse one; with no baseline
kept yet the request's job fails before it plays anything, saying why.

The project is a git repository holding what `pytest-agentgym init` wrote (the suites, the
job files where each CI reads them) and a pytest.ini that selects a few Maze tasks (a
project's own choice, so each job takes seconds); its model is the local node's reference
agent. tests/helpers/ci_runners.py stands in for the CI
service and nothing more: the job's steps run with bash in a fresh clone at the commit.
Substituted: `pip install pytest-agentgym` is a recording no-op (the checkout is installed
in the tests' virtual environment already), GitHub's artifact store is reached through a
stand-in `gh`, GitLab's through a real HTTP server on loopback that `curl` downloads from.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import REPO
from helpers.ci_runners import DEFAULT_BRANCH, VENV_BIN, GitHubActions, GitLabCI
from pytest_agentgym.cli.init import JOB_FILE_PLACES

pytestmark = pytest.mark.heavy

SCAFFOLD = REPO / "pytest_agentgym" / "scaffold"

#: The commit under review swaps the agent for one that plays random moves: its own node
#: profile (a name of its own, so the suites' gates for the local node do not judge it and
#: the paired comparison with the baseline does).
WORSE_NODE = """\
name: worse-agent
model:
  endpoints:
    - {kind: reference, policy: random, seed: 0}
  sampling: {temperature: 0.0, max_tokens: 256}
limits: {max_rounds: 20, episode_timeout: 60, concurrency: 4}
envs: {servers: spawn}
"""

PYTEST_INI = """\
[pytest]
# eight Maze tasks: enough for the paired comparison to find a regression, and seconds to play
agentgym_envs = Maze
agentgym_tasks = 0-7
"""


@dataclass
class Service:
    """A CI service as the tests meet it: its runner, where `init` puts its job file, the
    names of the file's two jobs and their artifacts, and the events that run them."""

    runner_class: type
    job_file: str
    baseline_job: str
    candidate_job: str
    baseline_artifact: str
    candidate_artifact: str
    pytest_step: str  # the step whose exit status is the candidate run's
    request_event: str

    def start(self, repo: Path, scratch: Path) -> None:
        self.runner = self.runner_class(repo / self.job_file, repo, scratch)

    def push(self, job: str, sha: str):
        return self.runner.run_job(job, event="push", branch=DEFAULT_BRANCH, sha=sha)

    def request(self, job: str, sha: str, branch: str):
        return self.runner.run_job(job, event=self.request_event, branch=branch, sha=sha)


SERVICES = {
    "github-actions": lambda: Service(
        GitHubActions, job_file=".github/workflows/agentgym.yml", baseline_job="baseline",
        candidate_job="candidate", baseline_artifact="agentgym-baseline", candidate_artifact="agentgym-candidate",
        pytest_step="Play the battery against the baseline", request_event="pull_request"),
    # a GitLab job's artifacts go by the job's name, and its script is one step
    "gitlab-ci": lambda: Service(
        GitLabCI, job_file=".gitlab-ci.yml", baseline_job="agentgym-baseline",
        candidate_job="agentgym-candidate", baseline_artifact="agentgym-baseline",
        candidate_artifact="agentgym-candidate", pytest_step="agentgym-candidate",
        request_event="merge_request_event"),
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.org", "PATH": "/usr/bin:/bin",
                               "GIT_COMMITTER_NAME": "ci", "GIT_COMMITTER_EMAIL": "ci@example.org"})
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The user's project on the default branch: what `pytest-agentgym init` writes (the
    suites, the job files), a pytest.ini."""
    repo = tmp_path / "repo"
    subprocess.run([str(VENV_BIN / "pytest-agentgym"), "init", str(repo)], check=True, capture_output=True)
    for name, place in JOB_FILE_PLACES.items():
        assert (repo / place).read_text() == (SCAFFOLD / name).read_text()
    (repo / "pytest.ini").write_text(PYTEST_INI)
    (repo / ".gitignore").write_text("reports/\n")
    git(repo.parent, "init", "-q", "-b", DEFAULT_BRANCH, str(repo))
    return repo


@pytest.fixture(params=list(SERVICES))
def service(request, repo: Path, tmp_path: Path):
    service = SERVICES[request.param]()
    service.start(repo, tmp_path / "runner")
    yield service
    service.runner.close()


def run_json(checkout: Path, run_id: str) -> dict:
    return json.loads((checkout / "reports" / run_id / "run.json").read_text())


def test_a_request_is_gated_against_the_baseline_the_default_branch_kept(service, repo: Path) -> None:
    main = commit(repo, "the project")
    assert service.push(service.candidate_job, main) is None  # a push makes no candidate

    baseline = service.push(service.baseline_job, main)
    assert baseline.ok, baseline.output
    assert service.runner.pip_calls() == ["install pytest-agentgym"]
    assert run_json(baseline.checkout, f"baseline-{main}")["status"] == "finished"
    assert baseline.artifacts == [service.baseline_artifact]

    git(repo, "checkout", "-q", "-b", "same-agent")
    (repo / "NOTES.md").write_text("a change that leaves the agent as it is\n")
    same = commit(repo, "same agent")
    assert service.request(service.baseline_job, same, "same-agent") is None  # a request makes no baseline
    candidate = service.request(service.candidate_job, same, "same-agent")
    assert candidate.ok, candidate.output
    assert candidate.rc(service.pytest_step) == 0
    assert f"baseline: baseline-{main}" in candidate.output
    info = run_json(candidate.checkout, f"candidate-{same}")
    assert info["baseline"] == str((candidate.checkout / "baseline").resolve())
    compared = [gate for gate in info["gates"] if gate["gate"].startswith("baseline")]
    # eight tasks cannot show that no drop beyond the margin happened: inconclusive, which passes
    assert [(gate["gate"], gate["outcome"]) for gate in compared] \
        == [("baseline success, margin 0.05", "inconclusive")], candidate.output

    git(repo, "checkout", "-q", "-b", "worse-agent", DEFAULT_BRANCH)
    (repo / "nodes").mkdir()
    (repo / "nodes" / "worse.yaml").write_text(WORSE_NODE)
    (repo / "pytest.ini").write_text(PYTEST_INI + "agentgym_node = nodes/worse.yaml\n")
    worse = commit(repo, "a worse agent")
    regressed = service.request(service.candidate_job, worse, "worse-agent")
    assert not regressed.ok
    assert regressed.artifacts == [service.candidate_artifact]  # kept for reading though it failed
    assert regressed.rc(service.pytest_step) == 1, regressed.output
    info = run_json(regressed.checkout, f"candidate-{worse}")
    assert info["baseline"] == str((regressed.checkout / "baseline").resolve())
    assert info["settings"]["stop_when_decided"] is True
    compared = [gate for gate in info["gates"] if gate["gate"].startswith("baseline")]
    assert [gate["outcome"] for gate in compared] == ["failed"], regressed.output
    assert "REGRESSED" in compared[0]["detail"]


def test_a_request_with_no_baseline_kept_fails_before_it_plays(service, repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "first-request")
    sha = commit(repo, "the project, before any push to the default branch")
    candidate = service.request(service.candidate_job, sha, "first-request")
    assert not candidate.ok
    assert "no baseline:" in candidate.output and DEFAULT_BRANCH in candidate.output, candidate.output
    assert not (candidate.checkout / "reports").exists()  # nothing was played

"""What a CI service provides around the job files that `pytest-agentgym init` writes
(pytest_agentgym/scaffold/), so that tests/ci/ can run their steps as written.

A runner takes a job from the parsed YAML, decides whether the event runs it (the job's
`if:` or `rules:`), runs each `run:` / `script:` step with bash in a fresh clone of the
project's repository at the commit, and keeps the job's artifacts between pipelines in a store of its own, as the service does.
It evaluates only the expressions and variables the job files use: one it does not know
fails the test, so a job file cannot lean on something nobody ran. What stands in for the
service, and nothing else:

- ``pip``: a script on PATH that records its arguments and installs nothing, because the
  checkout is installed in the tests' virtual environment already (its ``python``,
  ``pytest`` and ``pytest-agentgym`` come next on PATH);
- GitHub Actions: ``actions/checkout`` and ``actions/setup-python`` do nothing (the project
  is the checkout, the python is the tests'), ``actions/upload-artifact`` copies its ``path``
  into the store, and ``gh`` (``run list``, ``run download``) is a script over the store;
- GitLab CI: the job artifacts API that ``curl`` downloads from is a real HTTP server on
  loopback, serving the store's zip files.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

#: The tests' virtual environment: its python, pytest and pytest-agentgym.
VENV_BIN = Path(sys.executable).parent
DEFAULT_BRANCH = "main"
REPOSITORY = "acme/agents"
TOKEN = "ci-token-for-tests"

PIP = """#!/bin/sh
# stands for pip: the checkout is installed in the tests' virtual environment already
echo "$*" >> "{log}"
"""

GH = '''#!{python}
"""Stands for the GitHub CLI over the tests' artifact store: ``run list`` and ``run download``."""
import argparse, json, os, shutil, sys
from pathlib import Path

STORE = Path({store!r})
if not os.environ.get("GH_TOKEN"):
    sys.exit("gh: set GH_TOKEN (in Actions: env: GH_TOKEN: ${{{{ github.token }}}})")
parser = argparse.ArgumentParser(prog="gh")
runs = parser.add_subparsers(dest="group", required=True).add_parser("run").add_subparsers(dest="command", required=True)
listing = runs.add_parser("list")
for flag in ("--repo", "--workflow", "--branch", "--status", "--json", "--jq"):
    listing.add_argument(flag)
listing.add_argument("--limit", type=int, default=20)
download = runs.add_parser("download")
download.add_argument("run_id")
download.add_argument("--repo")
download.add_argument("--name", required=True)
download.add_argument("--dir", required=True)
args = parser.parse_args()
known = json.loads((STORE / "runs.json").read_text())
if args.command == "list":
    if (args.json, args.jq) != ("databaseId", ".[0].databaseId"):
        sys.exit(f"gh shim: only --json databaseId --jq .[0].databaseId is emulated, not {{args.json}} {{args.jq}}")
    found = [run for run in reversed(known) if run["repo"] == args.repo and run["workflow"] == args.workflow
             and args.branch in (None, run["branch"]) and args.status in (None, run["status"])][:args.limit]
    print(found[0]["id"] if found else "")
else:
    source = STORE / args.run_id / args.name
    if not source.is_dir():
        sys.exit(f"no artifact {{args.name!r}} in run {{args.run_id}}")
    shutil.copytree(source, args.dir, dirs_exist_ok=True)
'''


@dataclass
class JobResult:
    """A job's steps as they ran: the exit status of each and everything they printed."""

    checkout: Path
    steps: list[tuple[str, int]] = field(default_factory=list)
    output: str = ""
    #: the names of the artifacts the job kept
    artifacts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(rc == 0 for _, rc in self.steps)

    def rc(self, name_part: str) -> int:
        """The exit status of the step whose name (or command) contains ``name_part``."""
        matches = [rc for name, rc in self.steps if name_part in name]
        assert len(matches) == 1, f"{len(matches)} steps match {name_part!r}: {self.steps}"
        return matches[0]


class Runner:
    """What both services share: the shims on PATH, the environment, bash."""

    def __init__(self, repo: Path, scratch: Path) -> None:
        self.repo = repo
        self.scratch = scratch
        self.jobs = 0
        self.shims = scratch / "bin"
        self.shims.mkdir(parents=True)
        self.pip_log = scratch / "pip.log"
        _script(self.shims / "pip", PIP.format(log=self.pip_log))
        self.home = scratch / "home"
        self.home.mkdir()

    def base_env(self) -> dict[str, str]:
        env = {"PATH": os.pathsep.join([str(self.shims), str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
               "HOME": str(self.home), "LANG": "C.UTF-8", "CI": "true"}
        if "PYTHONDONTWRITEBYTECODE" in os.environ:  # the machine's habit, not the runner's
            env["PYTHONDONTWRITEBYTECODE"] = os.environ["PYTHONDONTWRITEBYTECODE"]
        return env

    def checkout(self, sha: str) -> Path:
        """A fresh clone of the repository at ``sha``, as each job starts from."""
        self.jobs += 1
        path = self.scratch / f"job-{self.jobs}"
        subprocess.run(["git", "clone", "-q", str(self.repo), str(path)], check=True)
        subprocess.run(["git", "-C", str(path), "checkout", "-q", sha], check=True)
        return path

    def bash(self, script: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        return done.returncode, done.stdout

    def close(self) -> None:
        """Stop what the runner serves (nothing, unless a service overrides this)."""

    def pip_calls(self) -> list[str]:
        return self.pip_log.read_text().splitlines() if self.pip_log.exists() else []


class GitHubActions(Runner):
    """Runs a job of a GitHub Actions workflow file; each call is one workflow run."""

    def __init__(self, workflow: Path, repo: Path, scratch: Path) -> None:
        super().__init__(repo, scratch)
        self.workflow = yaml.safe_load(workflow.read_text())
        self.store = scratch / "github-store"
        self.store.mkdir()
        (self.store / "runs.json").write_text("[]")
        _script(self.shims / "gh", GH.format(python=sys.executable, store=str(self.store)))

    def run_job(self, name: str, *, event: str, branch: str, sha: str) -> JobResult | None:
        """One workflow run of ``event`` on ``branch`` at ``sha``: job ``name`` if its `if:`
        lets it run (else None); its artifacts are stored under the run's id."""
        runs = json.loads((self.store / "runs.json").read_text())
        run_id = str(1000 + len(runs))
        github = {"sha": sha, "event_name": event, "token": TOKEN, "workflow": self.workflow["name"],
                  "repository": REPOSITORY, "event": {"repository": {"default_branch": DEFAULT_BRANCH}}}
        job = self.workflow["jobs"][name]
        if not _github_condition(job.get("if", "success()"), github, failed=False):
            return None
        checkout = self.checkout(sha)
        env = self.base_env() | {"GITHUB_ACTIONS": "true", "GITHUB_SHA": sha, "GITHUB_EVENT_NAME": event,
                                 "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_WORKFLOW": self.workflow["name"],
                                 "GITHUB_WORKSPACE": str(checkout), "GITHUB_REF_NAME": branch}
        for scope in (self.workflow, job):
            env |= {key: _github_text(str(value), github) for key, value in (scope.get("env") or {}).items()}
        result = JobResult(checkout)
        for step in job["steps"]:
            if not _github_condition(step.get("if", "success()"), github, failed=not result.ok):
                continue
            label = step.get("name") or step.get("run") or step["uses"]
            step_env = env | {key: _github_text(str(value), github) for key, value in (step.get("env") or {}).items()}
            if "run" in step:
                rc, out = self.bash(_github_text(step["run"], github), step_env, checkout)
            else:
                rc, out = self._action(step, github, run_id, checkout)
            result.steps.append((label, rc))
            result.output += f"--- {label} (exit {rc})\n{out}"
        kept = self.store / run_id
        result.artifacts = sorted(path.name for path in kept.iterdir()) if kept.is_dir() else []
        runs.append({"id": run_id, "repo": REPOSITORY, "workflow": self.workflow["name"], "branch": branch,
                     "status": "success" if result.ok else "failure"})
        (self.store / "runs.json").write_text(json.dumps(runs))
        return result

    def _action(self, step: dict[str, Any], github: dict[str, Any], run_id: str, checkout: Path) -> tuple[int, str]:
        action, _, _version = step["uses"].partition("@")
        inputs = {key: _github_text(str(value), github) for key, value in (step.get("with") or {}).items()}
        if action == "actions/checkout":
            return 0, "the project is the checkout\n"
        if action == "actions/setup-python":
            wanted = tuple(int(part) for part in inputs["python-version"].split("."))
            assert wanted >= (3, 11), f"pytest-agentgym needs Python 3.11 or newer, the job asks for {wanted}"
            return 0, f"python {sys.version.split()[0]} (the tests')\n"
        if action == "actions/upload-artifact":
            source = checkout / inputs["path"]
            if not source.is_dir():
                return 0, f"Warning: No files were found with the provided path: {inputs['path']}\n"
            shutil.copytree(source, self.store / run_id / inputs["name"])
            return 0, f"artifact {inputs['name']} uploaded\n"
        raise AssertionError(f"the tests do not emulate the action {step['uses']!r}")


class GitLabCI(Runner):
    """Runs a job of a .gitlab-ci.yml; each call is one pipeline. Serves the job artifacts
    API (``GET /api/v4/projects/ID/jobs/artifacts/REF/download?job=NAME``) on loopback."""

    PROJECT_ID = "42"

    def __init__(self, ci_file: Path, repo: Path, scratch: Path) -> None:
        super().__init__(repo, scratch)
        self.config = yaml.safe_load(ci_file.read_text())
        self.pipelines: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _artifacts_handler(self))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.api = f"http://127.0.0.1:{self.server.server_address[1]}/api/v4"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def run_job(self, name: str, *, event: str, branch: str, sha: str) -> JobResult | None:
        """One pipeline whose source is ``event`` (``push`` on ``branch``, or
        ``merge_request_event`` from it): job ``name`` if its rules let it run (else None)."""
        source = event
        job = dict(self.config.get(self.config[name].get("extends", ""), {})) | self.config[name]
        predefined = {"CI": "true", "GITLAB_CI": "true", "CI_COMMIT_SHA": sha, "CI_DEFAULT_BRANCH": DEFAULT_BRANCH,
                      "CI_PIPELINE_SOURCE": source, "CI_JOB_TOKEN": TOKEN, "CI_API_V4_URL": self.api,
                      "CI_PROJECT_ID": self.PROJECT_ID, "CI_JOB_NAME": name,
                      "CI_COMMIT_REF_NAME": branch}
        if source != "merge_request_event":  # GitLab sets it in branch pipelines only
            predefined["CI_COMMIT_BRANCH"] = branch
        variables = dict(predefined)
        for scope in (self.config, job):
            variables |= {key: _gitlab_expand(str(value), variables)
                          for key, value in (scope.get("variables") or {}).items()}
        if not any(_gitlab_rule(rule["if"], variables) for rule in job.get("rules", [])):
            return None
        checkout = self.checkout(sha)
        lines = [*job.get("before_script", []), *job["script"]]
        rc, out = self.bash("\n".join(lines), self.base_env() | variables | {"CI_PROJECT_DIR": str(checkout)}, checkout)
        result = JobResult(checkout, steps=[(name, rc)], output=out)
        artifacts = job.get("artifacts") or {}
        kept = None
        if artifacts and (rc == 0 or artifacts.get("when") == "always"):
            kept = self._zip(checkout, [_gitlab_expand(path, variables) for path in artifacts["paths"]])
        result.artifacts = [name] if kept else []
        self.pipelines.append({"ref": branch, "source": source, "status": "success" if rc == 0 else "failed",
                               "artifacts": {name: kept} if kept else {}})
        return result

    def _zip(self, checkout: Path, paths: list[str]) -> bytes | None:
        """The artifacts archive as GitLab keeps it: each file under its path in the project."""
        buffer = io.BytesIO()
        count = 0
        with zipfile.ZipFile(buffer, "w") as archive:
            for path in paths:
                for file in sorted((checkout / path).rglob("*")) if (checkout / path).is_dir() else []:
                    if file.is_file():
                        archive.write(file, str(file.relative_to(checkout)))
                        count += 1
        return buffer.getvalue() if count else None

    def latest_artifacts(self, ref: str, job: str) -> bytes | None:
        """What the API gives: the job's artifacts of the newest successful pipeline on ``ref``."""
        for pipeline in reversed(self.pipelines):
            if pipeline["ref"] == ref and pipeline["source"] != "merge_request_event" \
                    and pipeline["status"] == "success" and job in pipeline["artifacts"]:
                return pipeline["artifacts"][job]
        return None


def _artifacts_handler(ci: GitLabCI) -> type[BaseHTTPRequestHandler]:
    route = re.compile(r"/api/v4/projects/(?P<project>[^/]+)/jobs/artifacts/(?P<ref>[^/]+)/download")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlsplit(self.path)
            match = route.fullmatch(url.path)
            job = parse_qs(url.query).get("job", [""])[0]
            if self.headers.get("JOB-TOKEN") != TOKEN:
                return self._answer(401, b'{"message":"401 Unauthorized"}', "application/json")
            body = ci.latest_artifacts(match["ref"], job) if match and match["project"] == ci.PROJECT_ID else None
            if body is None:
                return self._answer(404, b'{"message":"404 Not found"}', "application/json")
            self._answer(200, body, "application/zip")

        def _answer(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            pass

    return Handler


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _github_value(expression: str, github: dict[str, Any], failed: bool) -> Any:
    """An expression of the forms the job files use: a context path, a function of a job's
    state, or a comparison of a context path with a quoted string."""
    expression = expression.strip()
    if expression in ("always()", "success()", "failure()"):
        return {"always()": True, "success()": not failed, "failure()": failed}[expression]
    compared = re.fullmatch(r"([\w.]+)\s*(==|!=)\s*'([^']*)'", expression)
    if compared:
        value = _github_value(compared[1], github, failed)
        return (value == compared[3]) == (compared[2] == "==")
    if re.fullmatch(r"github(\.[\w-]+)+", expression):
        value: Any = github
        for part in expression.split(".")[1:]:
            assert isinstance(value, dict) and part in value, f"the tests give no value for {expression!r}"
            value = value[part]
        return value
    raise AssertionError(f"the tests do not evaluate the expression {expression!r} as GitHub does")


def _github_condition(condition: Any, github: dict[str, Any], failed: bool) -> bool:
    """A job's or step's `if:`: like GitHub, success() is implied unless a state function is named."""
    text = str(condition).strip()
    text = text[3:-2].strip() if text.startswith("${{") and text.endswith("}}") else text
    if not re.search(r"\b(always|success|failure|cancelled)\(\)", text) and failed:
        return False
    return bool(_github_value(text, github, failed))


def _github_text(text: str, github: dict[str, Any]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(_github_value(m[1], github, failed=False)), text)


def _gitlab_expand(text: str, variables: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        assert name in variables, f"the tests give no value for ${name} in {text!r}"
        return variables[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


def _gitlab_rule(condition: str, variables: dict[str, str]) -> bool:
    """`$A == $B` or `$A == "text"` (and `!=`), where an unset variable is null."""
    match = re.fullmatch(r'\s*\$(\w+)\s*(==|!=)\s*(?:\$(\w+)|"([^"]*)")\s*', condition)
    assert match, f"the tests do not evaluate the rule {condition!r} as GitLab does"
    left = variables.get(match[1])
    right = variables.get(match[3]) if match[3] else match[4]
    return (left == right) == (match[2] == "==")

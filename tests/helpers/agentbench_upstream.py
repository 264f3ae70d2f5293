"""AgentBench's own task controller, ALFWorld task worker and client, run from an AgentBench
checkout for the opt-in tier tests/integrations/test_agentbench_upstream.py.

``AGENTBENCH_SRC`` names the checkout (v0.2 code: ``src/server``, ``src/client``; checked
at commit 41e6807) and ``AGENTBENCH_PYTHON`` the interpreter that runs it (default: this
one), which needs what the ALFWorld worker imports (alfworld 0.4.2, textworld, gym, torch,
nltk, fastapi 0.101 with pydantic 1, uvicorn, aiohttp) and, for AgentBench's own client,
fschat, transformers and accelerate; docs/training.md ("Against AgentBench's own servers")
has the install line.

No Docker and nothing written into the checkout. :func:`prepare` lays out a working folder
that AgentBench's code reads as its own root (it opens ``data/alfworld/<split>.json`` and
its config paths relative to the working directory):

* ``src``: a link to the checkout's ``src`` (the processes run with
  ``PYTHONDONTWRITEBYTECODE=1``, so no ``__pycache__`` appears there);
* ``data/alfworld/shipped.json``: a split of the eight ALFWorld games that this package
  ships (pytest_agentgym/servers/embedded/alfworld_data, AgentGym's test games
  2420-2427), in index order, so that sample ``i`` is game ``2420 + i``;
* ``alfworld_data``: the task's ``data_path``: ``json_2.1.1`` links to the shipped games,
  ``logic/alfred.pddl`` and ``logic/alfred.twl2`` are the domain and grammar those games
  carry (alfworld's loader opens both files; the games are played from their own copy);
* ``configs/tasks.json``: one task, :data:`TASK`, that is the checkout's own
  ``configs/tasks/alfworld.yaml`` definition (module, ALFWorld config, prompts,
  ``max_step``) with the name, split, data path and concurrency changed.

The controller and the worker are started with AgentBench's own ``__main__`` code
(``python -m src.server.task_controller`` / ``task_worker``) through :data:`LOOPBACK`,
which only makes their ``uvicorn.run(host="0.0.0.0")`` bind 127.0.0.1 instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from pytest_agentgym.process.health import HEALTH_ENDPOINT
from pytest_agentgym.process.managed import ManagedServer, free_port
from pytest_agentgym.servers.embedded.alfworld_tasks import SHIPPED_DATA, game_file, shipped_indices
from helpers import TESTS, pythonpath
from helpers.waiting import wait_until

SRC_ENV = "AGENTBENCH_SRC"
PYTHON_ENV = "AGENTBENCH_PYTHON"
#: the task the worker serves: the shipped games as a split of AgentBench's ALFWorld task
TASK = "alfworld-shipped"
SPLIT = "shipped"
#: samples one worker runs at once (AgentBench's Task default is 1)
CONCURRENCY = 8
#: the reference agent's policy for AgentBench's ALFWorld prompts (tests/helpers/)
POLICY = "helpers.agentbench_alfworld_policy"
#: files of the checkout this tier runs
NEEDED = ("src/server/task_controller.py", "src/server/task_worker.py", "src/server/tasks/alfworld/task.py",
          "src/assigner.py", "configs/tasks/alfworld.yaml")
#: modules AGENTBENCH_PYTHON must import: the worker's, then the client's
MODULES = ("fastapi", "pydantic", "uvicorn", "aiohttp", "yaml", "jsonlines", "nltk", "gym", "torch",
           "textworld", "alfworld", "fastchat", "transformers", "accelerate", "psutil")
INSTALL = ("pip install alfworld==0.4.2 'fastapi~=0.101.1' 'pydantic~=1.10.12' 'uvicorn~=0.22.0' "
           "'aiohttp~=3.8.4' 'requests~=2.28.1' 'numpy~=1.23.5' pyyaml jsonlines tqdm nltk gym torch "
           "'fschat~=0.2.31' 'transformers~=4.34.0' 'accelerate~=0.23.0' psutil")

#: run a module's ``__main__`` with uvicorn bound to loopback (argv: module, its arguments)
LOOPBACK = ("import runpy, sys, uvicorn; serve = uvicorn.run; "
            "uvicorn.run = lambda app, **kw: serve(app, **{**kw, 'host': '127.0.0.1'}); "
            "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def not_asked() -> str | None:
    """Why the tier does not run here (no ``AGENTBENCH_SRC``), or None."""
    if os.environ.get(SRC_ENV):
        return None
    return (f"opt-in tier: set {SRC_ENV} to an AgentBench checkout (commit 41e6807) and {PYTHON_ENV} to a "
            "python with its ALFWorld worker's requirements (docs/training.md, \"Against AgentBench's own "
            "servers\")")


def checkout() -> Path:
    """The checkout ``AGENTBENCH_SRC`` names; fails naming what is missing."""
    src = Path(os.environ[SRC_ENV]).expanduser().resolve()
    missing = [name for name in NEEDED if not (src / name).is_file()]
    if missing:
        raise AssertionError(f"{SRC_ENV}={src} is not an AgentBench v0.2 checkout: it has no "
                             f"{', '.join(missing)}; clone https://github.com/THUDM/AgentBench "
                             "(commit 41e6807) and point the variable at it")
    return src


def python() -> str:
    """The interpreter of AgentBench; fails naming the modules it cannot import."""
    exe = os.environ.get(PYTHON_ENV) or sys.executable
    probe = ("import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] "
             "if importlib.util.find_spec(m) is None))")
    try:
        done = subprocess.run([exe, "-c", probe, *MODULES], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise AssertionError(f"{PYTHON_ENV}={exe} cannot be run ({exc}); point it at a python "
                             "with AgentBench's requirements") from None
    missing = done.stdout.split()
    if done.returncode or missing:
        failed = f" (the probe failed: {done.stderr.strip()[-500:]})" if done.returncode else ""
        raise AssertionError(f"{PYTHON_ENV}={exe} lacks {' '.join(missing) or 'modules'}{failed}; "
                             f"in that environment: {INSTALL}")
    return exe


def prepare(root: Path, src: Path) -> Path:
    """Lay out AgentBench's working folder in ``root`` (see the module's docstring)."""
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    (root / "src").symlink_to(src / "src", target_is_directory=True)
    games = [game_file(SHIPPED_DATA, index) for index in shipped_indices()]
    data = root / "alfworld_data"
    (data / "logic").mkdir(parents=True)
    (data / "json_2.1.1").symlink_to(SHIPPED_DATA / "json_2.1.1", target_is_directory=True)
    logic = json.loads(games[0].read_text())
    (data / "logic" / "alfred.pddl").write_text(logic["pddl_domain"])
    (data / "logic" / "alfred.twl2").write_text(logic["grammar"])
    (root / "data" / "alfworld").mkdir(parents=True)
    (root / "data" / "alfworld" / f"{SPLIT}.json").write_text(json.dumps(
        {SPLIT: [str(game.relative_to(SHIPPED_DATA)) for game in games]}, indent=1))
    upstream = yaml.safe_load((src / "configs" / "tasks" / "alfworld.yaml").read_text())["default"]
    task = {"module": upstream["module"], "parameters": {
        **upstream["parameters"], "name": TASK, "split": SPLIT, "data_path": str(data),
        "concurrency": CONCURRENCY}}
    (root / "configs").mkdir()
    (root / "configs" / "tasks.json").write_text(json.dumps({TASK: task}, indent=1))
    return root


@dataclass
class Stack:
    """AgentBench's controller and one worker of :data:`TASK`, running from ``root``."""

    root: Path
    python: str
    controller: ManagedServer
    worker: ManagedServer

    @property
    def url(self) -> str:
        """The controller (without ``/api``), as a node profile's ``url``."""
        return self.controller.url

    def get(self, path: str) -> object:
        return httpx.get(f"{self.url}/api{path}", timeout=30).json()

    def stop(self) -> None:
        self.worker.stop()
        self.controller.stop()


def _process_env() -> dict[str, str]:
    return {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


def start(root: Path, src: Path, exe: str, log_dir: Path) -> Stack:
    """Prepare ``root``, start the controller and the worker, wait until the worker has
    registered (its first heartbeat)."""
    prepare(root, src)
    controller = ManagedServer(
        "AgentBench controller", command=[exe, "-c", LOOPBACK, "src.server.task_controller", "--port", "{port}"],
        port=free_port(), cwd=root, env=_process_env(), startup_timeout=120,
        log_path=log_dir / "controller.log", label="AgentBench's task controller").start()
    try:
        worker = ManagedServer(
            "AgentBench ALFWorld worker",
            command=[exe, "-c", LOOPBACK, "src.server.task_worker", TASK, "--config", "configs/tasks.json",
                     "--controller", f"{controller.url}/api", "--self", "http://127.0.0.1:{port}/api",
                     "--port", "{port}"],
            port=free_port(), cwd=root, env=_process_env(), startup_timeout=180,
            log_path=log_dir / "worker.log", label="AgentBench's ALFWorld task worker").start()
    except BaseException:
        controller.stop()
        raise
    stack = Stack(root, exe, controller, worker)

    def registered() -> bool:
        workers = stack.get("/list_workers")
        return any(w["status"] == 0 for w in workers.get(TASK, {}).get("workers", {}).values())

    try:
        wait_until(registered, 60, lambda: f"the worker registered with the controller: "
                   f"/list_workers says {stack.get('/list_workers')}; see {log_dir / 'worker.log'}",
                   procs=[worker.proc, controller.proc], interval=0.2)
    except BaseException:
        stack.stop()
        raise
    return stack


def reference_agent(log_dir: Path) -> ManagedServer:
    """The project's reference agent with :data:`POLICY`, as AgentBench's client's model."""
    return ManagedServer(
        "reference agent", command=[sys.executable, "-m", "pytest_agentgym", "reference-agent", "--port", "{port}"],
        port=free_port(), health=HEALTH_ENDPOINT, startup_timeout=60, label="the reference agent",
        env={"AGENTGYM_REFERENCE_POLICIES": POLICY, "PYTHONPATH": pythonpath(TESTS)},
        log_path=log_dir / "reference-agent.log").start()


def run_agentbench_client(stack: Stack, model_url: str, out: Path, timeout: float = 600) -> dict[int, dict]:
    """Play every sample of :data:`TASK` with AgentBench's own client (``python -m
    src.assigner``: its ``TaskClient`` through the controller, its ``HTTPAgent`` posting
    OpenAI chat requests to ``model_url``); each sample's ``TaskOutput`` from its
    ``runs.jsonl``, by index. Fails with the client's output when it fails or a sample
    lands in ``error.jsonl``."""
    assignment = {
        "concurrency": {"task": {TASK: CONCURRENCY}, "agent": {"reference": CONCURRENCY}},
        "assignments": [{"agent": "reference", "task": TASK}],
        "output": str(out),
        "definition": {
            "task": {TASK: {"module": "src.client.TaskClient",
                            "parameters": {"name": TASK, "controller_address": f"{stack.url}/api"}}},
            "agent": {"reference": {"module": "src.client.agents.HTTPAgent", "parameters": {
                "url": f"{model_url}/v1/chat/completions",
                "body": {"model": "reference", "temperature": 0},
                "prompter": {"name": "role_content_dict", "args": {"agent_role": "assistant"}},
                "return_format": "{response[choices][0][message][content]}"}}},
        },
    }
    config = stack.root / "configs" / "assignment.json"
    config.write_text(json.dumps(assignment, indent=1))
    done = subprocess.run([stack.python, "-m", "src.assigner", "--config", str(config)], cwd=stack.root,
                          env={**os.environ, **_process_env()}, capture_output=True, text=True, timeout=timeout)
    folder = out / "reference" / TASK
    errors = folder / "error.jsonl"
    if done.returncode or errors.exists() or not (folder / "runs.jsonl").exists():
        raise AssertionError(f"AgentBench's client (src.assigner) exited {done.returncode}"
                             + (f"; failed samples: {errors.read_text()[:2000]}" if errors.exists() else "")
                             + f"\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    runs = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines() if line.strip()]
    return {run["index"]: run["output"] for run in runs}


def game_turns(history: list[dict]) -> list[str]:
    """The agent's replies of a finished sample, from the turn that starts the game (after
    AgentBench's one-shot example)."""
    start = max(i for i, item in enumerate(history) if item["role"] == "user"
                and item["content"].startswith("Here is your task. "))
    return [item["content"] for item in history[start:] if item["role"] == "agent"]

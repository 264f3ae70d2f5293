"""Synthetic runs for the report's tests and benchmark, and a headless Chromium driver.

Runs are written the way the plugin writes them, through
:class:`pytest_agentgym.results.store.RunDir` (``run.json`` + ``episodes.jsonl``), so
the report is tested on files, not on objects handed to it.

:class:`HeadlessChromium` drives Debian's ``chromium`` over the DevTools
protocol on a pipe (``--remote-debugging-pipe``: NUL-terminated JSON on file
descriptors 3 and 4), which needs no websocket library and no download.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import random
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo, Turn
from pytest_agentgym.results.store import RunDir

ENVS = ("BabyAI", "TextCraft", "Maze", "Wordle")

# --------------------------------------------------------------------------- records


def make_info(run_id: str = "20261121-120000-abcd", **changes: Any) -> RunInfo:
    """A finished run's run.json with every header field filled in."""
    fields: dict[str, Any] = dict(
        run_id=run_id, started_at="2026-11-21T12:00:00+00:00", node="4090",
        model="qwen3.5-9b", endpoint="http://127.0.0.1:3030/openai/v1", endpoint_kind="tensorzero",
        environments=ENVS, command="pytest suites/lightweight --agentgym-node=4090 --agentgym-seed=7",
        seed=7, checkpoint="ckpt/step-1200", settings={"max_rounds": 15, "concurrency": 1},
        versions={"pytest-agentgym": "0.1.0", "python": "3.11"}, git_commit="0123abcd",
        notes=(), ended_at="2026-11-21T12:42:30+00:00", status="passed",
    )
    fields.update(changes)
    return RunInfo(**fields)


def make_turn(index: int, observation: str = "You see a wall.", reply: str = "Action:\nturn left",
              action: str | None = "turn left", feedback: str = "You turned left.", *,
              reward: float = 0.0, done: bool = False) -> Turn:
    return Turn(index=index, observation=observation, reply=reply, action=action, feedback=feedback,
                reward=reward, done=done, model_latency_s=0.8 + index / 10, env_latency_s=0.05,
                prompt_tokens=300 + 40 * index, completion_tokens=45)


def make_episode(env: str, task_index: int, *, run_id: str = "20261121-120000-abcd", repeat: int = 0,
                 outcome: str = "passed", turns: Sequence[Turn] | None = None,
                 error: ErrorInfo | None = None, retried: Sequence[ErrorInfo] = (),
                 reward: float | None = None) -> EpisodeRecord:
    """One episode; ``outcome`` decides the reward and success unless given."""
    if turns is None:
        turns = (make_turn(0), make_turn(1, reward=1.0 if outcome == "passed" else 0.0, done=True))
    if outcome == "error":
        reward, success, stop = None, False, "error"
        error = error or ErrorInfo("EnvServerError", "POST /step answered 500", "env")
    else:
        reward = reward if reward is not None else (1.0 if outcome == "passed" else 0.0)
        success, stop = outcome == "passed", "done" if outcome == "passed" else "max_rounds"
    return EpisodeRecord(
        run_id=run_id, env=env, task_index=task_index, repeat=repeat, reward=reward, success=success,
        rounds=len(turns), stop_reason=stop, started_at="2026-11-21T12:01:00+00:00",
        duration_s=4.5 + task_index % 7, model="qwen3.5-9b", turns=tuple(turns), error=error,
        retried=tuple(retried), prompt_tokens=sum(t.prompt_tokens or 0 for t in turns),
        completion_tokens=sum(t.completion_tokens or 0 for t in turns), outcome=outcome,
        nodeid=f"suites/lightweight/{env.lower()}.yaml::{env}[{task_index}]",
        checkpoint="ckpt/step-1200", node="4090",
    )


def write_run(root: Path, info: RunInfo, episodes: Iterable[EpisodeRecord]) -> RunDir:
    """Write run.json and episodes.jsonl under ``root/<run_id>`` as the plugin does.

    An episodes.jsonl left there from an earlier call is replaced, not appended to.
    """
    run = RunDir.create(root, info.run_id)
    run.episodes_file.unlink(missing_ok=True)
    run.write_info(info)
    for record in episodes:
        run.append_episode(record)
    return run


# --------------------------------------------------------------------------- realistic synthetic text

_COLOURS = ("red", "green", "blue", "purple", "yellow", "grey")
_OBJECTS = ("key", "ball", "box", "door")
_ITEMS = ("oak planks", "stick", "iron ingot", "crafting table", "oak log", "cobblestone", "string")
_THOUGHTS = (
    "The goal is to pick up the {c} {o}, and it is {n} steps ahead, so I should move closer first.",
    "I have not seen the {c} {o} yet; turning around lets me look at the rest of the room.",
    "To craft {i} I need the ingredients in my inventory, so I will fetch them before crafting.",
    "The last action did not change anything, which means the path is blocked; I will try another way.",
    "My position moved towards the goal. Keep going in the same direction while the wall is on my left.",
)


def _babyai_observation(rng: random.Random) -> str:
    seen = [f"There is a {rng.choice(_COLOURS)} {rng.choice(_OBJECTS)} {rng.randint(1, 3)} "
            f"{rng.randint(0, 4)} steps in front of you and {rng.randint(0, 3)} steps to your "
            f"{rng.choice(('left', 'right'))}." for _ in range(rng.randint(2, 4))]
    actions = ["turn left", "turn right", "move forward", "check available actions"]
    actions += [f"go to {rng.choice(_COLOURS)} {rng.choice(_OBJECTS)} {k}" for k in range(1, rng.randint(3, 6))]
    return ("In front of you in this room, you can see several objects: " + "  ".join(seen) +
            f"  The room has walls around you. You are facing a wall {rng.randint(1, 5)} steps away. "
            "You are not carrying anything.\nAvailable actions: " + json.dumps(actions))


def _textcraft_observation(rng: random.Random) -> str:
    item = rng.choice(_ITEMS)
    return rng.choice((
        f"Got {rng.randint(1, 4)} {item}",
        f"Crafted {rng.randint(1, 4)} minecraft:{item.replace(' ', '_')}",
        f"Inventory: [{item}] ({rng.randint(1, 9)}) [{rng.choice(_ITEMS)}] ({rng.randint(1, 9)})",
        f"Could not find a valid recipe for {item}. Crafting commands:\n" + "\n".join(
            f"craft {rng.randint(1, 4)} {rng.choice(_ITEMS)} using {rng.randint(1, 3)} {rng.choice(_ITEMS)}, "
            f"{rng.randint(1, 3)} {rng.choice(_ITEMS)}" for _ in range(rng.randint(3, 8))),
    ))


def _maze_observation(rng: random.Random) -> str:
    walls = rng.sample(("above", "below", "to your left", "to your right"), rng.randint(1, 3))
    return (f"The goal is at position ({rng.randint(1, 8)}, {rng.randint(1, 10)}). Your current position is "
            f"at position ({rng.randint(1, 8)}, {rng.randint(1, 10)}). There are walls {', '.join(walls)}.")


def _wordle_observation(rng: random.Random) -> str:
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
    marks = ", ".join(f"{c} is {rng.choice(('in the word and in the correct position', 'in the word but in the wrong position', 'not in the word'))}" for c in word)
    return f"Feedback on {word}: {marks}. You have {rng.randint(1, 5)} guesses left."


_OBSERVERS = {"BabyAI": _babyai_observation, "TextCraft": _textcraft_observation,
              "Maze": _maze_observation, "Wordle": _wordle_observation}


def realistic_turns(rng: random.Random, env: str, count: int, passed: bool) -> tuple[Turn, ...]:
    """``count`` turns with observations of a few hundred characters in the style of ``env``."""
    observe = _OBSERVERS.get(env, _babyai_observation)
    observation = observe(rng)
    turns = []
    for index in range(count):
        thought = rng.choice(_THOUGHTS).format(c=rng.choice(_COLOURS), o=rng.choice(_OBJECTS),
                                               n=rng.randint(1, 5), i=rng.choice(_ITEMS))
        action = rng.choice(("move forward", "turn left", "turn right", "go to red ball 1",
                             f"craft 1 {rng.choice(_ITEMS)} using 2 {rng.choice(_ITEMS)}", "move up"))
        rejected = rng.random() < 0.03
        feedback = ("Your reply had more than one 'Action:' line; answer with exactly one action."
                    if rejected else observe(rng))
        last = index == count - 1
        turns.append(Turn(
            index=index, observation=observation, reply=f"Thought:\n{thought}\n\nAction:\n{action}",
            action=None if rejected else action, feedback=feedback,
            reward=(1.0 if passed else 0.0) if last else 0.0, done=last and passed,
            model_latency_s=round(rng.uniform(0.3, 3.0), 3), env_latency_s=round(rng.uniform(0.005, 0.2), 3),
            prompt_tokens=400 + 120 * index + rng.randint(0, 50), completion_tokens=rng.randint(30, 120),
        ))
        observation = feedback
    return tuple(turns)


def synthetic_run(root: Path, episodes: int, *, seed: int = 0, envs: Sequence[str] = ENVS,
                  turns: tuple[int, int] = (10, 20), repeats: int = 1) -> RunDir:
    """A finished run with ``episodes`` realistic episodes spread over ``envs``.

    About 55% pass, 40% fail and 5% end in an error; about 3% were retried once.
    """
    rng = random.Random(seed)
    info = make_info(run_id=f"synthetic-{episodes}", environments=tuple(envs),
                     gates=tuple({"env": env, "gate": "success_rate >= 0.5", "value": 0.55,
                                  "passed": True, "detail": "success_rate = 0.550 (meets >= 0.5)"}
                                 for env in envs))
    records = []
    for number in range(episodes):
        env = envs[number % len(envs)]
        task_index = number // len(envs) // repeats
        repeat = number // len(envs) % repeats
        draw = rng.random()
        outcome = "passed" if draw < 0.55 else "failed" if draw < 0.95 else "error"
        count = rng.randint(*turns) if outcome != "error" else rng.randint(1, 5)
        trajectory = realistic_turns(rng, env, count, outcome == "passed")
        retried = (ErrorInfo("ReadTimeout", "model endpoint did not answer within 60 s", "model"),) \
            if rng.random() < 0.03 else ()
        error = ErrorInfo("EnvServerError", f"POST /step on {env} answered 502 Bad Gateway", "env") \
            if outcome == "error" else None
        records.append(make_episode(env, task_index, run_id=info.run_id, repeat=repeat, outcome=outcome,
                                    turns=trajectory, error=error, retried=retried,
                                    reward=None if outcome == "error" else trajectory[-1].reward))
    return write_run(root, info, records)


# --------------------------------------------------------------------------- headless Chromium


#: CI sets this: there a missing browser fails the tests instead of skipping them.
REQUIRE_BROWSER = os.environ.get("AGENTGYM_REQUIRE_BROWSER") == "1"
NO_BROWSER = ("headless browser tests need Chromium: apt-get install -y chromium "
              "(looked for /usr/bin/chromium, chromium and chromium-browser on PATH)")


def find_chromium() -> str | None:
    """Path of a Chromium executable, or None (tests then skip)."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


_LAUNCHER = (
    "import os, sys\n"
    "r, w = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.dup2(r, 3)\n"
    "os.dup2(w, 4)\n"
    "[os.close(fd) for fd in (r, w) if fd not in (3, 4)]\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def _move_above(fd: int, floor: int) -> int:
    """Duplicate ``fd`` onto the lowest free number >= ``floor`` and close the original."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    os.close(fd)
    return moved


class BrowserError(RuntimeError):
    """Chromium did not start, answered an error, or did not answer in time."""


class HeadlessChromium:
    """One headless Chromium process driven over the DevTools protocol on a pipe.

    Use as a context manager; :meth:`open` loads a URL in a new tab and returns
    its session id for :meth:`evaluate`, :meth:`wait_for` and :meth:`screenshot`.
    JavaScript exceptions thrown in any page are collected in ``exceptions``.
    """

    def __init__(self, executable: str, profile_dir: Path, *, timeout: float = 60.0,
                 width: int = 1400, height: int = 1000, scripts: bool = True) -> None:
        self.timeout = timeout
        self.exceptions: list[str] = []
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Keep the child's ends clear of fds 3 and 4, which the shell below fills.
        to_browser_r, from_browser_w = (_move_above(fd, 10) for fd in (to_browser_r, from_browser_w))
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", "--remote-debugging-pipe", f"--user-data-dir={profile_dir}",
                 f"--window-size={width},{height}"]
        if not scripts:
            flags.append("--blink-settings=scriptEnabled=false")
        # A tiny Python launcher moves our pipe ends onto fds 3 (commands in) and
        # 4 (answers out) and then becomes Chromium (os.execv keeps those fds).
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(to_browser_r), str(from_browser_w), executable,
             *flags, "about:blank"],
            pass_fds=(to_browser_r, from_browser_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)

    def __enter__(self) -> "HeadlessChromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- protocol ---------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"Chromium sent nothing within {self.timeout} s")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                data = os.read(self._from_browser, 1 << 20)
                if not data:
                    raise BrowserError(f"Chromium closed the DevTools pipe (exit code {self.proc.poll()})")
                self._buffer += data
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(raw)
        if message.get("method") == "Runtime.exceptionThrown":
            details = message["params"]["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description") or details.get("text", "?"))
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method} failed: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self._events:
                if event.get("method") == method and event.get("sessionId") == session:
                    self._events.remove(event)
                    return event
            self._events.append(self._read_message(deadline))

    # -- pages ------------------------------------------------------------------

    def open(self, url: str) -> str:
        """Open ``url`` in a new tab, wait for its load event, return the session id."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=session)
        self.call("Runtime.enable", session=session)
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, session: str, expression: str, timeout: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy (a condition with a deadline)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(session, expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} was still falsy after {timeout} s")
            time.sleep(0.05)

    def screenshot(self, session: str, path: Path, full_page: bool = False) -> Path:
        """Save a PNG of the viewport (or of the whole page) to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                           "height": min(size["height"], 6000), "scale": 1})
        data = self.call("Page.captureScreenshot", params, session=session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("Browser.close")
            except (BrowserError, OSError):
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass


def text_of(browser: HeadlessChromium, session: str, selector: str) -> str:
    return browser.evaluate(session, f"document.querySelector({json.dumps(selector)}).innerText")

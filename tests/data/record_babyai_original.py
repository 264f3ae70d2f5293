"""Record answers of AgentGym's ORIGINAL BabyAI server into tests/data (not a test).

How tests/data/babyai_original_extra.json was made (see its ``about``):

1. a virtualenv with the original's pins and its server's imports::

       python -m venv /work/venv-minigrid23
       /work/venv-minigrid23/bin/pip install minigrid==2.3.1 gymnasium==0.29.1 \\
           "numpy<2" gym fastapi uvicorn matplotlib pillow

2. AgentGym's ``agentenv-babyai`` (github.com/WooooDyy/AgentGym), kept outside this
   repository, started on loopback from its own directory::

       cd AgentGym/agentenv-babyai && /work/venv-minigrid23/bin/python -m uvicorn \\
           agentenv_babyai:app --host 127.0.0.1 --port 36101

3. this script, with the project's own interpreter (it drives the reference
   policy; nothing of this project answers)::

       python tests/data/record_babyai_original.py http://127.0.0.1:36101 \\
           tests/data/babyai_original_extra.json

Every reset and step goes through a fresh ``/create`` id, as a harness does.
"""

from __future__ import annotations

import json
import random
import re
import sys

import httpx

from pytest_agentgym.model.reference.babyai import POLICY

#: data_idx whose reset is recorded: the SynthS5R2 tasks (seeds 74, 119, 146) where
#: minigrid 3.x's own rules draw another level than 2.3.1 under the original, and
#: the SynthLoc / SynthSeq tasks of the same seeds.
RESETS = (2994, 2995, 2996, 4794, 4795, 4796, 5874, 5875, 5876)
#: data_idx whose reference-policy episode is recorded step by step.
TRACES = (155, 156, 2994, 4794, 5874)
MAX_STEPS = 20
_ACTION = re.compile(r"Action:\s*\n?(.*)")


def episode(http: httpx.Client, data_idx: int) -> tuple[dict, list[dict]]:
    """(reset body, [{action, status, body}]) of one policy-driven episode."""
    env_id = http.post("/create").json()["id"]
    reset = http.post("/reset", json={"id": env_id, "data_idx": data_idx}).json()
    messages = [{"role": "user", "content": reset["observation"]}]
    steps = []
    rng = random.Random(data_idx)
    actions = ["check available actions"]
    while len(steps) < MAX_STEPS:
        if not actions:
            reply = POLICY.reply(messages, rng)
            actions.append(_ACTION.search(reply).group(1).strip())
            messages.append({"role": "assistant", "content": reply})
        action = actions.pop(0)
        response = http.post("/step", json={"id": env_id, "action": action})
        body = response.json()
        steps.append({"action": action, "status": response.status_code, "body": body})
        if len(steps) > 1:
            messages.append({"role": "user", "content": body.get("observation", "")})
        if body.get("done") or "error" in body:
            break
    http.post("/close", json={"id": env_id})
    return reset, steps


def main(url: str, out: str) -> None:
    with httpx.Client(base_url=url, timeout=120) as http:
        greeting = http.get("/").json()
        resets, traces = {}, {}
        for data_idx in RESETS:
            env_id = http.post("/create").json()["id"]
            resets[str(data_idx)] = http.post("/reset", json={"id": env_id, "data_idx": data_idx}).json()
            http.post("/close", json={"id": env_id})
        for data_idx in TRACES:
            reset, steps = episode(http, data_idx)
            resets.setdefault(str(data_idx), reset)
            traces[str(data_idx)] = steps
    about = (
        f"Answers of the original AgentGym BabyAI server (agentenv-babyai, greeting {greeting!r}) "
        "under minigrid 2.3.1, gymnasium 0.29.1, recorded by tests/data/record_babyai_original.py: "
        "POST /reset responses, and step traces (reset, 'check available actions', then the "
        "project's reference policy's actions, each answered by the original server)."
    )
    with open(out, "w") as handle:
        json.dump({"about": about, "responses": resets, "traces": traces}, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

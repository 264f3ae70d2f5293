"""A fixed script of requests to a SQLGym server, and what came back.

Used twice: ``python tests/helpers/sqlgym_exchanges.py URL BIRD_DIR OUT.json`` recorded
tests/data/sqlgym_original_answers.json from AgentGym's original
``agentenv-sqlgym`` server (run on loopback with ``AGENTENV_SQLGYM_BIRD_PATH``
pointing at the shipped data set, built by ``python -m
pytest_agentgym.servers.embedded.sqlgym_bird DIR``); tests/servers/test_sqlgym_server.py
plays the same script against the embedded server and compares.

Each exchange is ``{"name", "method", "path", "body", "status", "answer"}``;
``answer`` is the body's text for HTTP 200, the names of the missing fields
for 422 (the rest of that body is pydantic's), and None for other statuses,
whose bodies differ on purpose (docs/envs/sqlgym.md). Env ids are drawn at
random by the server: the script names them ``env``, ``other`` and
``unknown``, and records those names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

#: SQL sent to every question besides its gold query
WRONG_SQL = "SELECT 1"
BROKEN_SQL = {
    "syntax": "SELEC name FROM authors",
    "no_column": "SELECT nope FROM authors",
    "no_table": "SELECT * FROM nowhere",
    "write": "DELETE FROM authors",
    "two_statements": "SELECT 1; SELECT 2",
    "empty": "",
}
#: a result longer than 100 characters (the state is cut)
LONG_SQL = "SELECT * FROM books"
DEV_FIRST = 9428


def _questions(bird_dir: Path, split: str) -> list[dict[str, Any]]:
    return json.loads((bird_dir / split / f"{split}.json").read_text(encoding="utf-8"))


def _call(client: httpx.Client, ids: dict[str, int], name: str, method: str, path: str,
          body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request; ``{env}``-style names in ``path`` and string ``env_idx`` values in
    ``body`` stand for the env ids in ``ids`` (drawn at random by the server), and are
    recorded as such."""
    sent_body = None if body is None else {k: ids.get(v, v) if k == "env_idx" else v for k, v in body.items()}
    # one connection per request, like the original client's requests.post: the original
    # server closes the connection after a 500, which a kept-alive connection would meet
    # as a reset on the next request
    headers = {"Connection": "close"}
    if method == "POST":
        response = client.post(path, json=sent_body, headers=headers)
    else:
        response = client.get(path.format(**ids), headers=headers)
    answer = None
    if response.status_code == 200:
        answer = response.text  # the bytes as sent: 1.0 and 1 differ here
    elif response.status_code == 422:
        answer = sorted(str(error["loc"][-1]) for error in response.json()["detail"])
    return {"name": name, "method": method, "path": path, "body": body,
            "status": response.status_code, "answer": answer}


def play(base_url: str, bird_dir: str | Path) -> list[dict[str, Any]]:
    """Run the script against the server at ``base_url``; ``bird_dir`` is the data it serves."""
    bird_dir = Path(bird_dir)
    out: list[dict[str, Any]] = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        out.append(_call(client, {}, "root", "GET", "/"))
        ids = {"env": client.post("/create", headers={"Connection": "close"}).json(),
               "other": client.post("/create", headers={"Connection": "close"}).json()}
        ids["unknown"] = next(i for i in range(10) if i not in ids.values())
        out.append({"name": "create", "method": "POST", "path": "/create", "body": None, "status": 200,
                    "answer": "int in 0-489576" if all(0 <= ids[k] <= 489576 for k in ("env", "other"))
                    else [ids["env"], ids["other"]]})

        def call(name: str, method: str, path: str, body: dict[str, Any] | None = None) -> None:
            out.append(_call(client, ids, name, method, path, body))

        call("step before reset", "POST", "/step", {"env_idx": "other", "action": "SELECT 1"})
        call("observation before reset", "GET", "/observation?env_idx={other}")
        call("step unknown env", "POST", "/step", {"env_idx": "unknown", "action": "SELECT 1"})
        call("reset unknown env", "POST", "/reset", {"env_idx": "unknown", "item_id": 0})
        call("reset missing item_id", "POST", "/reset", {"env_idx": "env"})
        call("step missing action", "POST", "/step", {"env_idx": "env"})
        for item_id in (-1, 10962):
            call(f"reset out of range {item_id}", "POST", "/reset", {"env_idx": "env", "item_id": item_id})
        for split, first in (("train", 0), ("dev", DEV_FIRST)):
            questions = _questions(bird_dir, split)
            call(f"reset past the {split} data", "POST", "/reset",
                 {"env_idx": "env", "item_id": first + len(questions)})
            for n, question in enumerate(questions):
                item = first + n
                call(f"reset {item}", "POST", "/reset", {"env_idx": "env", "item_id": item})
                call(f"observation {item}", "GET", "/observation?env_idx={env}")
                for label, sql in (("gold", question["SQL"]), ("wrong", WRONG_SQL)):
                    call(f"step {item} {label}", "POST", "/step", {"env_idx": "env", "action": sql})
        call("reset for broken SQL", "POST", "/reset", {"env_idx": "env", "item_id": DEV_FIRST})
        for label, sql in {**BROKEN_SQL, "long": LONG_SQL}.items():
            call(f"step {label}", "POST", "/step", {"env_idx": "env", "action": sql})
        call("list_envs", "GET", "/list_envs")
        out[-1]["answer"] = sorted(json.loads(out[-1]["answer"])) == sorted([ids["env"], ids["other"]])
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python tests/helpers/sqlgym_exchanges.py SERVER_URL BIRD_DIR OUT.json", file=sys.stderr)
        return 2
    url, bird_dir, out = argv
    Path(out).write_text(json.dumps({"exchanges": play(url, bird_dir)}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

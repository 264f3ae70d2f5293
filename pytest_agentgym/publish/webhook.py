"""Webhooks: one JSON POST to each ``--agentgym-notify`` URL when a run ends.

NATS events (publisher.py) need a NATS server and a consumer; a chat channel, a CI
bot or a dashboard usually takes a plain HTTP POST. When a run has written run.json
and its report, :func:`notify_run` POSTs one summary to every URL given, in parallel:
event ``run.finished``, with every gate verdict and, in ``failed_gates``, those that
failed or errored (one POST per run, not a second ``gate.failed`` one: a receiver
that only cares about failures tests whether ``failed_gates`` is empty, and can never
see a failure without the run it belongs to). docs/notifications.md lists each field.

The body is made from run.json (:func:`run_finished`), whose strings are redacted
already, and goes through :func:`~pytest_agentgym.results.redact.redact_data` again:
it names the model, never its endpoint, and carries no API key or header of the
model endpoint. URLs shown in the terminal and written to run.json's notes are
redacted the same way: a ``?token=`` of the webhook's URL, and the secret path
segments of a Slack, Discord, Teams or Mattermost URL, show as ``***``
(:func:`~pytest_agentgym.results.redact.secret_segments`).

A webhook never changes how the run ended: a refused connection, an answer that is
not 2xx, or no answer within :data:`ATTEMPT_TIMEOUT_S` is retried (up to
:data:`ATTEMPTS` tries, with back-off) only while :data:`TOTAL_S` seconds have not
passed since the first try; what still fails is one line returned to the caller
(a warning in the terminal, a note in run.json). A 4xx other than 429 is not retried:
the receiver refused the request and would refuse it again. The requests go through
the project's HTTP client (``transport.proxies.http_client``), so the proxy rule holds
(loopback never through a proxy).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pytest_agentgym.results.jsonl import finite_json, json_utf8, strict_dumps
from pytest_agentgym.results.redact import redact_data, redact_text, redact_url

if TYPE_CHECKING:
    from pytest_agentgym.results.records import RunInfo

#: Version of the body's layout (fields may be added without a bump).
BODY_SCHEMA_VERSION = 1
EVENT = "run.finished"
#: Tries per URL, the seconds one try may take, the back-off before each retry, and the
#: most seconds all tries of one URL may take together.
ATTEMPTS = 3
ATTEMPT_TIMEOUT_S = 5.0
BACKOFF_S = (0.5, 1.0)
TOTAL_S = 8.0
#: Gate outcomes that ``failed_gates`` lists (they fail the run).
FAILING = ("failed", "error")


def run_finished(info: "RunInfo", *, run_dir: Path | str, report_path: Path | str | None,
                 source: str = "pytest") -> dict[str, Any]:
    """The body POSTed for a run that ended (``info``: its run.json as written)."""
    shard = info.shard or {}
    gates = [{"env": g.get("env"), "gate": g.get("gate"), "outcome": g.get("outcome"), "value": g.get("value"),
              "detail": g.get("detail")} for g in info.gates]
    environments = {env: {key: figures.get(key) for key in ("episodes", "success_rate", "mean_reward", "errors")}
                    for env, figures in info.summaries.items()}
    body = {
        "schema_version": BODY_SCHEMA_VERSION, "event": EVENT, "source": source,
        "run_id": info.run_id, "status": info.status, "started_at": info.started_at, "ended_at": info.ended_at,
        "model": info.model, "node": info.node, "checkpoint": info.checkpoint, "endpoint_kind": info.endpoint_kind,
        "shard": f"{shard['index']}/{shard['count']}" if shard else None,
        "counts": dict(info.counts), "environments": environments, "gates": gates,
        "failed_gates": [g for g in gates if g["outcome"] in FAILING],
        "run_dir": str(run_dir), "report": None if report_path is None else str(report_path),
    }
    return redact_data(finite_json(body))


def notify_run(urls: Sequence[str], info: "RunInfo", *, run_dir: Path | str, report_path: Path | str | None,
               write_info: Callable[["RunInfo"], None], source: str = "pytest") -> list[str]:
    """POST the run's summary to each of ``urls``; what could not be delivered, one line per
    URL (also added to run.json's notes through ``write_info``; an empty list: all went)."""
    problems = deliver(urls, run_finished(info, run_dir=run_dir, report_path=report_path, source=source))
    if problems:
        try:
            write_info(dataclasses.replace(info, notes=info.notes + tuple(problems)))
        except OSError:  # the warning in the terminal still says it
            pass
    return problems


def deliver(urls: Sequence[str], body: dict[str, Any]) -> list[str]:
    """POST ``body`` to every URL at once; one line per URL that did not take it."""
    data = json_utf8(strict_dumps(body, separators=(",", ":")))
    problems: dict[int, str] = {}

    def one(index: int, url: str) -> None:
        problem = post(url, data)
        if problem is not None:
            problems[index] = problem

    threads = [threading.Thread(target=one, args=(i, url), name=f"agentgym-notify-{i}", daemon=True)
               for i, url in enumerate(urls)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TOTAL_S + 1.0  # each thread keeps its own budget; this one is a backstop
    for index, thread in enumerate(threads):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            problems.setdefault(index, f"notify {redact_url(urls[index])} not delivered: no answer within "
                                       f"{TOTAL_S:g} s; the run's result is unchanged")
    return [problems[i] for i in sorted(problems)]


def post(url: str, data: bytes) -> str | None:
    """POST ``data`` to ``url`` with bounded retries; None when a 2xx came back, else why not."""
    import httpx

    from pytest_agentgym import __version__
    from pytest_agentgym.transport.proxies import http_client

    headers = {"Content-Type": "application/json", "User-Agent": f"pytest-agentgym/{__version__}",
               "X-Agentgym-Event": EVENT}
    started = time.monotonic()
    why, tries = "", 0
    with http_client(follow_redirects=False) as client:
        for attempt in range(ATTEMPTS):
            left = TOTAL_S - (time.monotonic() - started)
            if attempt:
                pause = BACKOFF_S[min(attempt, len(BACKOFF_S)) - 1]
                if left - pause < 0.5:  # no time left for a useful try
                    break
                time.sleep(pause)  # back-off before a retry
                left -= pause
            tries += 1
            try:
                answer = client.post(url, content=data, headers=headers,
                                     timeout=httpx.Timeout(min(ATTEMPT_TIMEOUT_S, left)))
            except httpx.TimeoutException:
                why = f"no answer within {min(ATTEMPT_TIMEOUT_S, left):.3g} s"
                continue
            except httpx.HTTPError as exc:
                why = f"{type(exc).__name__}: {redact_text(str(exc)) or 'connection failed'}"
                continue
            if 200 <= answer.status_code < 300:
                return None
            why = f"answered HTTP {answer.status_code}"
            if answer.status_code < 500 and answer.status_code != 429:
                break  # refused as asked: another try would be refused too
    return (f"notify {redact_url(url)} not delivered: {why} (after {tries} attempt(s)); "
            f"the run's result is unchanged")

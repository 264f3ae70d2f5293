"""Episodes recorded ahead of their items when a run is stopped (Ctrl-C, SIGTERM).

The engine plays up to ``concurrency`` episodes ahead of the item pytest is running, so a
stopped run has records on disk whose items never ran: run.json counted them and pytest's
summary did not (issue 39: 39 passed, 21 unsolved in the summary, 42 and 21 in run.json).
They are real results, kept by a resume, so the summary takes them in: once the run is
judged, each such record is reported as its item's result (like the gates), and pytest's
counts, ``--junitxml`` and run.json's ``counts`` agree.
"""

from __future__ import annotations

from typing import Any

import pytest


class AheadReports:
    """Remembers the items pytest reported; at the end of a stopped run, reports the rest
    of this generation's records."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.reported: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reported.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Inside the run's own end (it has judged the run and closed the engine, so every
        record is on disk), before the terminal's summary is printed."""
        run = self.run
        if not run.finished or run.status not in ("interrupted", "partial") or run.worker is not None:
            return
        generation = run.ledger.generation
        late = [r for r in run.ledger.records()
                if r.generation == generation and r.nodeid and r.nodeid not in self.reported]
        for record in late:
            session.config.hook.pytest_runtest_logreport(report=_report(record))


def _report(record: Any) -> pytest.TestReport:
    from pytest_agentgym.config.suites import item_name
    from pytest_agentgym.plugin.session import _OUTCOME_ATTR

    name = item_name(record.env, record.task_index, record.repeat)
    path = record.nodeid.split("::")[0]
    why = f"{name}: recorded before the run was stopped, ahead of its item"
    outcome, when, longrepr = {
        "passed": ("passed", "call", None),
        "failed": ("failed", "call", f"{why}: reward {record.reward} < min_reward {record.min_reward}"),
        "unsolved": ("skipped", "call", (path, 0, f"{why}: unsolved")),
    }.get(record.outcome or "", ("failed", "setup", f"{why}: error {record.error.type if record.error else '?'}"))
    report = pytest.TestReport(nodeid=record.nodeid, location=(path, None, name), keywords={"agentgym": 1},
                               outcome=outcome, longrepr=longrepr, when=when, duration=float(record.duration_s or 0),
                               user_properties=[("reward", record.reward), ("outcome", record.outcome)])
    setattr(report, _OUTCOME_ATTR, record.outcome)
    return report

"""Batches answered later: ``POST /rollouts?async=1`` gives a job id, and
``GET /rollouts/{id}`` the job's state with the rollouts finished so far, so a
client is not held on one HTTP request while a large batch plays.

A job's answers are built once each, when first asked for. Finished jobs are
kept until the service stops, the newest first, as long as there are at most
:data:`KEEP_FINISHED` of them holding at most ``keep_rollouts`` rollouts in all
(the service's queue limit), so what is kept for GET is bounded as the queue is.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from typing import Any

from pytest_agentgym.rollouts.service import Pending

#: Finished jobs kept for GET; older ones are dropped (their rollouts stay in episodes.jsonl).
KEEP_FINISHED = 100


class Job:
    def __init__(self, job_id: str, pending: list[Pending], facts: dict[str, Any]) -> None:
        self.id = job_id
        self.pending = pending
        self.facts = facts
        self.created = time.time()
        self._answers: dict[int, dict[str, Any]] = {}

    @property
    def done(self) -> bool:
        return all(p.future.done() for p in self.pending)

    def view(self) -> dict[str, Any]:
        """The job's state: running or done, counts, and the finished rollouts in batch order."""
        for index, item in enumerate(self.pending):
            if index not in self._answers and item.future.done():
                self._answers[index] = item.answer()
        finished = len(self._answers)
        return {"job_id": self.id, "status": "done" if finished == len(self.pending) else "running",
                "total": len(self.pending), "finished": finished, **self.facts,
                "rollouts": [self._answers[i] for i in sorted(self._answers)]}


class Jobs:
    def __init__(self, keep_finished: int = KEEP_FINISHED, keep_rollouts: int | None = None) -> None:
        self.keep_finished = keep_finished
        self.keep_rollouts = keep_rollouts
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._count = itertools.count(1)

    def add(self, pending: list[Pending], facts: dict[str, Any]) -> Job:
        job = Job(f"job-{next(self._count)}-{uuid.uuid4().hex[:8]}", pending, facts)
        with self._lock:
            self._jobs[job.id] = job
            finished = [j for j in self._jobs.values() if j.done]  # oldest first
            kept = sum(len(j.pending) for j in finished)
            while finished and (len(finished) > self.keep_finished
                                or (self.keep_rollouts is not None and kept > self.keep_rollouts)):
                old = finished.pop(0)
                del self._jobs[old.id]
                kept -= len(old.pending)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def running(self) -> int:
        with self._lock:
            return sum(1 for job in self._jobs.values() if not job.done)

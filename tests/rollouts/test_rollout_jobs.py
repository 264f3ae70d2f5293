"""What the rollout service keeps of finished async jobs: bounded by jobs and by rollouts."""

from __future__ import annotations

import concurrent.futures

from pytest_agentgym.rollouts.jobs import Jobs
from pytest_agentgym.rollouts.service import Pending


def _pending(count: int, done: bool = True) -> list[Pending]:
    items = []
    for index in range(count):
        future: concurrent.futures.Future = concurrent.futures.Future()
        if done:
            future.cancel()  # finished, as far as a job is concerned
        items.append(Pending(index, 0, future))
    return items


def test_finished_jobs_are_kept_while_they_hold_at_most_keep_rollouts():
    jobs = Jobs(keep_finished=100, keep_rollouts=50)
    running = jobs.add(_pending(40, done=False), {})
    kept = [jobs.add(_pending(20), {}) for _ in range(4)]
    # the newest finished ones that fit in 50 rollouts; a running job is never dropped
    assert [jobs.get(job.id) is not None for job in kept] == [False, False, True, True]
    assert jobs.get(running.id) is running and jobs.running() == 1


def test_finished_jobs_are_kept_up_to_keep_finished():
    jobs = Jobs(keep_finished=3, keep_rollouts=None)
    added = [jobs.add(_pending(1), {}) for _ in range(5)]
    assert [jobs.get(job.id) is not None for job in added] == [False, False, True, True, True]

"""What a queue run's episodes mean, on the coordinator's side: the run's fingerprint
that every work item carries, the check of each result against it, and the notes
that name each worker that refused the run's items, whose results were dropped (played
under another fingerprint) or refused (not from the run's workers, or not of the run's
episodes: queue/acceptance.py).

Plain data, no network (the coordinator calls it from its event loop).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_agentgym.queue.wire import Refusal, Result, WireError, decode
from pytest_agentgym.results import fingerprint as fingerprints
from pytest_agentgym.results.records import EpisodeRecord


class RunMeaning:
    def __init__(self, endpoint_kind: str | None = None) -> None:
        #: the workers' endpoint kind the roll call pinned (queue/fleet.py); None: not pinned
        self.endpoint_kind = endpoint_kind
        #: the run's fingerprint (:meth:`adopt`); None: items carry none and no result is
        #: checked (a coordinator used without a run, as in unit tests)
        self.fingerprint: dict[str, Any] | None = None
        #: worker -> {reason: deliveries it refused for it}; results dropped, alike
        self.refusals: dict[str, dict[str, int]] = {}
        self.dropped: dict[str, dict[str, int]] = {}
        #: worker -> {reason: results refused for it} and -> how many results (queue/acceptance.py)
        self.unaccepted: dict[str, dict[str, int]] = {}
        self.unaccepted_results: dict[str, int] = {}
        #: env -> server identity -> the workers whose recorded results named it
        self.servers: dict[str, dict[str, set[str]]] = {}
        #: what the workers' servers said a run must record about their data -> those workers
        self.data_notes: dict[str, set[str]] = {}

    def adopt(self, fp: dict[str, Any]) -> dict[str, Any]:
        """The run's fingerprint as work items carry it: ``fp`` as the run built it, with
        the endpoint kind the roll call pinned (the coordinator's own is "queue", which no
        worker serves)."""
        if self.endpoint_kind is not None:
            fp = {**fp, "endpoint_kind": self.endpoint_kind}
        self.fingerprint = fp
        return fp

    def for_episode(self, env: str, **episode: Any) -> dict[str, Any]:
        """What a work item of ``env`` carries (empty when the run gave no fingerprint)."""
        from pytest_agentgym import __version__

        if self.fingerprint is None:
            return {}
        return fingerprints.for_episode(self.fingerprint, env, plugin_version=__version__, **episode)

    def problems(self, expected: dict[str, Any] | None, result: Result) -> list[str]:
        """How ``result`` was played under another fingerprint than ``expected`` (its work
        item's; None: the run's for its environment). Empty: none, or nothing to check."""
        if self.fingerprint is None:
            return []
        if expected is None:
            expected = self.for_episode(result.record.env)
        return fingerprints.episode_differences(expected, result.fingerprint)

    def refused(self, data: bytes, headers: Any, run_id: str) -> bool:
        """Count a worker's :class:`Refusal` of an item of ``run_id``; False when it is another run's."""
        try:
            refusal = Refusal.from_payload(decode(data, headers))
        except WireError as exc:
            refusal = Refusal(worker="?", run_id=run_id, item="?", reasons=(str(exc),))
        if refusal.run_id != run_id:
            return False
        _count(self.refusals.setdefault(refusal.worker, {}), refusal.reasons)
        return True

    def dropped_result(self, worker: str, reasons: list[str]) -> None:
        _count(self.dropped.setdefault(worker, {}), reasons)

    def refused_result(self, worker: str, reasons: list[str]) -> None:
        """Count a result that does not count (:func:`~pytest_agentgym.queue.acceptance.unaccepted`)."""
        _count(self.unaccepted.setdefault(worker, {}), reasons)
        self.unaccepted_results[worker] = self.unaccepted_results.get(worker, 0) + 1

    def recorded(self, result: Result) -> None:
        identity = result.fingerprint.get("server")
        if identity is not None:
            self.servers.setdefault(result.record.env, {}).setdefault(str(identity), set()).add(result.worker)
        note = result.fingerprint.get("data_note")
        if isinstance(note, str) and note:
            self.data_notes.setdefault(note, set()).add(result.worker)

    def notes(self) -> tuple[str, ...]:
        """run.json's notes at the end: each worker that refused the run's items, whose results
        were dropped or refused, with the differences and counts; environments whose workers' servers differ;
        what the workers' servers said of their data (the project's WebShop catalogue)."""
        lines = [f"worker {worker} refused this run's work items (it played none of them): {_counted(reasons)}"
                 for worker, reasons in sorted(self.refusals.items())]
        lines += [f"dropped results from worker {worker}, played under another fingerprint or version (none "
                  f"recorded; their items were published again): {_counted(reasons)}"
                  for worker, reasons in sorted(self.dropped.items())]
        lines += [f"refused {self.unaccepted_results[worker]} result(s) from worker {worker!r} (none recorded; "
                  f"their episodes wait for a result from the run's own workers): {_counted(reasons)}"
                  for worker, reasons in sorted(self.unaccepted.items())]
        for env, identities in sorted(self.servers.items()):
            if len(identities) > 1:
                lines.append(f"{env}: the workers' environment servers differ (each worker brings its own): "
                             + "; ".join(f"{i} ({', '.join(sorted(w))})" for i, w in sorted(identities.items())))
        lines += [f"{note} (workers {', '.join(sorted(workers))})" for note, workers in sorted(self.data_notes.items())]
        return tuple(lines)


def _count(counts: dict[str, int], reasons: Any) -> None:
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1


def _counted(reasons: dict[str, int]) -> str:
    return "; ".join(f"{reason} ({n} time(s))" for reason, n in sorted(reasons.items()))


def payload_key(payload: dict[str, Any]) -> tuple[str, int, int] | None:
    """The episode key of a result of another wire version, if it can be told."""
    record = payload.get("record")
    try:
        return (str(record["env"]), int(record["task_index"]), int(record["repeat"]))
    except (KeyError, TypeError, ValueError):
        return None


def with_worker(record: EpisodeRecord, worker: str) -> EpisodeRecord:
    """The record with the name of the worker that played it (the report shows it)."""
    return record if record.worker == worker else dataclasses.replace(record, worker=worker)


def give_up(reissue: int, worker: str, reasons: list[str]) -> str:
    """The error message of an episode whose results kept coming under another fingerprint."""
    return (f"{reissue + 1} result(s) of this episode were played under another fingerprint (last from worker "
            f"{worker}: {'; '.join(reasons)}) and dropped; run workers that honour the run's fingerprint "
            f"(run.json), then resume the run")


def worker_fingerprint(item: Any, *, model: str, endpoint_kind: str, checkpoint: str | None,
                       node_sampling: dict[str, Any], prompt_sha256: str | None,
                       server: str | None, data_note: str | None = None) -> dict[str, Any]:
    """What the episode of ``item`` would mean if this worker played it (the keys of
    fingerprint.for_episode): its model endpoint, the sampling it would send (its node's
    under the item's, as its model client merges them), its adapter's prompt, its server;
    and what that server says a run must record about its data (``data_note``: not
    compared, gathered into run.json's notes by :meth:`RunMeaning.notes`)."""
    from pytest_agentgym import __version__

    return {"plugin_version": __version__, "model": model, "endpoint_kind": endpoint_kind,
            "checkpoint": checkpoint, "max_rounds": item.max_rounds,
            "sampling": {**node_sampling, **item.sampling}, "prompt_sha256": prompt_sha256, "server": server,
            "data_note": data_note}

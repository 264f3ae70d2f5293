"""pytest-xdist workers that read ahead, so ``-n N`` composes with in-process concurrency.

Without this, a worker plays the episode of the item it is running and nothing
else: ``-n 4`` means four episodes in flight, whatever ``--agentgym-concurrency``
says. Two pieces fix that:

* :class:`ReadAheadScheduling` (controller): xdist's ``load`` scheduler, except
  that the whole collection is handed out at the start, in contiguous shares
  (xdist's own hands out a quarter and then tops a worker up two items at a
  time once its tests take longer than 0.1 s, which would leave a worker
  nothing to read ahead). A worker that dies has its unfinished share handed
  to the others, as before.
* :class:`WorkerReadAhead` (worker): before each item runs, the episodes of
  the items queued for this worker (xdist's ``WorkerInteractor`` keeps them in
  ``torun``) are submitted to the worker's engine in queue order, so up to
  ``--agentgym-concurrency`` of them are in flight while pytest reports one
  item after another. An episode whose item left the queue (taken by another
  worker) is withdrawn if it has not begun.

So ``-n N --agentgym-concurrency C`` has up to ``N * C`` episodes in flight.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

#: ``config.option.dist`` values this module takes over from pytest-xdist
TAKEN_OVER = ("load",)


def make_scheduler(config: Any, log: Any) -> Any:
    """The controller's scheduler for a run of episodes (pytest_xdist_make_scheduler)."""
    from xdist.scheduler import LoadScheduling

    class ReadAheadScheduling(LoadScheduling):
        """xdist's load scheduling with the whole collection handed out at the start."""

        def schedule(self) -> None:
            first = self.collection is None
            super().schedule()
            if not first or not self.pending or not self.nodes:
                return
            nodes = list(self.nodes)
            for position, node in enumerate(nodes):
                share = -(-len(self.pending) // (len(nodes) - position))  # ceil: what is left, evenly
                if share:
                    self._send_tests(node, share)
            for node in nodes:
                node.shutdown()

    return ReadAheadScheduling(config, log)


def _interactor(config: Any) -> Any:
    """xdist's WorkerInteractor in this worker process (it registers itself unnamed)."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


class WorkerReadAhead:
    """Keeps a worker's engine fed with the episodes of the items queued for it.

    ``submit(items)`` queues episodes (EvaluationRun.read_ahead), ``withdraw(keys)``
    takes back those not begun (EvaluationRun.withdraw); ``is_episode`` tells
    episode items from other tests.
    """

    def __init__(self, config: Any, submit: Callable[[Sequence[Any]], None],
                 withdraw: Callable[[Sequence[str]], list[str]], is_episode: Callable[[Any], bool]) -> None:
        self.config = config
        self._submit = submit
        self._withdraw = withdraw
        self._is_episode = is_episode
        self._interactor = _interactor(config)
        #: nodeids submitted here and not yet run
        self.ahead: set[str] = set()

    def queued_indices(self) -> list[int]:
        """Indices (into session.items) of the items this worker will run, in order:
        the one running, the next one, then what xdist has queued."""
        interactor = self._interactor
        if interactor is None:
            return []
        indices = [getattr(interactor, "item_index", None), getattr(interactor, "nextitem_index", None)]
        with interactor.torun.lock() as queue:
            indices.extend(queue)
        seen: dict[int, None] = {}
        for index in indices:
            if isinstance(index, int) and not isinstance(index, bool):
                seen.setdefault(index, None)
        return list(seen)

    def before(self, item: Any, session: Any) -> None:
        """Called as ``item`` starts: submit the queued episodes not yet submitted,
        withdraw those whose items are no longer queued here."""
        self.ahead.discard(item.nodeid)
        items = session.items
        queued = [items[i] for i in self.queued_indices() if 0 <= i < len(items)]
        episodes = [i for i in queued if self._is_episode(i)]
        still = {i.nodeid for i in episodes}
        gone = [key for key in self.ahead if key not in still and key != item.nodeid]
        if gone:
            self._withdraw(gone)
            self.ahead.difference_update(gone)
        new = [i for i in episodes if i.nodeid not in self.ahead and i.nodeid != item.nodeid]
        if new:
            self._submit(new)
            self.ahead.update(i.nodeid for i in new)

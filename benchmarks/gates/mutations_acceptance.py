"""Issue 39's mutations of the queue's result checks (benchmarks/gates/mutation_pass.py): a
result counts only from a worker heard at the roll call (or since), whose heartbeat does not
refuse the run, with the run's id, model and checkpoint and the episode its subject names
(queue/acceptance.py, the coordinator's use of it, queue/meaning.py's notes). The rule's tests
run without a network; the coordinator's against a real nats-server.
"""

from __future__ import annotations

from benchmarks.gates.mutations import Mutation

_RULE = "tests/queue/test_result_acceptance.py::"
_NEVER_HEARD = _RULE + "test_a_worker_never_heard_is_not_one_of_the_runs"
_HEARTBEAT = _RULE + "test_a_worker_whose_heartbeat_refuses_the_run_does_not_count"
_RECORD = _RULE + "test_a_record_of_another_run_model_or_checkpoint_does_not_count"
_EPISODE = _RULE + "test_a_record_of_another_episode_than_its_subject_names_does_not_count"
_NOTES = _RULE + "test_every_reason_is_named_and_the_notes_count_results_and_reasons"
_PLAYED_BEFORE = _RULE + "test_a_worker_takes_only_its_own_result_of_the_item_as_played_before"
_FORGED = _RULE + "test_the_coordinator_refuses_forged_results_and_the_runs_worker_resolves_the_episode"
_ROLL_CALL = _RULE + "test_a_worker_heard_only_when_its_result_makes_the_coordinator_call_the_roll_counts"
_AT_THE_END = _RULE + "test_results_still_waiting_for_their_workers_when_the_run_ends_are_counted"

ACCEPTANCE = (
    # -- queue/acceptance.py: the rule -------------------------------------------------------------
    Mutation("a worker never heard is one of the run's", "queue/acceptance.py",
             '        reasons.append(f"not a worker of queue {queue}: it never answered the roll call nor sent a '
             'heartbeat")',
             "        pass",
             (_NEVER_HEARD,)),
    Mutation("a worker whose heartbeat refuses the run counts", "queue/acceptance.py",
             "        if refused:\n",
             "        if False:\n",
             (_HEARTBEAT,)),
    Mutation("a worker of another wire version counts", "queue/acceptance.py",
             "    if beat.wire != WIRE_VERSION:",
             "    if False:",
             (_HEARTBEAT,)),
    Mutation("a worker's heartbeat is judged by its own model", "queue/acceptance.py",
             '    run = {"plugin_version": __version__, "model": model or beat.model, "checkpoint": checkpoint,',
             '    run = {"plugin_version": __version__, "model": beat.model, "checkpoint": checkpoint,',
             (_HEARTBEAT,)),
    Mutation("a record of another run counts", "queue/acceptance.py",
             "    if record.run_id != run_id:\n",
             "    if False:\n",
             (_RECORD,)),
    Mutation("a record of another model counts", "queue/acceptance.py",
             '    if record.model != run.get("model"):',
             "    if False:",
             (_RECORD,)),
    Mutation("a record of another checkpoint counts", "queue/acceptance.py",
             '    if record.checkpoint != run.get("checkpoint"):',
             "    if False:",
             (_RECORD,)),
    Mutation("a record of another episode than its subject names counts", "queue/acceptance.py",
             "    if came_on != expected_on:",
             "    if False:",
             (_EPISODE,)),
    Mutation("another worker's result is played before", "queue/acceptance.py",
             "    return (result.worker == worker and (result.generation, result.reissue)",
             "    return (True and (result.generation, result.reissue)",
             (_PLAYED_BEFORE,)),
    Mutation("a result from before the item's reissue is played before", "queue/acceptance.py",
             "and (result.generation, result.reissue) == (item.generation, item.reissue)",
             "and result.generation == item.generation",
             (_PLAYED_BEFORE,)),
    Mutation("a result of another model is played before", "queue/acceptance.py",
             "            and (record.run_id, record.key, record.checkpoint, record.model)\n"
             "            == (item.run_id, item.key, item.checkpoint, model))",
             "            and (record.run_id, record.key, record.checkpoint)\n"
             "            == (item.run_id, item.key, item.checkpoint))",
             (_PLAYED_BEFORE,)),
    Mutation("no roll call for a worker not heard", "queue/acceptance.py",
             "            await ask()\n",
             "            pass\n",
             (_ROLL_CALL,)),
    Mutation("a worker not heard gets no time to answer", "queue/acceptance.py",
             "            await asyncio.wait_for(heard.wait(), VOUCH_S)",
             "            await asyncio.wait_for(heard.wait(), 0)",
             (_ROLL_CALL,)),
    Mutation("results still waiting at the end are forgotten", "queue/acceptance.py",
             "        entries = list(self._waiting.values())",
             "        entries = []",
             (_AT_THE_END,)),
    # -- queue/coordinator.py: the rule applied ----------------------------------------------------
    Mutation("a result that does not count is recorded", "queue/coordinator.py",
             "            if reasons:\n                self.stats[\"unaccepted\"] += 1",
             "            if False:\n                self.stats[\"unaccepted\"] += 1",
             (_FORGED,)),
    Mutation("a worker not heard is judged at once", "queue/coordinator.py",
             "            if result.worker not in self.workers and not waited:",
             "            if False:",
             (_ROLL_CALL,)),
    Mutation("a heartbeat of another queue vouches for a worker", "queue/coordinator.py",
             "        if beat is not None and beat.queue == self.address.name:",
             "        if beat is not None:",
             ("tests/queue/test_mutants_acceptance.py",)),
    # -- queue/meaning.py: the notes count what was refused ----------------------------------------
    Mutation("the refused results of a worker are counted once", "queue/meaning.py",
             "        self.unaccepted_results[worker] = self.unaccepted_results.get(worker, 0) + 1",
             "        self.unaccepted_results[worker] = 1",
             (_NOTES,)),
    Mutation("refused results are not in the notes", "queue/meaning.py",
             "                  for worker, reasons in sorted(self.unaccepted.items())]",
             "                  for worker, reasons in sorted(self.unaccepted.items()) if False]",
             (_NOTES,)),
)

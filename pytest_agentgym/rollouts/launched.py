"""vLLM on a checkpoint, launched and owned by the rollout service
(``pytest-agentgym rollout-server --checkpoint PATH``).

The launch is pytest's ``--agentgym-checkpoint`` one
(:func:`~pytest_agentgym.model.launcher.launch_checkpoint`): the node profile's vllm
endpoint and ``vllm:`` section, the checkpoint checked before vLLM starts, the dtype
and logprobs mode fitted and noted, a process killed with the service
(``PR_SET_PDEATHSIG``) and its shared memory reaped. The service starts it after
run.json is begun, writes its notes (or why it failed) there, gives its URL to the
batches that name no ``base_url``, and stops it when it closes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_agentgym.results.ledger import RunLedger
from pytest_agentgym.rollouts.node import RolloutNode

__all__ = ["OwnedVLLM"]


class OwnedVLLM:
    """vLLM on ``checkpoint`` for the service on ``node``; :meth:`start`, then :meth:`close`."""

    def __init__(self, node: RolloutNode, checkpoint: str) -> None:
        self.node = node
        self.checkpoint = str(checkpoint)
        #: the running endpoint (a ChosenEndpoint) once started
        self.endpoint: Any = None

    @property
    def base_url(self) -> str | None:
        """The OpenAI base URL of the running vLLM (None before :meth:`start`)."""
        return self.endpoint.base_url if self.endpoint is not None else None

    def start(self, ledger: RunLedger) -> list[str]:
        """Launch vLLM into ``ledger``'s log directory and wait until it is healthy; its notes
        (dtype, logprobs mode, start-up time ...) go into run.json. Returns lines to print:
        where it is and its log, then the notes. Raises
        :class:`~pytest_agentgym.model.vllm.LaunchError`, also noted in run.json."""
        from pytest_agentgym.model.launcher import launch_checkpoint
        from pytest_agentgym.model.vllm import LaunchError

        log_dir = ledger.run_dir.logs
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.endpoint = launch_checkpoint(self.node.node.model_settings(), self.checkpoint, log_dir,
                                              where=f"node {self.node.name} ({self.node.file})")
        except LaunchError as exc:
            _note(ledger, f"vLLM on {self.checkpoint} did not start: {exc}")
            raise
        notes = tuple(self.endpoint.notes)
        _note(ledger, *notes)
        log = self.endpoint.process.process.log_path
        return [f"vLLM on {self.checkpoint}: {self.endpoint.base_url} serving model {self.endpoint.model} "
                f"(for batches without base_url); log: {log}", *(f"vLLM: {note}" for note in notes)]

    def close(self) -> None:
        """Stop vLLM (SIGTERM to its family, SIGKILL after the grace). Idempotent."""
        endpoint, self.endpoint = self.endpoint, None
        if endpoint is not None:
            endpoint.close()


def _note(ledger: RunLedger, *notes: str) -> None:
    ledger.write(dataclasses.replace(ledger.info, notes=ledger.info.notes + notes))

"""Where a work queue lives and how it is tuned: ``nats://HOST:PORT?name=...``.

One URL form serves the coordinator (``--agentgym-queue``) and the worker
(``pytest-agentgym worker --nats``)::

    nats://127.0.0.1:4222                       queue "agentgym", the defaults below
    nats://10.0.0.5:4222?name=ckpt&ack_wait=120&max_deliver=5

The query keys: ``name`` (which queue, so several fleets can share one server;
letters, digits, ``_`` and ``-``), ``ack_wait`` (seconds JetStream waits for a
worker's ack or in-progress ack before it hands the work item to another
worker), ``max_deliver`` (deliveries of one work item before the coordinator
records ``harness:WorkerLost``). From the name come the JetStream names
(:class:`QueueAddress` properties); docs/scale-out.md, *Work queue*.

The URL may also say how to sign in and whether to use TLS, with the keys of
:mod:`pytest_agentgym.transport.nats_options` (``creds=PATH``, ``nkey=PATH``,
``user=NAME&password_env=VARIABLE``, ``token_env=VARIABLE``, ``tls_ca=PATH``, ...):
names of files and variables, never the secrets, so the URL can be shown as given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_agentgym.transport.nats_options import KEYS as AUTH_KEYS
from pytest_agentgym.transport.nats_options import NatsAuth, NatsOptionsError, split_nats_url

DEFAULT_NAME = "agentgym"
DEFAULT_ACK_WAIT_S = 60.0
DEFAULT_MAX_DELIVER = 5
#: Subjects of the queue live under this root, not under ``agentgym.>``: a stream the
#: event publisher creates on ``agentgym.>`` must not overlap the queue's streams.
SUBJECT_ROOT = "agentgymq"

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_KEYS = ("name", "ack_wait", "max_deliver")


class QueueAddressError(ValueError):
    """A queue URL that cannot be used; the message says what to write instead."""


def subject_token(text: str) -> str:
    """``text`` as one subject token (no '.', '*', '>' or whitespace)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text) or "_"


@dataclass(frozen=True)
class QueueAddress:
    server: str
    name: str = DEFAULT_NAME
    ack_wait_s: float = DEFAULT_ACK_WAIT_S
    max_deliver: int = DEFAULT_MAX_DELIVER
    #: how to sign in and whether to use TLS (file paths and variable names only)
    auth: NatsAuth = NatsAuth()

    @classmethod
    def parse(cls, url: str, *, where: str = "--agentgym-queue") -> "QueueAddress":
        try:
            server, query, auth = split_nats_url(
                url, where=where, form="(optionally ?name=NAME&ack_wait=SECONDS&max_deliver=N)")
        except NatsOptionsError as exc:
            raise QueueAddressError(str(exc)) from None
        at = f"{where}={url}" if where else str(url)  # no user info: split_nats_url refuses it
        unknown = sorted(set(query) - set(_KEYS))
        if unknown:
            raise QueueAddressError(f"{at}: unknown key(s) {', '.join(unknown)}; "
                                    f"known: {', '.join(_KEYS + AUTH_KEYS)}")
        name = query.get("name", DEFAULT_NAME)
        if not _NAME.fullmatch(name):
            raise QueueAddressError(f"{at}: name={name!r} must be 1-64 letters, digits, "
                                    f"'_' or '-'")
        try:
            ack_wait = float(query.get("ack_wait", DEFAULT_ACK_WAIT_S))
            max_deliver = int(query.get("max_deliver", DEFAULT_MAX_DELIVER))
        except ValueError:
            raise QueueAddressError(f"{at}: ack_wait is seconds (e.g. 60) and max_deliver "
                                    f"a whole number (e.g. 5)") from None
        if ack_wait < 1:
            raise QueueAddressError(f"{at}: ack_wait={ack_wait:g} is too short; give at "
                                    f"least 1 second (workers send in-progress acks every third of it)")
        if max_deliver < 1:
            raise QueueAddressError(f"{at}: max_deliver={max_deliver} must be at least 1")
        return cls(server=server, name=name, ack_wait_s=ack_wait, max_deliver=max_deliver, auth=auth)

    def describe(self) -> str:
        signed = "" if self.auth.method == "none" and not self.auth.tls else f", {self.auth.describe()}"
        return (f"queue {self.name} at {self.server} (AckWait {self.ack_wait_s:g} s, "
                f"MaxDeliver {self.max_deliver}{signed})")

    # -- JetStream names ---------------------------------------------------------------

    @property
    def _upper(self) -> str:
        return self.name.upper().replace("-", "_")

    @property
    def work_stream(self) -> str:
        return f"AGENTGYMQ_{self._upper}_WORK"

    @property
    def results_stream(self) -> str:
        return f"AGENTGYMQ_{self._upper}_RESULTS"

    #: the durable pull consumer every worker of this queue binds to
    workers_consumer = "workers"

    def coordinator_consumer(self, run_id: str) -> str:
        return f"coordinator_{subject_token(run_id)}"

    @property
    def _root(self) -> str:
        return f"{SUBJECT_ROOT}.{self.name}"

    def work_subject(self, run_id: str, env: str, task_index: int, repeat: int) -> str:
        return f"{self._root}.work.{subject_token(run_id)}.{subject_token(env)}.{task_index}.{repeat}"

    def result_subject(self, run_id: str, env: str, task_index: int, repeat: int) -> str:
        return f"{self._root}.results.{subject_token(run_id)}.{subject_token(env)}.{task_index}.{repeat}"

    def results_of_run(self, run_id: str) -> str:
        return f"{self._root}.results.{subject_token(run_id)}.>"

    @property
    def work_subjects(self) -> str:
        return f"{self._root}.work.>"

    @property
    def result_subjects(self) -> str:
        return f"{self._root}.results.>"

    @property
    def ping_subject(self) -> str:
        """Workers answer a message here with their heartbeat (the coordinator's roll call)."""
        return f"{self._root}.ping"

    def refusal_subject(self, run_id: str) -> str:
        """Where a worker says why it did not play a work item of ``run_id`` (core NATS:
        the coordinator of the run listens; nothing is stored)."""
        return f"{self._root}.refusals.{subject_token(run_id)}"

    def max_deliveries_advisory(self) -> str:
        return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.work_stream}.{self.workers_consumer}"

"""Ports for the servers a run spawns: never the same one twice from one process, and a
first start that lost its port to another process moves to a new one (process/health.py,
process/backoff.py). Seen in CI under load: an environment server and the reference agent
were both given port 44429; the server then failed three starts on it."""

from __future__ import annotations

import socket

from helpers import plain_http

from pytest_agentgym.process import health
from pytest_agentgym.process.backoff import start_with_backoff
from pytest_agentgym.process.managed import ManagedServer



def test_free_port_never_hands_out_a_port_twice():
    ports = [health.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def held_port() -> socket.socket:
    """A listening socket of another 'process' on a free port."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", health.free_port()))
    holder.listen()
    return holder


def test_a_first_start_on_a_port_another_process_holds_moves_to_a_new_port(tmp_path):
    holder = held_port()
    taken = holder.getsockname()[1]
    assert health.port_is_taken("127.0.0.1", taken)
    server = ManagedServer("plain", command=plain_http.command(), port=taken,
                           log_path=tmp_path / "plain.log", startup_timeout=30)
    try:
        start_with_backoff(server, attempts=2, backoff=30)  # no back-off wait for a taken port
        assert server.port != taken and server.url == f"http://127.0.0.1:{server.port}"
        assert server.answered
        log = (tmp_path / "plain.log").read_text()
        assert f"port {taken} is held by another process; moving to port {server.port}" in log
    finally:
        server.stop()
        holder.close()


def test_a_server_that_has_answered_keeps_its_port_for_its_clients(tmp_path):
    server = ManagedServer("plain", command=plain_http.command(),
                           log_path=tmp_path / "plain.log", startup_timeout=30).start()
    port = server.port
    try:
        assert health.port_is_taken("127.0.0.1", port)  # held by the server itself
        assert server.leave_a_taken_port() is None and server.port == port
    finally:
        server.stop()

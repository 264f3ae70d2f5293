"""Health probes of a managed server (process/health.py): one probe client serves every
poll of a server's lifecycle instead of one client per poll."""

from __future__ import annotations

from helpers import plain_http

from pytest_agentgym.process import health
from pytest_agentgym.process import managed as process




def test_one_health_probe_client_serves_every_poll_of_a_server_lifecycle(tmp_path, monkeypatch):
    made, probes = [], []
    real_client, real_probe = health.probe_client, health.probe

    def counting_client():  # type: ignore[no-untyped-def]
        made.append(1)
        return real_client()

    def counting_probe(*args, **kwargs):  # type: ignore[no-untyped-def]
        probes.append(kwargs.get("client") if "client" in kwargs else (args[3] if len(args) > 3 else None))
        return real_probe(*args, **kwargs)

    monkeypatch.setattr(process, "probe_client", counting_client)
    monkeypatch.setattr(process, "probe", counting_probe)
    server = process.ManagedServer("slow", command=plain_http.command(delay=1.5),
                                   log_path=tmp_path / "slow.log", startup_timeout=30)
    try:
        server.start()
        assert server.is_alive()
    finally:
        server.stop()
    assert len(probes) >= 2, f"the server answered at once: the test did not poll ({(tmp_path / 'slow.log').read_text()})"
    assert len(made) == 1
    assert all(client is probes[0] and client is not None for client in probes)


# -- ask: a question whose answer goes into a run's record ------------------------------


def faulty_server(tmp_path):
    from helpers.env_faults import command

    return process.ManagedServer("faulty", command=command("env_idx"), log_path=tmp_path / "faulty.log",
                                 startup_timeout=60).start()


def test_ask_waits_for_a_late_answer_and_names_what_never_came(tmp_path):
    import httpx

    server = faulty_server(tmp_path)
    try:
        with health.probe_client() as client:
            assert health.ask(client, server.url + "/observation", within=10).status_code == 200
            assert health.ask(client, server.url + "/no-such-route", within=10).status_code == 404  # an answer
            httpx.post(server.url + "/_fault", json={"on": "/observation", "hang": True}, timeout=10)
            try:
                health.ask(client, server.url + "/observation", within=1.5)
            except health.NoAnswer as exc:
                assert str(exc) == f"GET {server.url}/observation: no answer within 1.5 s"
            else:
                raise AssertionError("a server that never answers was taken as answering")
    finally:
        server.stop()


def test_ask_asks_again_while_nothing_listens_yet(tmp_path):
    """The server listens only after 1.5 s: ask retries the refused connection."""
    port = health.free_port()
    child = process.ManagedServer("slow", command=plain_http.command(delay=1.5), port=port,
                                  log_path=tmp_path / "slow.log", startup_timeout=30)
    child.spawn()
    try:
        with health.probe_client() as client:
            assert health.ask(client, health.server_url("127.0.0.1", port) + "/", within=30).text == "ok"
    finally:
        child.stop()

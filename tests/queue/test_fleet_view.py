"""`pytest-agentgym fleet`: the table of a queue's workers, from real heartbeats on a real
nats-server (a free loopback port): a real worker that played a real run's episodes, and
heartbeats published on the wire as an older, a hung and a stopping worker would send
them; the states' rule on the table itself; the live view on a pseudo-terminal; an
unreachable server."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import subprocess
import sys

import pytest

from helpers.nats_server import NatsServer, free_port
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.waiting import wait_until
from pytest_agentgym.queue.fleet_view import FleetView, state_of, table
from pytest_agentgym.queue.wire import HEARTBEAT_SUBJECT, Heartbeat

pytestmark = pytest.mark.heavy


def fleet_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest_agentgym", "fleet", *args]


def beat(worker: str = "w1", **fields) -> Heartbeat:
    base = dict(worker=worker, queue="lab", profile="4090", model="qwen", capacity=4, load=1, host="node-a",
                played=7, runs=("run-a",), interval_s=10.0)
    return Heartbeat(**{**base, **fields})


# -- the table, pure -----------------------------------------------------------------


def test_a_worker_is_alive_then_stale_then_gone_by_its_own_heartbeat_interval():
    fast = beat(interval_s=2.0)  # stale after 6 s, gone after 18 s
    assert [state_of(fast, age) for age in (0, 6, 6.5, 18, 18.5)] == ["alive", "alive", "stale", "stale", "gone"]
    old = beat(interval_s=None)  # a worker that does not say its interval: 10 s assumed
    assert [state_of(old, age) for age in (29, 31, 91)] == ["alive", "stale", "gone"]
    assert state_of(old, 31, stale_s=60) == "alive"  # --stale
    assert state_of(beat(state="stopping"), 0) == "gone"  # it said so


def test_the_rows_are_one_per_worker_of_the_queue_with_its_newest_heartbeat():
    view = FleetView("lab")
    assert view.heard(beat("w2", load=0, played=0, runs=()), at=100.0)
    assert view.heard(beat("w1", load=1), at=100.0)
    assert view.heard(beat("w1", load=3, played=9, runs=("run-a", "run-b", "run-c")), at=104.0)
    assert not view.heard(beat("w9", queue="other"), at=104.0)
    old = Heartbeat.from_payload({k: v for k, v in beat("w3").to_payload().items()
                                  if k not in ("played", "runs", "interval_s")})
    view.heard(old, at=60.0)
    rows = view.rows(now=105.0)
    assert [(r.beat.worker, r.state) for r in rows] == [("w1", "alive"), ("w2", "alive"), ("w3", "stale")]
    lines = table(rows)
    assert lines[0].split() == ["WORKER", "NODE", "MODEL", "SLOTS", "PLAYED", "HEARD", "STATE", "RUNS"]
    assert lines[1].split() == ["w1", "4090", "qwen", "3/4", "9", "1s", "ago", "alive", "run-a,", "run-b", "+1"]
    assert lines[2].split() == ["w2", "4090", "qwen", "0/4", "0", "5s", "ago", "alive", "none"]
    assert lines[3].split() == ["w3", "4090", "qwen", "1/4", "-", "45s", "ago", "stale", "-"]
    assert rows[2].to_json()["played"] is None and rows[2].to_json()["runs"] is None


def test_the_new_heartbeat_fields_are_valid_field_status_and_read_back():
    import jsonschema

    from pytest_agentgym.publish import load_schema

    payload = beat(played=3, runs=("a", "b"), interval_s=0.5).to_payload()
    jsonschema.validate(payload, load_schema("agentgym.field.status.v1"))
    back = Heartbeat.from_payload(json.loads(json.dumps(payload)))
    assert (back.played, back.runs, back.interval_s) == (3, ("a", "b"), 0.5)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**payload, "played": -1}, load_schema("agentgym.field.status.v1"))


# -- on the wire ------------------------------------------------------------------------


@pytest.fixture
def nats(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    yield server
    server.stop()


def test_a_real_worker_shows_the_episodes_it_played_and_the_run_it_served(tmp_path, nats):
    url = f"{nats.url}?name=lab"
    fleet = Fleet(tmp_path / "fleet", url)
    try:
        fleet.start("w1", profile=worker_profile(tmp_path / "w.yaml", concurrency=2), heartbeat=0.5)
        fleet.wait_serving("w1")
        project = tmp_path / "project"
        suites(project, Maze="0-2")
        done = subprocess.run(pytest_command("suites", f"--agentgym-queue={url}", "--agentgym-run-id=fleet-run",
                                             "-q"), cwd=project, capture_output=True, text=True,
                              env=env_with_repo(), timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        shown = subprocess.run(fleet_command("--nats", nats.url, "--queue", "lab", "--json"),
                               capture_output=True, text=True, env=env_with_repo(), timeout=60)
        assert shown.returncode == 0, shown.stderr
        (row,) = json.loads(shown.stdout)
        assert row["worker"] == "w1" and row["node"] == "fleetnode" and row["state"] == "alive"
        assert (row["played"], row["runs"], row["slots_in_use"], row["concurrency"]) == (3, ["fleet-run"], 0, 2)
        assert row["interval_s"] == 0.5 and row["model"]

        fleet.stop_all()  # SIGTERM: its last heartbeat says "stopping"; nobody answers the roll call any more
        gone = subprocess.run(fleet_command("--nats", url, "--once", "--wait", "0.5"), capture_output=True,
                              text=True, env=env_with_repo(), timeout=60)
        assert gone.returncode == 0 and gone.stdout.startswith("queue lab at ") and "0 worker(s)" in gone.stdout
        assert f"no worker of queue lab at {nats.url} answered within 0.5 s" in gone.stderr
        assert f"pytest-agentgym worker --nats {nats.url}?name=lab" in gone.stderr
    finally:
        fleet.stop_all()


async def _answer_the_roll_call(url: str, command: list[str]) -> tuple[int, str, str]:
    """Run ``command`` (a fleet view of queue lab) while four workers speak on the wire as
    real ones would: ``new`` beats every 0.2 s (saying 1 s, so a slow machine does not make it stale); ``old`` (no played, runs or interval) and
    ``hung`` (0.3 s interval) answer the roll call once and fall silent; ``leaving`` answers
    that it is stopping; ``elsewhere`` serves another queue."""
    import nats as nats_py

    nc = await nats_py.connect(url)

    async def publish(heartbeat: Heartbeat, drop: tuple[str, ...] = ()) -> None:
        payload = {k: v for k, v in heartbeat.to_payload().items() if k not in drop}
        await nc.publish(HEARTBEAT_SUBJECT, json.dumps(payload).encode())

    async def roll_call(msg) -> None:
        await publish(beat("old", load=2, played=None, runs=None, interval_s=None),
                      drop=("played", "runs", "interval_s"))
        await publish(beat("hung", interval_s=0.3, played=4, runs=("run-a",)))
        await publish(beat("leaving", state="stopping", load=0))
        await publish(beat("elsewhere", queue="other"))

    await nc.subscribe("agentgymq.lab.ping", cb=roll_call)
    await nc.flush()

    async def keep_beating() -> None:
        while True:
            await publish(beat("new", interval_s=1.0, load=1, capacity=2, played=3, runs=("run-a", "run-b")))
            await asyncio.sleep(0.2)

    beating = asyncio.ensure_future(keep_beating())
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=env_with_repo())
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    beating.cancel()
    await nc.close()
    return proc.returncode, out.decode(), err.decode()


def test_heartbeats_on_the_wire_make_alive_stale_gone_and_old_rows(nats):
    # hung: stale limit 0.9 s, gone after 2.7 s; old: 10 s assumed, so alive after the wait
    code, out, err = asyncio.run(_answer_the_roll_call(
        nats.url, fleet_command("--nats", f"{nats.url}?name=lab", "--wait", "1.8")))  # a pipe: printed once
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"queue lab at {nats.url}: 4 worker(s) (2 alive, 1 stale, 1 gone); 4/10 slot(s) in use"
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"hung", "leaving", "new", "old"}
    assert rows["new"][3:5] == ["1/2", "3"] and rows["new"][7:] == ["alive", "run-a,", "run-b"]
    assert rows["old"][3:5] == ["2/4", "-"] and rows["old"][7:] == ["alive", "-"]
    assert rows["hung"][7:] == ["stale", "run-a"]
    assert rows["leaving"][7] == "gone"

    code, out, err = asyncio.run(_answer_the_roll_call(
        nats.url, fleet_command("--nats", nats.url, "--queue", "lab", "--json", "--wait", "0.5", "--stale", "30")))
    assert code == 0, err
    rows = {row["worker"]: row for row in json.loads(out)}
    assert {name: row["state"] for name, row in rows.items()} == {
        "hung": "alive", "leaving": "gone", "new": "alive", "old": "alive"}
    assert rows["old"]["played"] is None and rows["old"]["runs"] is None and rows["old"]["interval_s"] is None
    assert rows["new"]["runs"] == ["run-a", "run-b"] and rows["new"]["host"] == "node-a"


def test_on_a_terminal_the_table_is_redrawn_in_place_until_ctrl_c(nats):
    main, child = pty.openpty()
    proc = subprocess.Popen(fleet_command("--nats", nats.url), stdin=child, stdout=child, stderr=child,
                            env=env_with_repo(), start_new_session=True)
    os.close(child)
    seen = bytearray()

    def drawn_twice() -> bool:
        if select.select([main], [], [], 0)[0]:
            try:
                seen.extend(os.read(main, 65536))
            except OSError:  # the child closed the terminal
                pass
        return seen.count(b"\x1b[H\x1b[2J") >= 2

    try:
        wait_until(drawn_twice, 30, lambda: f"two redraws on the terminal; got {bytes(seen)!r}", procs=(proc,))
        assert b"queue agentgym at " in seen and b"WORKER" in seen and b"Ctrl-C quits" in seen
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(main)


def test_an_unreachable_nats_server_is_exit_2_naming_the_url_and_the_fix():
    port = free_port()  # nothing listens there
    done = subprocess.run(fleet_command("--nats", f"nats://127.0.0.1:{port}", "--once"), capture_output=True,
                          text=True, env=env_with_repo(), timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (f"pytest-agentgym fleet: cannot reach NATS at nats://127.0.0.1:{port} "
                                   f"(Connection refused); start nats-server there, or give the queue's URL "
                                   f"with --nats nats://HOST:PORT")


def test_bad_input_is_exit_2_naming_the_option():
    for args, said in ((("--nats", "http://127.0.0.1:4222"), "--nats=http://127.0.0.1:4222: expected nats://"),
                       (("--nats", "nats://127.0.0.1:4222?name=a", "--queue", "b"), "--queue b and --nats"),
                       (("--nats", "nats://127.0.0.1:4222", "--wait", "0"), "--wait 0: give a positive number"),
                       (("--nats", "nats://127.0.0.1:4222", "--stale", "-1"), "--stale -1: give a positive")):
        done = subprocess.run(fleet_command(*args), capture_output=True, text=True, env=env_with_repo(), timeout=60)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)

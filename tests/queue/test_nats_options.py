"""The auth and TLS keys of a NATS URL (transport/nats_options.py), read in-process:
what each key becomes, and the usage error of each bad value, naming the key and the fix.
The connections themselves are tested against a real nats-server in test_queue_auth.py
and tests/publish/test_publisher_auth.py."""

from __future__ import annotations

import pytest

from pytest_agentgym.config.options import parse_nats
from pytest_agentgym.queue.address import QueueAddress, QueueAddressError
from pytest_agentgym.transport.nats_options import NatsOptionsError, nats_server, split_nats_url


def test_each_way_to_sign_in_becomes_the_keywords_nats_py_takes(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("from-a-file\n")
    env = {"WPASS": "from-a-variable", "TOK": "t0ken"}
    server, rest, auth = split_nats_url(f"nats://127.0.0.1:4222?user=w&password_env=WPASS&name=q", environ=env)
    assert (server, rest) == ("nats://127.0.0.1:4222", {"name": "q"})
    assert auth.connect_kwargs(env) == {"user": "w", "password": "from-a-variable"}
    _, _, auth = split_nats_url(f"nats://h:1?user=w&password_file={pw}", environ=env)
    assert auth.connect_kwargs(env) == {"user": "w", "password": "from-a-file"}
    _, _, auth = split_nats_url("nats://h:1?token_env=TOK", environ=env)
    assert auth.connect_kwargs(env) == {"token": "t0ken"} and auth.describe() == "token from $TOK"
    _, _, auth = split_nats_url("tls://h:1", environ={})
    assert auth.tls and set(auth.connect_kwargs({})) == {"tls"}


def test_a_url_without_auth_keys_takes_the_standard_variables(tmp_path):
    env = {"NATS_USER": "alice", "NATS_PASSWORD": "pw", "NATS_TOKEN": "ignored-with-a-user"}
    _, _, auth = split_nats_url("nats://h:1", environ=env)
    assert auth.connect_kwargs(env) == {"user": "alice", "password": "pw"}
    _, _, auth = split_nats_url("nats://h:1?token_env=MINE", environ={**env, "MINE": "x"})
    assert auth.method == "token"  # a key in the URL wins over every variable


@pytest.mark.parametrize("query, said", [
    ("user=w", "user=w needs its password: add password_env=VARIABLE"),
    ("user=w&password_env=UNSET_H1", "password_env=UNSET_H1, but the variable UNSET_H1 is not set"),
    ("token_env=UNSET_H1", "token_env=UNSET_H1, but the variable UNSET_H1 is not set"),
    ("creds=/no/such.creds", "creds=/no/such.creds: no such file"),
    ("nkey=/no/such.nk", "nkey=/no/such.nk: no such file"),
    ("tls_ca=/no/ca.pem", "tls_ca=/no/ca.pem: no such file"),
    ("tls_cert=/no/c.pem", "tls_cert and tls_key go together"),
    ("password_env=X", "a password without user=NAME"),
    ("user=w&password_env=X&token_env=Y", "user and token_env/token_file are two ways to authenticate"),
    ("token_env=", "token_env= is empty"),
    ("inbox=_INBOX.>", "inbox=_INBOX.> is no inbox prefix: give subject tokens"),
    ("inbox=a..b", "inbox=a..b is no inbox prefix"),
    ("inbox=my inbox", "inbox=my inbox is no inbox prefix"),
])
def test_a_bad_auth_key_is_a_usage_error_naming_the_key_and_the_fix(query, said):
    with pytest.raises(QueueAddressError) as raised:
        QueueAddress.parse(f"nats://127.0.0.1:4222?{query}")
    assert said in str(raised.value)
    assert str(raised.value).startswith("--agentgym-queue=nats://127.0.0.1:4222?")


def test_a_secret_in_the_url_is_refused_without_being_repeated():
    for url in ("nats://worker:hunter2@127.0.0.1:4222", "nats://s3cr3t-token@127.0.0.1:4222"):
        with pytest.raises(QueueAddressError) as raised:
            QueueAddress.parse(url, where="--nats")
        said = str(raised.value)
        assert "no user or secret in the URL" in said and "password_env=VARIABLE" in said
        assert "hunter2" not in said and "s3cr3t" not in said and "--nats=nats://***@127.0.0.1:4222" in said


def test_the_events_url_takes_the_same_keys_and_no_others():
    assert parse_nats("tls://127.0.0.1:4222") == "tls://127.0.0.1:4222"
    with pytest.raises(NatsOptionsError, match="unknown key.s. name; known: creds, nkey, user"):
        nats_server("nats://127.0.0.1:4222?name=q", where="--agentgym-nats")
    with pytest.raises(NatsOptionsError, match="token_env=UNSET_H1, but the variable UNSET_H1 is not set"):
        parse_nats("nats://127.0.0.1:4222?token_env=UNSET_H1")


def test_the_queue_says_how_it_signs_in_without_the_secret(monkeypatch):
    monkeypatch.setenv("WPASS", "hunter2")
    address = QueueAddress.parse("tls://127.0.0.1:4222?user=w&password_env=WPASS&name=lab")
    assert address.describe() == ("queue lab at tls://127.0.0.1:4222 (AckWait 60 s, MaxDeliver 5, "
                                  "user w (password from $WPASS), TLS)")
    assert QueueAddress.parse("nats://127.0.0.1:4222").describe().endswith("MaxDeliver 5)")


def test_each_door_has_its_own_inbox_prefix_unless_the_url_names_one():
    auth = QueueAddress.parse("nats://127.0.0.1:4222?name=lab").auth
    assert auth.connect_kwargs({}) == {}  # no door: nats-py's _INBOX
    for door in ("coordinator", "worker", "fleet"):
        assert auth.connect_kwargs({}, door=door) == {"inbox_prefix": f"_INBOX_agentgym_{door}"}
    named = QueueAddress.parse("nats://127.0.0.1:4222?name=lab&inbox=_INBOX_lab_worker").auth
    assert named.connect_kwargs({}, door="worker") == {"inbox_prefix": "_INBOX_lab_worker"}
    # the event publisher's URL (nats_server): its own door, events
    assert nats_server("nats://127.0.0.1:4222")[1].connect_kwargs({}) == {"inbox_prefix": "_INBOX_agentgym_events"}
    assert nats_server("nats://127.0.0.1:4222?inbox=ev.in")[1].connect_kwargs({}) == {"inbox_prefix": "ev.in"}

"""The cap and the error texts every embedded server shares (servers/embedded/limits.py),
in-process: which environment a full table closes, when it refuses, what it remembers,
and what an unexpected exception becomes. The servers themselves, as real processes:
tests/servers/test_embedded_caps.py."""

from __future__ import annotations

import pytest

from pytest_agentgym.servers.embedded.limits import (
    REMEMBERED_CLOSURES,
    CapReached,
    CappedEnvs,
    cap_from_env,
    explain,
)


def table(cap: int = 3, **kwargs) -> CappedEnvs[str]:
    envs: CappedEnvs[str] = CappedEnvs("the Test server", cap, "AGENTGYM_TEST_MAX_ENVS", **kwargs)
    for env_id in range(cap):
        envs.make_room()
        envs.add(env_id, f"state {env_id}")
    return envs


def test_a_full_table_closes_the_least_recently_used_env_not_the_oldest():
    envs = table()
    assert envs.get(0) == "state 0"  # 0 was used: 1 is now the least recently used
    assert envs.make_room() == [(1, "state 1")]
    envs.add(3, "state 3")
    assert list(envs) == [2, 0, 3] and len(envs) == 3 and envs.closed_count == 1
    assert envs.peek(2) == "state 2" and list(envs) == [2, 0, 3]  # peek does not touch


def test_a_busy_env_is_passed_over_and_when_all_are_busy_the_create_is_refused():
    envs = table()
    assert envs.make_room(busy=lambda state: state != "state 2") == [(2, "state 2")]
    envs.add(3, "state 3")
    with pytest.raises(CapReached, match=r"the Test server has 3 open environments, its cap "
                                         r"\(AGENTGYM_TEST_MAX_ENVS=3\), and every one is in use"):
        envs.make_room(busy=lambda state: True)
    assert len(envs) == 3


def test_a_refusing_table_closes_nothing():
    envs = table(refuse=True)
    with pytest.raises(CapReached, match=r"already has 3 open environments, its cap "
                                         r"\(AGENTGYM_TEST_MAX_ENVS=3\): close one with POST /close"):
        envs.make_room()
    assert list(envs) == [0, 1, 2] and envs.closed_count == 0
    assert envs.pop(1) == "state 1"
    assert envs.make_room() == []


def test_an_id_closed_for_the_cap_says_so_and_a_closed_or_unknown_one_keeps_the_originals_text():
    envs = table(cap=1)
    envs.make_room()
    envs.add(1, "state 1")
    assert envs.unknown(0) == (
        "The id 0 is not valid: environment 0 was closed to stay within the cap of 1 open "
        "environments: it was the least recently used when another was created "
        "(AGENTGYM_TEST_MAX_ENVS sets the cap). Create a new one with POST /create.")
    envs.pop(1)  # closed by its client
    assert envs.unknown(1) == "The id 1 is not valid."
    assert envs.unknown(42) == "The id 42 is not valid."


def test_what_is_remembered_of_closed_ids_is_bounded_too():
    envs = table(cap=1)
    for env_id in range(1, REMEMBERED_CLOSURES + 10):
        envs.make_room()
        envs.add(env_id, "x")
    assert envs.closed_count == REMEMBERED_CLOSURES + 9
    assert not envs.was_closed_for_cap(0) and envs.was_closed_for_cap(REMEMBERED_CLOSURES + 8)
    assert len(envs._closed_for_cap) == REMEMBERED_CLOSURES


@pytest.mark.parametrize(("exc", "expected"), [
    (KeyError(0), "resetting environment 3 failed: KeyError: no entry 0"),
    (KeyError("observation"), "resetting environment 3 failed: KeyError: no entry 'observation'"),
    (AssertionError(), "resetting environment 3 failed: AssertionError (the exception carried no message)"),
    (ValueError("  "), "resetting environment 3 failed: ValueError (the exception carried no message)"),
    (IndexError("list index out of range"), "resetting environment 3 failed: IndexError: list index out of range"),
])
def test_an_unexpected_exception_is_answered_with_its_type_and_key(exc, expected):
    assert explain(exc, "resetting environment 3") == expected


@pytest.mark.parametrize("raw", ["0", "-1", "lots", "2.5"])
def test_a_bad_cap_is_refused_naming_the_variable(raw):
    with pytest.raises(SystemExit, match=rf"AGENTGYM_X_MAX_ENVS='{raw}': expected a whole number of "
                                         r"environments, 1 or more \(.*default 7\)"):
        cap_from_env("AGENTGYM_X_MAX_ENVS", 7, {"AGENTGYM_X_MAX_ENVS": raw})


def test_an_unset_or_empty_cap_is_the_default():
    assert cap_from_env("AGENTGYM_X_MAX_ENVS", 7, {}) == 7
    assert cap_from_env("AGENTGYM_X_MAX_ENVS", 7, {"AGENTGYM_X_MAX_ENVS": " "}) == 7
    assert cap_from_env("AGENTGYM_X_MAX_ENVS", 7, {"AGENTGYM_X_MAX_ENVS": "12"}) == 12

"""Mutation-pass tests for results/redact.py's token-looking path segments (benchmarks/gates/
mutations_resume.py): a token is a run of 16 or more letters and digits holding at least two
of each; the boundaries, on both sides."""

from __future__ import annotations

import pytest

from pytest_agentgym.results.redact import redact_url


@pytest.mark.parametrize("segment", [
    "Ab3dEfGh5jKlMnPq",  # 16, two digits
    "ab12345678901234",  # 16, two letters
    "x9" * 12,  # long
])
def test_a_run_of_16_with_two_digits_and_two_letters_is_a_token(segment):
    assert redact_url(f"https://h.example/v1/{segment}/send") == "https://h.example/v1/***/send"


@pytest.mark.parametrize("segment", [
    "Ab3dEfGh5jKlMnP",  # 15: too short
    "mistralinstructv2chat",  # one digit
    "1234567890123456789x",  # one letter: an id
    "Ab3dEfGh-5jKlMnPq",  # a mark ends a run: 8 and 8
])
def test_shorter_runs_and_runs_short_of_two_digits_or_two_letters_are_kept(segment):
    url = f"https://h.example/v1/{segment}/send"
    assert redact_url(url) == url

"""pair_env builds every key's Flip, the units, the matched and errored keys and the
baseline's variance in one pass over the keys (issue 40: a comparison of two 100,000-episode
runs). Here each of these is worked out again from its definition in pairing.py, key by key
(``state``, ``Flip``'s properties, ``one_sided_error``, ``baseline_variance`` on the
baseline's records), for generated runs: keys missing from either run, errors and
non-finite rewards, repeats, a key recorded twice (the later record counts), records in any
order, both metrics, with and without values for the one-sided errors."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentgym.compare.pairing import EnvPairs, Flip, baseline_variance, one_sided_error, pair_env, state
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

KINDS = ("pass", "fail", "error", "nan", "missing")
ENVS = ("Maze", "Wordle")


def _record(run_id: str, env: str, task: int, repeat: int, kind: str, reward: float) -> EpisodeRecord:
    facts = dict(run_id=run_id, env=env, task_index=task, repeat=repeat, started_at="2026-01-01T00:00:00Z",
                 model="m")
    if kind == "error":
        return EpisodeRecord.errored(error=ErrorInfo("ConnectError", "generated", "env"), **facts)
    return EpisodeRecord(reward=math.nan if kind == "nan" else reward, success=kind == "pass", rounds=1,
                         stop_reason="done", duration_s=0.0, **facts)


cells = st.tuples(st.sampled_from(ENVS), st.integers(0, 5), st.integers(1, 3), st.sampled_from(KINDS),
                  st.sampled_from((0.0, 0.25, 1.0)))
runs = st.lists(cells, max_size=40)


def _expected(env: str, base: list[EpisodeRecord], cand: list[EpisodeRecord], metric: str,
              errors_as: tuple[float, float] | None) -> EnvPairs:
    """The paired view from the definitions, key by key."""
    last_base = {(r.task_index, r.repeat): r for r in base if r.env == env}
    last_cand = {(r.task_index, r.repeat): r for r in cand if r.env == env}
    flips = tuple(Flip(t, k, state(last_base.get((t, k))), state(last_cand.get((t, k))),
                       last_base[t, k].reward if (t, k) in last_base else None,
                       last_cand[t, k].reward if (t, k) in last_cand else None)
                  for t, k in sorted(set(last_base) | set(last_cand)))

    def value(side: str, reward: float | None, error_value: float) -> float:
        if side == "error":
            return error_value
        return (1.0 if side == "pass" else 0.0) if metric == "success" else float(reward)  # type: ignore[arg-type]

    units: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    for f in flips:
        if f.matched or (errors_as is not None and one_sided_error(f)):
            b, c = units.get(f.task_index, ((), ()))
            low_cand, low_base = errors_as or (math.nan, math.nan)
            units[f.task_index] = (b + (value(f.base, f.base_reward, low_base),),
                                   c + (value(f.cand, f.cand_reward, low_cand),))
    return EnvPairs(env=env, metric=metric, flips=flips, units=units,
                    baseline_variance=baseline_variance(list(last_base.values()), metric))


@settings(max_examples=300, deadline=None)
@given(base_cells=runs, cand_cells=runs, metric=st.sampled_from(("success", "reward")),
       errors=st.sampled_from(("none", "errors_as", "against_candidate")))
def test_one_pass_gives_what_the_definitions_give(base_cells, cand_cells, metric, errors):
    base = [_record("b", *cell) for cell in base_cells if cell[3] != "missing"]
    cand = [_record("c", *cell) for cell in cand_cells if cell[3] != "missing"]
    given_values = {"none": None, "errors_as": (0.0, 0.25), "against_candidate": (0.0, 1.0)}[errors]
    for env in ENVS:
        keyword = {} if given_values is None else {errors: given_values}
        got = pair_env(env, base, cand, metric, **keyword)
        want = _expected(env, base, cand, metric, given_values)
        assert got == want  # env, metric, every Flip, the units in task order, the variance
        assert list(got.units) == list(want.units)
        if got.baseline_variance is not None:  # the same float, not only an equal one (nan aside)
            assert math.isclose(got.baseline_variance, want.baseline_variance, rel_tol=0, abs_tol=0)
        assert got.matched == [f for f in want.flips if f.matched]
        assert got.errored == [f for f in want.flips if f.errored]
        assert all(type(f) is Flip and hash(f) == hash(w) for f, w in zip(got.flips, want.flips))
        got.errored.clear()  # a new list each time: clearing one leaves the pairs as they were
        assert got.errored == [f for f in want.flips if f.errored]

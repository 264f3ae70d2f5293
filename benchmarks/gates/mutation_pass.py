"""A small mutation pass over the code that decides what a run counts and concludes
(ledger, records, reading, merge, compare, gates, the partial-run rule, the step-down
across environments, errors in comparisons, stopping when decided; issue 39's list over
results/, run/, compare/ and queue/ is in benchmarks/gates/mutations.py, its second round
(h4's findings, path secrets, the resume that never narrows) in mutations_resume.py, the
queue's result checks in mutations_acceptance.py).

Each mutation is one textual change to one source file; for each, the named tests
are run against the mutated tree and the mutation is *killed* when they fail. The
source file is restored afterwards, whatever happens. Prints one line per mutation,
then killed/total and the time, and exits 1 when any survives (or no longer applies).

    python benchmarks/gates/mutation_pass.py [--only NAME] [--list] [--check]

Run it on a clean working tree of its own (it edits files in place while it runs: a
git worktree, not the tree others run tests in). The tests and every process they start
import this tree's package (its root goes first on PYTHONPATH). Each mutant gets a
modification time of its own and the restored file its original one, so that no
process runs a cached bytecode of another version of the file (a mutant and the
original of the same size written within one second would share one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]  # benchmarks.*: benchmarks/README.md
PKG = ROOT / "pytest_agentgym"

from benchmarks.gates.mutations import ISSUE39, Mutation  # noqa: E402
from benchmarks.gates.mutations_acceptance import ACCEPTANCE  # noqa: E402
from benchmarks.gates.mutations_resume import FINDINGS, RESUME  # noqa: E402

MUTATIONS = (
    Mutation("newest generation -> oldest", "results/current.py",
             "if generation is None or record.generation > generation:",
             "if generation is None or record.generation < generation:",
             ("tests/results/test_ledger.py",)),
    Mutation("current_records counts a duplicate twice", "results/current.py",
             "        if key in seen:\n            found.append(Duplicate(key, record.generation))\n            continue\n",
             "",
             ("tests/results/test_ledger.py", "tests/results/test_duplicate_lines.py")),
    Mutation("the file reader keeps duplicates", "results/reading.py",
             "        if seen[0] != number:",
             "        if False:",
             ("tests/results/test_duplicate_lines.py", "tests/results/test_readers_property.py")),
    Mutation("merge accepts differing duplicates", "run/merge_checks.py",
             "differing = [d for d in run.duplicates if not d.identical]",
             "differing = []",
             ("tests/run/test_shards_merge.py",)),
    Mutation("merge takes no lock", "run/merge.py",
             "        lock = RunLock(out).acquire()",
             "        lock = RunLock(out)",
             ("tests/results/test_lock.py",)),
    Mutation("still-running refusal disabled", "results/ledger.py",
             'if info.status == "running" and process_alive(info.process):',
             "if False:",
             ("tests/results/test_ledger.py",)),
    Mutation("crashed settled when alive is unknown", "results/ledger.py",
             'if info.status == "running" and process_alive(info.process) is False:',
             'if info.status == "running" and not process_alive(info.process):',
             ("tests/results/test_ledger.py",)),
    Mutation("resume keeps errored episodes", "results/ledger.py",
             "kept = {r.key: r for r in current if r.error is None}",
             "kept = {r.key: r for r in current}",
             ("tests/results/test_ledger.py", "tests/run/test_resume.py")),
    Mutation("interrupted ignored in final status", "results/ledger.py",
             "    if interrupted:\n        return \"interrupted\"",
             "    if False:\n        return \"interrupted\"",
             ("tests/run/test_partial_runs.py",)),
    Mutation("a shared lock instead of an exclusive one", "results/lock.py",
             "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)",
             "fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)",
             ("tests/results/test_lock.py",)),
    Mutation("the lock is taken after the taken check", "results/ledger.py",
             "        lock = _lock(run_dir, run_id_flag)\n        if run_dir.run_file.is_file() or run_dir.episodes_file.is_file():",
             "        taken = run_dir.run_file.is_file() or run_dir.episodes_file.is_file()\n"
             "        lock = _lock(run_dir, run_id_flag)\n        if taken:",
             ("tests/results/test_mutants_lock.py::"
              "test_a_run_written_while_a_new_run_waits_for_the_lock_takes_its_id",)),
    Mutation("compare charges missing-vs-errored keys to the error budget", "compare/pairing.py",
             'return "missing" not in (self.base, self.cand) and "error" in (self.base, self.cand)',
             'return "error" in (self.base, self.cand)',
             ("tests/compare/test_compare.py",)),
    Mutation("compare error budget: errors equal to the budget fail", "compare/error_rule.py",
             "    if len(errored) <= allowed:\n        return None",
             "    if len(errored) < allowed:\n        return None",
             ("tests/compare/test_compare.py::test_errors_at_exactly_the_error_budget_are_within_it",)),
    Mutation("gate >= without tolerance", "results/gates.py",
             '">=": lambda v, t: v >= t - TOLERANCE,',
             '">=": lambda v, t: v >= t,',
             ("tests/results/test_verdict_rules.py",)),
    Mutation("gate error budget: errors equal to the budget fail", "results/gates.py",
             "    if summary.errors <= allowed:",
             "    if summary.errors < allowed:",
             ("tests/results/test_gate_error_budget.py",)),
    Mutation("gate error budget: a flat share again", "results/gates.py",
             "    if summary.errors <= allowed:",
             "    if summary.errors <= summary.episodes * max_error_rate:",
             ("tests/results/test_gate_error_budget.py",)),
    Mutation("a partial run is judged", "run/ending.py",
             "    if planned and played < planned:\n        return f\"run ended early after {of}\"\n    return None",
             "    return None",
             ("tests/run/test_partial_runs.py",)),
    Mutation("an interrupted run is judged", "run/ending.py",
             '    if status in ("interrupted", "crashed"):',
             '    if status in ("crashed",):',
             ("tests/run/test_partial_runs.py",)),
    Mutation("a non-finite reward is a record", "results/record_checks.py",
             "    if finite and not -MAX_NUMBER <= value <= MAX_NUMBER:  # NaN fails every comparison",
             "    if finite and abs(value) > MAX_NUMBER:",
             ("tests/results/test_lines_that_are_no_records.py", "tests/results/test_readers_property.py")),
    # issue 23: the step-down across environments, errors that could hide a drop, stopping when decided
    Mutation("the step-down charges every test as continuous (plain Holm)", "compare/statistics.py",
             "    if support is None:\n        return min(t, 1.0)\n",
             "    if True:\n        return min(t, 1.0)\n",
             ("tests/compare/test_compare_families.py",)),
    Mutation("errors that cannot change the verdict still change it", "compare/error_rule.py",
             "rank(against.verdict) > rank(recorded.verdict)",
             "rank(against.verdict) >= rank(recorded.verdict)",
             ("tests/compare/test_compare_families.py", "tests/compare/test_compare.py")),
    Mutation("errors that leave a verdict open make an error", "compare/error_rule.py",
             'verdict, decisive, why = "inconclusive", against, ERRORS_OPEN',
             'verdict, decisive, why = "error", against, ERRORS_OPEN',
             ("tests/compare/test_errors_rule.py::test_errors_in_both_runs_are_scored_as_failures_before_they_decide",)),
    Mutation("errors left out, never judged as played", "compare/judgement.py",
             "    if not hiding:\n        return environments\n",
             "    if True:\n        return environments\n",
             ("tests/compare/test_errors_rule.py::test_a_drop_recorded_as_errors_is_judged_as_played",)),
    Mutation("baseline errors scored as its best in the decision", "compare/judgement.py",
             'errors_as=(low, low if scored == "failures" else high)',
             "errors_as=(low, high)",
             ("tests/compare/test_errors_rule.py::test_errors_in_both_runs_are_scored_as_failures_before_they_decide",)),
    Mutation("an environment with nothing scored in both runs is judged", "compare/error_rule.py",
             "    if errored and not pairs.matched:\n",
             "    if False:\n",
             ("tests/compare/test_errors_nothing_scored.py",)),
    Mutation("a look at the last task", "compare/sequential.py",
             "return tuple(sorted(p for p in points if 0 < p < planned_tasks))",
             "return tuple(sorted(p for p in points if 0 < p <= planned_tasks))",
             ("tests/compare/test_sequential.py",)),
    Mutation("an interim regression within the margin", "compare/sequential.py",
             "and recorded.delta < -plan.margin - TOLERANCE):",
             "and recorded.delta < -plan.margin + TOLERANCE):",
             ("tests/compare/test_sequential.py",)),
    Mutation("an interim look at the full alpha", "compare/sequential.py",
             "        return self.alpha / max(1, self.n_envs)",
             "        return self.alpha",
             ("tests/compare/test_sequential.py",)),
    Mutation("a stopped environment counts as a partial run", "run/judging.py",
             "    expected = planned_keys - set(unplayed.values())",
             "    expected = set(planned_keys)",
             ("tests/run/test_stop_when_decided.py",)),
) + ISSUE39 + FINDINGS + RESUME + ACCEPTANCE


def run_tests(tests: tuple[str, ...]) -> tuple[bool, float]:
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    return proc.returncode == 0, time.monotonic() - started


def apply(mutation: Mutation) -> tuple[Path, str, os.stat_result] | str:
    """Write the mutant; returns what restores the file, or why the mutation no longer applies."""
    path = PKG / mutation.path
    original = path.read_text()
    found = original.count(mutation.old)
    if found != 1:
        return f"{mutation.path} holds the text to mutate {found} times, not once"
    stat = path.stat()
    path.write_text(original.replace(mutation.old, mutation.new, 1))
    # a modification time of the mutant's own (bytecode caches are keyed by whole seconds and size)
    stamp = stat.st_mtime_ns + (1 + zlib.crc32(mutation.new.encode()) % 1_000_000) * 1_000_000_000
    os.utime(path, ns=(stamp, stamp))
    return path, original, stat


def _missing_tests(mutation: Mutation) -> str:
    """The test files of ``mutation`` that do not exist (pytest would fail on one, and the mutant read as killed)."""
    return ", ".join(t for t in mutation.tests if not (ROOT / t.split("::")[0]).exists())


def _stale(mutation: Mutation) -> str | None:
    """Why ``mutation`` cannot run on this tree (its text does not occur once, a test is gone), or None."""
    missing = _missing_tests(mutation)
    if missing:
        return f"{missing} does not exist"
    path = PKG / mutation.path
    found = path.read_text().count(mutation.old) if path.is_file() else 0
    return None if found == 1 else f"{mutation.path} holds the text to mutate {found} times, not once"


def restore(path: Path, original: str, stat: os.stat_result) -> None:
    path.write_text(original)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="run the mutations whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests, run nothing")
    parser.add_argument("--check", action="store_true",
                        help="list the mutations whose text no longer occurs once or whose test is gone, run "
                             "nothing (exit 1 when any)")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or args.only in m.name]
    if args.list:
        for mutation in chosen:
            print(f"{mutation.name}  ({mutation.path}; {' '.join(mutation.tests)})")
        return 0
    if args.check:
        stale = [f"{m.name}: {why}" for m in chosen if (why := _stale(m))]
        print("\n".join(stale + [f"{len(stale)} of {len(chosen)} no longer apply"]))
        return 1 if stale else 0
    survived = killed = 0
    started = time.monotonic()
    for mutation in chosen:
        missing = _missing_tests(mutation)
        if missing:
            print(f"NO TEST      {mutation.name}: {missing} does not exist", flush=True)
            survived += 1
            continue
        applied = apply(mutation)
        if isinstance(applied, str):
            print(f"NOT APPLIED  {mutation.name}: {applied}", flush=True)
            survived += 1
            continue
        try:
            passed, seconds = run_tests(mutation.tests)
        finally:
            restore(*applied)
        verdict = "SURVIVED" if passed else "killed  "
        survived += passed
        killed += not passed
        print(f"{verdict}  {mutation.name}  ({mutation.path}; {' '.join(mutation.tests)}; {seconds:.0f} s)",
              flush=True)
    print(f"{killed}/{len(chosen)} killed, {survived} survived, not applied or without a test, "
          f"{time.monotonic() - started:.0f} s", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())

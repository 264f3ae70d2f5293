"""A small mutation pass over the code that decides what a run counts and concludes
(ledger, records, reading, merge, compare, gates, the partial-run rule, the step-down
across environments, errors in comparisons, stopping when decided).

Each mutation is one textual change to one source file; for each, the named tests
are run against the mutated tree and the mutation is *killed* when they fail. The
source file is restored afterwards, whatever happens. Prints one line per mutation
and exits 1 when any survives.

    python benchmarks/gates/mutation_pass.py [--only NAME]

Run it on a clean working tree (it edits files in place while it runs).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "pytest_agentgym"


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation("newest generation -> oldest", "results/records.py",
             "if generation is None or record.generation > generation:",
             "if generation is None or record.generation < generation:",
             ("tests/results/test_ledger.py",)),
    Mutation("current_records counts a duplicate twice", "results/records.py",
             "        if key in seen:\n            found.append(Duplicate(key, record.generation))\n            continue\n",
             "",
             ("tests/results/test_ledger.py", "tests/results/test_duplicate_lines.py")),
    Mutation("the file reader keeps duplicates", "results/reading.py",
             "        if seen[0] != number:",
             "        if False:",
             ("tests/results/test_duplicate_lines.py", "tests/results/test_readers_property.py")),
    Mutation("merge accepts differing duplicates", "run/merge.py",
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
             "        lock = _lock(run_dir)\n        if run_dir.run_file.is_file() or run_dir.episodes_file.is_file():",
             "        if run_dir.run_file.is_file() or run_dir.episodes_file.is_file():",
             ("tests/results/test_lock.py",)),
    Mutation("compare charges missing-vs-errored keys to the error budget", "compare/pairing.py",
             'return "missing" not in (self.base, self.cand) and "error" in (self.base, self.cand)',
             'return "error" in (self.base, self.cand)',
             ("tests/compare/test_compare.py",)),
    Mutation("compare error budget: rate equal to the budget fails", "compare/judgement.py",
             "if rate > max_error_rate + TOLERANCE:",
             "if rate >= max_error_rate - TOLERANCE:",
             ("tests/compare/test_compare.py",)),
    Mutation("gate >= without tolerance", "results/gates.py",
             '">=": lambda v, t: v >= t - TOLERANCE,',
             '">=": lambda v, t: v >= t,',
             ("tests/results/test_verdict_rules.py",)),
    Mutation("gate error budget: rate equal to the budget fails", "results/gates.py",
             "if rate <= max_error_rate + TOLERANCE:",
             "if rate < max_error_rate:",
             ("tests/results/test_verdict_rules.py",)),
    Mutation("a partial run is judged", "run/ending.py",
             "    if planned and played < planned:\n        return f\"run ended early after {of}\"\n    return None",
             "    return None",
             ("tests/run/test_partial_runs.py",)),
    Mutation("an interrupted run is judged", "run/ending.py",
             '    if status in ("interrupted", "crashed"):',
             '    if status in ("crashed",):',
             ("tests/run/test_partial_runs.py",)),
    Mutation("a non-finite reward is a record", "results/records.py",
             "math.isfinite(",
             "(lambda value: True)(",
             ("tests/results/test_lines_that_are_no_records.py", "tests/results/test_readers_property.py")),
    # issue 23: the step-down across environments, errors that could hide a drop, stopping when decided
    Mutation("the step-down charges every test as continuous (plain Holm)", "compare/statistics.py",
             "    if support is None:\n        return min(t, 1.0)\n",
             "    if True:\n        return min(t, 1.0)\n",
             ("tests/compare/test_compare_families.py",)),
    Mutation("errors that cannot change the verdict still change it", "compare/judgement.py",
             "if VERDICTS.index(against.verdict) <= VERDICTS.index(recorded.verdict):",
             "if VERDICTS.index(against.verdict) < VERDICTS.index(recorded.verdict):",
             ("tests/compare/test_compare_families.py", "tests/compare/test_compare.py")),
    Mutation("errors that leave a verdict open make an error", "compare/judgement.py",
             'verdict = "error" if against.verdict == "regressed" else "inconclusive"',
             'verdict = "error"',
             ("tests/compare/test_compare_families.py",)),
    Mutation("errors left out, never counted against the candidate", "compare/judgement.py",
             "    if hiding:\n",
             "    if False:\n",
             ("tests/compare/test_compare_families.py",)),
    Mutation("a look at the last task", "compare/sequential.py",
             "return tuple(sorted(p for p in points if 0 < p < planned_tasks))",
             "return tuple(sorted(p for p in points if 0 < p <= planned_tasks))",
             ("tests/compare/test_sequential.py",)),
    Mutation("an interim regression within the margin", "compare/sequential.py",
             "and recorded.delta < -plan.margin - TOLERANCE):",
             "and recorded.delta < -plan.margin + TOLERANCE):",
             ("tests/compare/test_sequential.py",)),
    Mutation("an interim look at the full alpha", "compare/sequential.py",
             "        return self.alpha * self.share / max(1, self.n_envs)",
             "        return self.alpha",
             ("tests/compare/test_sequential.py",)),
    Mutation("a stopped environment counts as a partial run", "run/judging.py",
             "    expected = planned_keys - set(unplayed.values())",
             "    expected = set(planned_keys)",
             ("tests/run/test_stop_when_decided.py",)),
)


def run_tests(tests: tuple[str, ...]) -> tuple[bool, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, capture_output=True, text=True)
    return proc.returncode == 0, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="run the mutations whose name contains this")
    args = parser.parse_args()
    survived = 0
    for mutation in MUTATIONS:
        if args.only and args.only not in mutation.name:
            continue
        path = PKG / mutation.path
        original = path.read_text()
        if original.count(mutation.old) < 1:
            print(f"NOT APPLIED  {mutation.name}: {mutation.path} no longer holds the text to mutate")
            survived += 1
            continue
        try:
            path.write_text(original.replace(mutation.old, mutation.new, 1))
            passed, seconds = run_tests(mutation.tests)
        finally:
            path.write_text(original)
        verdict = "SURVIVED" if passed else "killed  "
        survived += passed
        print(f"{verdict}  {mutation.name}  ({mutation.path}; {' '.join(mutation.tests)}; {seconds:.0f} s)",
              flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())

"""Paired, three-way comparison of a candidate run with a baseline run.

    from pytest_agentgym.compare import compare_runs
    comparison = compare_runs("reports/step-1000", "reports/step-1200", margin=0.05)
    print("\n".join(comparison.lines())); sys.exit(comparison.exit_code())

Per environment the episodes are paired by (task, repeat), tested for a drop
(exact McNemar, or an exact sign-flip test over tasks), Holm-adjusted across
environments, and judged ``ok``, ``regressed``, ``inconclusive`` or ``error``;
see docs/compare.md. No pytest and no scipy here (numpy is imported only when a
sign-flip test runs). :func:`settings_differences` is the settings check on its own, for a run
that is about to start.
"""

from pytest_agentgym.compare.comparison import VERDICTS, Comparison, EnvComparison
from pytest_agentgym.compare.error import CompareError
from pytest_agentgym.compare.judgement import compare_runs
from pytest_agentgym.compare.pairing import METRICS, Flip
from pytest_agentgym.compare.settings_check import settings_differences

__all__ = ["METRICS", "VERDICTS", "Comparison", "CompareError", "EnvComparison", "Flip", "compare_runs",
           "settings_differences"]

"""Suite files become pytest items: one per (environment, task index, repeat).

The suite itself is read by config/suites.py (pytest-free); here are the pytest
nodes (:class:`SuiteFile`, :class:`EpisodeItem`) and what an item says when its
episode errs, fails or is unsolved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_agentgym.config.suites import Suite, SuiteError, episodes, item_name, load_suite, marker_name
from pytest_agentgym.envs.spec import is_verifiers
from pytest_agentgym.plugin.lastfailed import mark_if_gate_failed


class EpisodeInfraError(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """The environment, the model or the harness failed: reported as a pytest error,
    in its own few lines (pytrace=False: pytest formats no traceback for it, which for
    hundreds of errored items used to cost more than the run)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, pytrace=False)


class RewardBelowThreshold(AssertionError):
    """The episode's reward is below the suite's min_reward: a policy failure."""


def collect_suite(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    """The collector of ``file_path`` when it is a suite: in a place the user named for
    suites (plugin/dormancy.py's :func:`suite_places`), or by what it holds (config/suite_files.py).
    A file reached a second time (``pytest .`` in a checkout whose ``suites`` links to the
    package's) is collected once, where it was first reached."""
    from pytest_agentgym.config.suite_files import is_suite_file
    from pytest_agentgym.plugin.stash import SUITE_FILES_KEY
    from pytest_agentgym.plugin.suite_places import suite_places

    if not is_suite_file(file_path, suite_places(parent.config)):
        return None
    first = parent.config.stash.setdefault(SUITE_FILES_KEY, {}).setdefault(file_path.resolve(), file_path)
    if first != file_path:  # the same file by another path; pytest may collect one path twice itself
        return None
    return SuiteFile.from_parent(parent, path=file_path)


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from pytest_agentgym.plugin.stash import NODE_SKIPPED_KEY, SETTINGS_KEY, SUITE_ERRORS_KEY

        settings = self.config.stash[SETTINGS_KEY]
        try:
            suite = load_suite(self.path, settings.node, list(settings.env_specs), settings.env_specs)
        except SuiteError as exc:
            self.config.stash[SUITE_ERRORS_KEY].append(str(exc))
            return
        if is_verifiers(suite.environment) and settings.queue is not None:
            self.config.stash[SUITE_ERRORS_KEY].append(
                f"{self.path}: {suite.environment} runs in this process; --agentgym-queue's workers cannot "
                f"play it: run this suite without --agentgym-queue")
            return
        if settings.envs and suite.environment.lower() not in {e.lower() for e in settings.envs}:
            return
        pairs = list(episodes(suite, settings.tasks, settings.repeat))
        if suite.environment in settings.skip_envs:
            # Not collected: the node cannot serve it (see the collection report line).
            skipped = self.config.stash[NODE_SKIPPED_KEY]
            skipped[suite.environment] = skipped.get(suite.environment, 0) + len(pairs)
            return
        for task, repeat in pairs:
            name = item_name(suite.environment, task, repeat)
            item = EpisodeItem.from_parent(
                # The id is given as a string so that pytest parses "Env[17]" the way it
                # parses the ids it stores (name "Env", params "17"); --lf depends on it.
                self, name=name, nodeid=f"{self.nodeid}::{name}",
                suite=suite, task_index=task, repeat=repeat,
            )
            item.add_marker(pytest.mark.agentgym)
            item.add_marker(getattr(pytest.mark, marker_name(suite.environment)))
            mark_if_gate_failed(item, suite.environment)  # --lf after a gate failure
            yield item


class EpisodeItem(pytest.Item):
    """One episode. ``setup`` waits for its result (the engine may have run it
    already, or a resumed run kept it); an infrastructure error is raised there,
    so pytest reports an error, not a failure. ``runtest`` gives the verdict:
    below ``min_reward`` fails, an episode that did not succeed and has no
    ``min_reward`` is UNSOLVED (reported like an xfail: never green, never a failure)."""

    def __init__(self, *, suite: Suite, task_index: int, repeat: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.task_index = task_index
        self.repeat = repeat
        self.record = None
        self.kept = False

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.suite.environment, self.task_index, self.repeat)

    def setup(self) -> None:
        from pytest_agentgym.results.records import outcome_of
        from pytest_agentgym.run.evaluation import RunAborted
        from pytest_agentgym.plugin.stash import RUN_KEY

        run = self.config.stash[RUN_KEY]
        stopped = run.stopped_reason(self)
        if stopped is not None:  # its environment was decided before this episode began
            pytest.skip(stopped)
        try:
            record = run.result(self)
        except RunAborted as exc:
            pytest.exit(f"agentgym: run stopped: {exc}", returncode=pytest.ExitCode.INTERRUPTED)
        self.kept = record.generation < run.ledger.generation
        if self.kept:  # judged by today's suite (its min_reward may have changed)
            record = dataclasses.replace(record, min_reward=self.suite.min_reward, outcome=outcome_of(
                record.error, record.reward, self.suite.min_reward, record.success))
        self.record = record
        self.user_properties.append(("reward", record.reward))
        self.user_properties.append(("success", record.success))
        self.user_properties.append(("rounds", record.rounds))
        self.user_properties.append(("outcome", record.outcome))
        self.user_properties.append(("duration_s", record.duration_s))
        if record.error is not None:
            why = run.blocked().get(self.suite.environment)
            if why is not None and record.error == why:  # said once above the items, not per item
                pytest.skip(f"not played: {not_played_reason(self.suite.environment, why)} (see "
                            f"'agentgym: NOT PLAYED' above)")
            raise EpisodeInfraError(infra_message(record, run.run_dir.logs))

    def runtest(self) -> None:
        record = self.record
        if record.outcome == "failed":
            raise RewardBelowThreshold(failure_message(record))
        if record.outcome == "unsolved":
            pytest.xfail(unsolved_message(record, self.config))

    def repr_failure(self, excinfo, style=None):  # type: ignore[no-untyped-def]
        if isinstance(excinfo.value, (EpisodeInfraError, RewardBelowThreshold)):
            return str(excinfo.value)
        if isinstance(excinfo.value, pytest.xfail.Exception):  # UNSOLVED: the message is all there is
            # (pytest would otherwise format a traceback, parsing this module's source
            # for every unsolved episode: most of the harness's CPU in a long run)
            return excinfo.value.msg
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):  # type: ignore[no-untyped-def]
        return self.path, None, self.name


def unsolved_message(record: Any, config: pytest.Config) -> str:
    from pytest_agentgym.plugin.stash import SETTINGS_KEY

    rule = config.stash[SETTINGS_KEY].spec(record.env).success.text
    return (f"unsolved: reward {record.reward} ({record.stop_reason} after {record.rounds} round(s)); "
            f"success rule '{rule}' not met and the suite sets no min_reward")


def not_played_reason(env: str, error: Any) -> str:
    """A few words for an episode that could not be played (the same for all of them,
    so pytest's summary counts them in one line)."""
    from pytest_agentgym.run.terminal import not_played_cause

    return f"{not_played_cause(error, [env])} ({error.type})"


def infra_message(record: Any, logs: Any) -> str:
    """A few lines for an episode that ended in an infrastructure error: where, what,
    the retries, and where the logs are (no pytest traceback: nothing in it helps)."""
    error = record.error
    lines = [f"{item_name(record.env, record.task_index, record.repeat)}: {error.where} error "
             f"{error.type}: {error.message}"]
    for number, earlier in enumerate(record.retried, 1):
        lines.append(f"  attempt {number} also failed: {earlier.where} {earlier.type}: {earlier.message[:300]}")
    lines.append(f"  logs: {logs} (harness.log has each failed attempt's traceback; the servers' and "
                 f"the model's own logs are beside it)")
    return "\n".join(lines)


def failure_message(record: Any, last: int = 3) -> str:
    """Reward, threshold, how the episode ended, and its last turns."""
    lines = [
        f"{item_name(record.env, record.task_index, record.repeat)}: reward {record.reward} < min_reward "
        f"{record.min_reward} ({record.stop_reason} after {record.rounds} round(s))",
        f"last {min(last, len(record.turns))} turn(s):",
    ]
    for turn in record.turns[-last:]:
        reply = " ".join(turn.reply.split())
        feedback = " ".join(turn.feedback.split())
        lines.append(f"  [{turn.index}] reply: {reply[:160]}")
        lines.append(f"       action: {turn.action!r} -> {feedback[:160]} (reward {turn.reward})")
    return "\n".join(lines)

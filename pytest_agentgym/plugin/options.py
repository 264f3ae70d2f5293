"""The plugin's options as pytest sees them: registered in one group, read in one
order (command line, ``AGENTGYM_*`` environment variable unless empty, ini key), and resolved
into the run's :class:`~pytest_agentgym.config.settings.Settings` once, with
every configuration error turned into a ``pytest.UsageError``.

The rows themselves (flag, ini key, variable, parse function) are
config/options.py's, which knows nothing of pytest.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentgym.config.options import BY_NAME, OPTIONS, Option
from pytest_agentgym.process import variables

if TYPE_CHECKING:  # resolved only in a session that evaluates (plugin/dormancy.py)
    from pytest_agentgym.config.settings import Settings


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentgym", "pytest-agentgym: evaluate LLM agents on AgentGym")
    for option in OPTIONS:
        if option.parse is None:
            group.addoption(option.flag, *option.aliases, action="store_true", default=None,
                            dest=option.dest, help=option.help)
            parser.addini(option.dest, f"{option.help} (bool)", type="bool", default=None)
        else:
            group.addoption(option.flag, *option.aliases, metavar=option.metavar, default=None,
                            action="append" if option.repeatable else "store",
                            dest=option.dest, help=f"{option.help} (default: {option.default_text})")
            parser.addini(option.dest, f"{option.help} (default: {option.default_text})", default=None)


#: Flags that people type from the habits of other tools, and what this plugin calls them.
HABITUAL_FLAGS = {
    "--dry-run": "--agentgym-dry-run (the preflight check)",
    "--dryrun": "--agentgym-dry-run (the preflight check)",
    "--preflight": "--agentgym-preflight",
}


def hint_habitual_flags(parser: pytest.Parser, args: list[str]) -> str | None:
    """Add a "did you mean" line to the error pytest gives for a habitual flag in ``args``.

    pytest rejects an unknown flag ("unrecognized arguments: --dry-run") after the
    plugins are loaded; every entry of the documented ``Parser.extra_info`` is
    printed under that error as ``  KEY: VALUE``. Called from the plugin's
    ``pytest_load_initial_conftests``, which runs before that parse. Returns the hint.
    """
    for arg in args:
        if arg == "--":
            break
        meant = HABITUAL_FLAGS.get(arg.split("=", 1)[0])
        if meant is not None:
            hint = f"did you mean {meant}?"
            parser.extra_info["hint"] = hint
            return hint
    return None


def given(config: pytest.Config, option: Option) -> tuple[Any, str] | None:
    """The first value given for ``option`` and where it came from, or None. An ``AGENTGYM_*``
    variable that is empty (or blank) is not given: CI systems set an unset variable to ""."""
    value = config.getoption(option.dest, default=None)
    if value is not None:
        return value, option.flag
    from_environment = variables.value(option.env_var)
    if from_environment is not None:
        return from_environment, f"environment variable {option.env_var}"
    try:
        value = config.getini(option.dest)
    except ValueError:
        value = None
    if value not in (None, "", []):
        return value, f"ini key {option.dest}"
    return None


def _value(config: pytest.Config, name: str) -> Any:
    option = BY_NAME[name]
    found = given(config, option)
    if found is None:
        return None
    value, where = found
    if option.parse is None:  # a flag
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() in ("1", "true", "yes", "on")
    try:
        return option.parse(value)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def flag(config: pytest.Config, name: str) -> bool:
    """A flag option's value from the command line, its AGENTGYM_* variable or ini key."""
    return bool(_value(config, name))


def rerun_command(config: pytest.Config, seed: int | None) -> str:
    """The command that reruns this run, for the header and run.json. Credentials
    in URLs are shown as ``***`` (:func:`pytest_agentgym.results.redact.redact_text`)."""
    from pytest_agentgym.results.redact import redact_text

    args = [a for a in config.invocation_params.args if not a.startswith("--agentgym-run-id")]
    if seed is not None and not any(a.startswith("--agentgym-seed") for a in args):
        args.append(f"--agentgym-seed={seed}")
    return shlex.join(["pytest", *(redact_text(a) for a in args)])


def resolve_settings(config: pytest.Config) -> Settings:
    """The run's settings from ``config``'s options; a bad value is a ``pytest.UsageError``."""
    from pytest_agentgym.config.profile import ProfileError
    from pytest_agentgym.config.settings import SettingsError, resolve
    from pytest_agentgym.results.ledger import LedgerError
    from pytest_agentgym.run.checks import baseline_usable

    values = {option.name: _value(config, option.name) for option in OPTIONS}
    endpoint = given(config, BY_NAME["endpoint"])  # the header names where an endpoint's URL came from
    values["endpoint_given_by"] = endpoint[1] if endpoint else None
    try:
        settings = resolve(values, rootdir=Path(config.rootpath), command=rerun_command(config, values["seed"]),
                           add_environments=lambda specs: config.hook.pytest_agentgym_add_environments(
                               config=config, specs=specs))
        baseline_usable(settings)
        if settings.resume is not None:  # before any server or model starts
            from pytest_agentgym.run.resuming import refuse_another_model

            refuse_another_model(settings, [str(a) for a in config.args])
    except (ProfileError, SettingsError, LedgerError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return settings

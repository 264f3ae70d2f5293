"""Where a session's user said suites are: the YAML files named on the command line (the
packaged batteries among them, plugin/activation.py) and the folders of the
``agentgym_suites`` ini key. Every YAML file there is a suite, so a broken one is an
error rather than a file passed over (config/suite_files.py). Light: read in every session."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentgym.config.suite_files import SuitePlaces

#: the ini key naming the folders that hold suites
SUITES_INI = "agentgym_suites"

_PLACES_KEY = pytest.StashKey["SuitePlaces"]()


def add_suites_ini(parser: pytest.Parser) -> None:
    parser.addini(SUITES_INI, "folders whose YAML files are all suites: a broken one is an error, not a "
                  "file passed over (relative to the ini file)", type="paths", default=[])


def suite_places(config: pytest.Config) -> SuitePlaces:
    """This session's :class:`SuitePlaces` (read once)."""
    places = config.stash.get(_PLACES_KEY, None)
    if places is None:
        from pytest_agentgym.config.suite_files import SuitePlaces

        places = SuitePlaces.of([str(a) for a in config.args], config.getini(SUITES_INI),
                                config.invocation_params.dir)
        config.stash[_PLACES_KEY] = places
    return places

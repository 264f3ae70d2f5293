"""Which YAML files are suites (config/suite_files.py): by what they hold, or because they
sit where the user said suites are. A deployment config's ``environment: staging`` is not one."""

from __future__ import annotations

import pytest

from helpers import REPO
from pytest_agentgym.config.suite_files import (
    PACKAGED_SUITES,
    SuitePlaces,
    batteries,
    is_suite_file,
    known_environments,
    looks_like_suite,
    packaged_battery,
    suite_files,
)
from pytest_agentgym.envs.spec import load_specs


def test_the_known_names_are_the_shipped_environments():
    assert known_environments() == {name.lower() for name in load_specs(REPO / "configs" / "envs.yaml")}


@pytest.mark.parametrize("body, suite", [
    ("environment: staging\ndatabase: {host: db}\n", False),  # issue 41's deployment config
    ("environment: staging\n", False),
    ("environment: production\ntasks: [deploy, migrate]\nhosts: all\n", False),  # keys a suite does not have
    ("environment: {{ .Values.env }}\nreplicas: 2\n", False),  # a template, not YAML
    ("service:\n  environment: BabyAI\n", False),  # not at the top level
    ("jobs: {}\n", False),
    ("environment: BabyAI\n", True),  # a known name: a suite, even one missing its tasks
    ("environment: 'maze'\ntasks: [0, 1\n", True),  # broken YAML of a known name: a suite, so its error is said
    ("environment: Mazzze\ntasks: 0-1\n", True),  # the shape of a suite: a misspelt name is said too
    ("environment: MyEnv\ntasks: 0-9\ngates: [success_rate >= 0.5]\n", True),  # a plugin's environment
    ("environment: verifiers:my_env\nargs: {n: 3}\n", True),
])
def test_a_yaml_file_is_a_suite_by_what_it_holds(tmp_path, body, suite):
    path = tmp_path / "file.yaml"
    path.write_text(body)
    assert looks_like_suite(path) is suite
    assert is_suite_file(path) is suite


def test_every_shipped_suite_looks_like_one():
    shipped = sorted(PACKAGED_SUITES.rglob("*.yaml"))
    assert len(shipped) == 8 and all(looks_like_suite(p) for p in shipped)


def test_where_the_user_said_suites_are_every_yaml_file_is_one(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "config").mkdir()
    staging = "environment: staging\ndatabase: db\n"
    for folder in ("evals", "config"):
        (tmp_path / folder / "app.yaml").write_text(staging)
        (tmp_path / folder / "notes.txt").write_text(staging)
    places = SuitePlaces.of([], ["evals"], tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in suite_files([str(tmp_path)], places=places)] == [
        "evals/app.yaml"]
    named = str(tmp_path / "config" / "app.yaml")
    assert list(suite_files([f"{named}::X[1]"])) == [tmp_path / "config" / "app.yaml"]  # a file named: a suite
    assert not is_suite_file(tmp_path / "config" / "app.yaml", places)
    battery = SuitePlaces.of([str(PACKAGED_SUITES / "lightweight")], base=tmp_path)
    assert battery.folders == (PACKAGED_SUITES / "lightweight",)


def test_the_packaged_batteries_and_a_name_that_is_not_one():
    assert batteries() == ["lightweight", "moderate"]
    assert packaged_battery("lightweight, moderate") == (PACKAGED_SUITES / "lightweight", PACKAGED_SUITES / "moderate")
    with pytest.raises(ValueError, match="heavy: not a packaged battery; the package ships lightweight, moderate"):
        packaged_battery("lightweight,heavy")

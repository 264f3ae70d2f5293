"""`pytest-agentgym init [DIR]`: copies of the packaged suites and the CI job files, where each
CI reads them; a file there already is kept unless --force."""

from __future__ import annotations

from pytest_agentgym.cli import main
from pytest_agentgym.cli.init import SCAFFOLD
from pytest_agentgym.config.suite_files import PACKAGED_SUITES


def test_init_writes_the_packaged_suites_and_the_job_files(tmp_path, capsys):
    target = tmp_path / "project"
    assert main(["init", str(target)]) == 0
    for shipped in PACKAGED_SUITES.rglob("*.yaml"):
        copy = target / "suites" / shipped.relative_to(PACKAGED_SUITES)
        assert copy.read_bytes() == shipped.read_bytes(), copy
    assert (target / ".github" / "workflows" / "agentgym.yml").read_bytes() == (
        SCAFFOLD / "github-actions.yml").read_bytes()
    assert (target / ".gitlab-ci.yml").read_bytes() == (SCAFFOLD / "gitlab-ci.yml").read_bytes()
    out = capsys.readouterr().out
    assert f"wrote {target / 'suites' / 'lightweight' / 'babyai.yaml'}" in out
    assert f"next: pytest {target / 'suites' / 'lightweight'} --agentgym-tasks=0-4" in out


def test_init_keeps_what_is_there_unless_forced(tmp_path, capsys):
    assert main(["init", str(tmp_path)]) == 0
    edited = tmp_path / "suites" / "lightweight" / "maze.yaml"
    edited.write_text("environment: Maze\ntasks: 0-2\n")
    capsys.readouterr()
    assert main(["init", str(tmp_path)]) == 0
    assert edited.read_text() == "environment: Maze\ntasks: 0-2\n"
    assert f"kept {edited} (there already; --force overwrites it)" in capsys.readouterr().out
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert edited.read_bytes() == (PACKAGED_SUITES / "lightweight" / "maze.yaml").read_bytes()


def test_init_into_a_file_says_to_name_a_folder(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["init", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err == (f"pytest-agentgym init: {tmp_path / 'file'} is a file; name a folder "
                                       f"(it is made when missing)\n")

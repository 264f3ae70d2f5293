"""The public API of ``pytest_agentgym``: exactly these names, each resolvable, none heavy at import."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

import pytest_agentgym

PUBLIC = [
    "__version__",
    "EpisodeRecord",
    "Turn",
    "ErrorInfo",
    "RunInfo",
    "RunDir",
    "current_records",
    "hookspecs",
    "evaluate",
    "Evaluation",
]

#: What ``import pytest_agentgym`` alone must not import: pytest imports every
#: installed plugin's entry point in every project, and the first episode waits
#: for whatever start-up imported.
HEAVY = ["pytest", "httpx", "jinja2", "openai", "nats", "numpy"]


def test_all_is_pinned():
    # Adding a name is a promise to users; removing one breaks them. Either is
    # a deliberate change to this list.
    assert sorted(pytest_agentgym.__all__) == sorted(PUBLIC)
    assert len(pytest_agentgym.__all__) == len(set(pytest_agentgym.__all__))


def test_no_other_public_names():
    # Names without a leading underscore that are not in __all__ are accidents
    # (an import left at module level, a helper). A fresh interpreter: in this
    # one the plugin has run and its subpackages are attributes of the package.
    code = (
        "import json, types, pytest_agentgym as p\n"
        "print(json.dumps(sorted(n for n, v in vars(p).items()\n"
        "                        if not n.startswith('_') and not isinstance(v, types.ModuleType))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names = set(json.loads(out.stdout.strip().splitlines()[-1]))
    # the module's own machinery (``from __future__ import annotations``, typing)
    machinery = {"annotations", "TYPE_CHECKING", "Any"}
    assert names - machinery - set(PUBLIC) == set()


@pytest.mark.parametrize("name", PUBLIC)
def test_each_name_resolves(name):
    value = getattr(pytest_agentgym, name)
    assert value is not None
    assert name in dir(pytest_agentgym)


def test_names_are_the_internal_objects():
    from pytest_agentgym.plugin import hookspecs
    from pytest_agentgym.results import current, records, store

    assert pytest_agentgym.EpisodeRecord is records.EpisodeRecord
    assert pytest_agentgym.Turn is records.Turn
    assert pytest_agentgym.ErrorInfo is records.ErrorInfo
    assert pytest_agentgym.RunInfo is records.RunInfo
    assert pytest_agentgym.current_records is current.current_records
    assert pytest_agentgym.RunDir is store.RunDir
    assert pytest_agentgym.hookspecs is hookspecs
    assert isinstance(pytest_agentgym.hookspecs, types.ModuleType)
    assert hasattr(pytest_agentgym.hookspecs, "pytest_agentgym_add_environments")
    assert isinstance(pytest_agentgym.__version__, str)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        pytest_agentgym.no_such_name  # noqa: B018
    assert not hasattr(pytest_agentgym, "Engine")


def test_import_is_light():
    # A fresh interpreter: this process has imported pytest and more already.
    code = (
        "import json, sys\n"
        "import pytest_agentgym\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print(json.dumps(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"import pytest_agentgym imported heavy modules: {loaded}"


def test_reading_records_stays_light():
    # The records and the run-directory reader are what a script reading a run
    # needs: they must not pull pytest or the HTTP stack in either.
    code = (
        "import json, sys\n"
        "import pytest_agentgym\n"
        "pytest_agentgym.EpisodeRecord, pytest_agentgym.RunDir, pytest_agentgym.current_records\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print(json.dumps(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"reading records imported heavy modules: {loaded}"

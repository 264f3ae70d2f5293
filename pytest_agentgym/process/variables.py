"""Environment variables as the plugin reads them: one set to nothing but blanks is not set.

CI services often set a variable nobody gave to the empty string (a GitHub Actions
``env: {ALFWORLD_DATA: ${{ vars.ALFWORLD_DATA }}}`` with no such variable, a GitLab
variable left empty, a Kubernetes ``value: ""``). Read as set, it would be a path that is
not there, a scheduler index that is not a number, or a suite switching to data the
server then cannot find. Every variable the plugin reads for a setting goes through
:func:`value`, so a suite's ``when_set``, the server it starts and the option it reads
agree on whether the variable is there.
"""

from __future__ import annotations

import os
from typing import Mapping


def value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of ``name`` in ``environ`` (this process's environment when None), blanks
    around it stripped; None when it is unset, empty or only blanks."""
    text = (os.environ if environ is None else environ).get(name)
    if text is None or not text.strip():
        return None
    return text.strip()


def set_only(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables :func:`value` reads as unset, the others stripped."""
    return {name: text.strip() for name, text in environ.items() if text.strip()}

"""SciWorld adapter. (Stub: being written; see protocol sheet.)"""

from __future__ import annotations

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter


@register
class SciWorldAdapter(EnvAdapter):
    name = "SciWorld"
    prompt_template = "sciworld.j2"

"""The verifiers taskset ``pytest-agentgym-verifiers``: what ``vf-eval`` imports for that id.

verifiers finds a taskset by importing a top-level module named like its id and
reading ``__all__``; this module only re-exports
:mod:`pytest_agentgym.integrations.verifiers` (docs/training.md, "verifiers").
"""

from pytest_agentgym.integrations.verifiers import (  # noqa: F401 - the exports verifiers reads
    AgentGymData,
    AgentGymEnv,
    AgentGymEnvConfig,
    AgentGymTask,
    AgentGymTaskset,
    AgentGymTasksetConfig,
    ChatTurnHarness,
    load_environment,
)
from pytest_agentgym.integrations.verifiers import __all__  # noqa: F401

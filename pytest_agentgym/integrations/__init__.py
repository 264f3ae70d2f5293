"""Bridges to training stacks that reuse this project's episode loop.

* :mod:`pytest_agentgym.integrations.agentbench`: AgentBench task servers (a
  controller or one task worker) played as environments, like AgentGym's.
* :mod:`pytest_agentgym.integrations.verifiers`: ``load_environment(...)`` for
  the ``verifiers`` package (``vf-eval``, prime-rl), with the optional extra
  ``pytest-agentgym[verifiers]``.

Nothing here is imported by the plugin at start-up.
"""

"""pytest entry point (pytest11 -> pytest_agentgym.plugin). Wiring only."""

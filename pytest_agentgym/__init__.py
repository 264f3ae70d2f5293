"""pytest-agentgym: evaluate LLM agents on AgentGym environments with pytest."""

__version__ = "0.1.0"

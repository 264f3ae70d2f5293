"""AgentBench task servers as environments (docs/training.md, "AgentBench").

:mod:`.protocol` speaks AgentBench's task-server HTTP protocol (controller or
worker); :mod:`.adapters` turns its samples into episodes of the engine
(AgentBench-ALFWorld, AgentBench-WebShop).
"""

"""The queue worker, a front door: `pytest-agentgym worker` pulls episodes from a work queue
(queue/) and plays them with this machine's node profile, through the run core (run/)."""

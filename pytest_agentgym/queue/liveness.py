"""When a worker of the queue counts as alive, stale or gone: the limits alone, with no
import, so that `pytest-agentgym`'s parser can name them in `fleet --help` without
loading the queue (the rule that applies them is queue/fleet_view.py)."""

#: The worker's default ``--heartbeat``: assumed for a heartbeat that does not say its interval.
DEFAULT_INTERVAL_S = 10.0
#: A worker is stale after this many of its heartbeat intervals without one.
STALE_INTERVALS = 3.0
#: ... and gone after this many times its stale limit.
GONE_FACTOR = 3.0

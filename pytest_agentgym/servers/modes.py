"""How a node has its environment servers (``envs.servers`` in a node profile)."""

#: mode -> what a run does with an environment's server in that mode
SERVERS_MODES = {
    "auto": "attach to what answers on the configured port, spawn the rest",
    "spawn": "start every server fresh on a free port",
    "attach": "every server must already answer on its configured port",
}

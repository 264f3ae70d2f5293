"""The harness playing episodes: the plugin's cost, the episode loop, the model client, the
work queue and scale-out."""

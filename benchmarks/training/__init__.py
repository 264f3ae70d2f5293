"""Training integrations: the rollout service and the verifiers bridge."""

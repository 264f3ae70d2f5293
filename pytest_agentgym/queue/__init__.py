"""NATS JetStream work queue: the coordinator (pytest side), the worker, the wire format (docs/scale-out.md)."""

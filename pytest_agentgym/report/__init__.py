"""report (to be written)."""

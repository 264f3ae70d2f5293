"""publish (to be written)."""

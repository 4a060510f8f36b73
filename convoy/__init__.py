"""The reference convoy controller."""

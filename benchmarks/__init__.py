"""Benchmarks: each prints its figures (see README, "Benchmarks")."""

"""Benchmarks of the straggler verdict across ranks and nodes (docs/ranks.md)."""

"""The ranks benchmarks (benchmarks/README.md)."""

"""The overhead benchmarks (benchmarks/README.md)."""

"""The scale benchmarks (benchmarks/README.md)."""

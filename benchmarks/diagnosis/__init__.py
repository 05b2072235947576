"""The diagnosis benchmarks (benchmarks/README.md)."""

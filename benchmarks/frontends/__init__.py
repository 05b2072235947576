"""The frontends benchmarks (benchmarks/README.md)."""

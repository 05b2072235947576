"""The autopilot benchmarks (benchmarks/README.md)."""

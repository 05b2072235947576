"""gputop-train's benchmarks: run each from the repository root as ``python -m benchmarks.NAME``
(benchmarks/README.md lists them, what each measures and where its current figure is)."""

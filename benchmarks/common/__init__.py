"""What several benchmarks share: the repository's paths, the step times a scenario writes,
per-thread CPU accounting, and running a script under the monitor until its autopilot is done."""

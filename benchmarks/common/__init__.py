"""What several benchmarks share: the repository's paths, the step times a scenario writes,
per-thread CPU accounting, running a script under the monitor until its autopilot is done, arms
in ABBA order, CPU hogs, and the provenance a result carries."""

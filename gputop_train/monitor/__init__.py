"""The monitor's runtime: samplers on their threads, the hook client, the autopilot."""

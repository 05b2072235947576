"""Consumers that hand the figures to other tools (Prometheus)."""

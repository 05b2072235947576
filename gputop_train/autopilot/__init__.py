"""Follow the advice: try a change, measure it, keep or revert it (docs/autopilot.md)."""

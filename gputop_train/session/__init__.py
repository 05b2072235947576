"""The single model of a run, read by every front end."""

"""The advisor: pure functions from observations of the session to ranked findings."""

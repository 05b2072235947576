"""Samplers that feed the session model; no UI code lives here."""

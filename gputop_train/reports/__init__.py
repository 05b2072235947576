"""What a team does with a finished session: an HTML report, a comparison, a CI check."""

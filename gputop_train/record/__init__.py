"""Recording a session as JSONL, reading it back, and summarising it."""

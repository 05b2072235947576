"""The job across its nodes (``gputop-train job``): read from Prometheus or the nodes'
exporters, judged with the straggler verdict, drawn as a TUI, headless lines or JSON."""

"""What a source reads of the job at one moment: each rank's figures and each node's, as the
nodes' exporters serve them (docs/prometheus.md). No behaviour: the sources fill these in
(exporters.py, prometheus.py), the verdict and the front ends read them."""

from __future__ import annotations

from dataclasses import dataclass, field

# A rank series' value, by family (after the prefix; docs/prometheus.md), into RankFigures'
# field, with its scale.
RANK_FIELDS = {
    "step_seconds": ("step_ms", 1000.0),
    "data_wait_ratio": ("data_wait_pct", 100.0),
    "input_wait_seconds": ("input_ms", 1000.0),
    "comm_wait_seconds": ("comm_ms", 1000.0),
    "comm_wait_ratio": ("comm_pct", 100.0),
    "steps_total": ("steps_total", 1.0),
    "rank_connected": ("connected", 1.0),
}


@dataclass(frozen=True)
class RankFigures:
    """One rank, medians per step over its monitor's window (None: not measured)."""

    rank: int | None
    node: str
    host: str
    pid: int
    local_rank: int | None = None
    gpu: str = ""
    uuid: str = ""
    step_ms: float | None = None
    data_wait_pct: float | None = None
    input_ms: float | None = None
    comm_ms: float | None = None
    comm_pct: float | None = None
    steps_total: float | None = None
    connected: bool = True

    @property
    def key(self) -> tuple[str, int]:
        """A rank's identity across samples: its host and PID (a restarted rank is new)."""
        return self.host, self.pid


@dataclass(frozen=True)
class NodeFigures:
    """One node: where it is, whether its job runs, its GPUs' utilization (the job's GPUs'
    mean; None where no GPU of the job is known)."""

    node: str
    host: str
    source: str  # the exporter's URL, or the Prometheus instance
    running: bool | None = None
    exit_code: float | None = None
    gpu_util_pct: float | None = None
    world_size: int | None = None
    # A node whose read failed (its exporter down, a timeout; Prometheus's scrape of it): why,
    # and since when (its last answer, else the first failed read). None: it answers.
    down_reason: str | None = None
    down_since: float | None = None


@dataclass(frozen=True)
class JobSample:
    """The job at one moment: its name, its nodes and ranks, and what could not be read."""

    job: str
    at: float
    nodes: tuple[NodeFigures, ...]
    ranks: tuple[RankFigures, ...]
    problems: tuple[str, ...] = field(default=())


class SourceError(Exception):
    """The job cannot be read at all (no exporter answered, Prometheus refused the query):
    said in one line."""

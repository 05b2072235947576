"""Stand-in node exporters: the pages a node's gputop-train exporter serves (the same
families, labels and info series as export/; tests/test_job_view.py holds them to a real
exporter's page), with figures we choose, for a job of many nodes on one box.

``node_page`` renders one node's page; ``StandinNodes`` serves many over HTTP from one
thread pool (each at its own path), so the job view and a real Prometheus scrape them as
they would the nodes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gputop_train.export.info import RANK_INFO_LABELS

JOB_LABELS = ["host", "train_job"]
RANK_LABELS = [*JOB_LABELS, "rank", "local_rank", "pid", "gpu", "UUID"]
GPU_LABELS = [*JOB_LABELS, "gpu", "name", "UUID", "pci_bus_id"]
# The exporter's per-GPU gauges (export/families.py GPU_FAMILIES) and its throttle reasons.
GPU_GAUGES = (
    "gpu_utilization_ratio", "gpu_sm_active_ratio", "gpu_tensor_active_ratio",
    "gpu_memory_used_bytes", "gpu_memory_total_bytes", "gpu_power_watts", "gpu_sm_clock_hertz",
    "gpu_sm_clock_max_hertz", "gpu_job", "gpu_other_processes",
)  # fmt: skip
REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
PARTS = ("data", "forward", "backward", "optimizer", "rest")


@dataclass
class Rank:
    """One rank's figures (ms per step, medians over the window)."""

    rank: int
    local_rank: int
    pid: int
    step_ms: float = 50.0
    input_ms: float = 1.0
    comm_ms: float = 20.0
    steps_total: float = 0.0


@dataclass
class Node:
    """One node of the job: its name, host and ranks; ``gpus``: GPUs it serves series for."""

    job: str
    node: str
    host: str
    ranks: list[Rank] = field(default_factory=list)
    gpus: int = 8
    running: bool = True
    exit_code: float | None = None


def node_page(node: Node, part: str = "all") -> bytes:
    """The node's page in Prometheus's text format, as its exporter renders it; ``part``:
    "figures" all but the step and sample counters, "counters" those alone."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_NodeCollector(node, part))
    return generate_latest(registry)


class _NodeCollector(Collector):
    def __init__(self, node: Node, part: str) -> None:
        self.node, self.part = node, part

    def collect(self):  # type: ignore[no-untyped-def]
        node, job = self.node, [self.node.host, self.node.job]

        def rank_labels(r: Rank) -> list[str]:
            return [
                *job,
                str(r.rank),
                str(r.local_rank),
                str(r.pid),
                str(r.local_rank),
                _uuid(node, r.local_rank),
            ]

        def per_rank(name: str, doc: str, value: Callable[[Rank], float]) -> GaugeMetricFamily:
            family = GaugeMetricFamily("gputop_train_" + name, doc, labels=RANK_LABELS)
            for r in node.ranks:
                family.add_metric(rank_labels(r), value(r))
            return family

        if self.part != "figures":
            for name in ("steps", "samples"):
                counter = CounterMetricFamily("gputop_train_" + name, name, labels=RANK_LABELS)
                for r in node.ranks:
                    counter.add_metric(rank_labels(r), r.steps_total * (name == "steps" or 32))
                yield counter
        if self.part == "counters":
            return
        yield per_rank("step_seconds", "median step time", lambda r: r.step_ms / 1e3)
        yield per_rank("step_p95_seconds", "p95 step", lambda r: r.step_ms * 1.05 / 1e3)
        yield per_rank("data_wait_ratio", "data-wait", lambda r: r.input_ms / r.step_ms)
        yield per_rank("gpu_time_ratio", "gpu time", lambda r: 0.7)
        yield per_rank("samples_per_second", "samples/s", lambda r: 32e3 / r.step_ms)
        yield per_rank("comm_wait_seconds", "comm wait", lambda r: r.comm_ms / 1e3)
        yield per_rank("comm_wait_ratio", "comm share", lambda r: r.comm_ms / r.step_ms)
        yield per_rank("tokens_per_second", "tokens/s", lambda r: 8e6 / r.step_ms)
        yield per_rank("input_wait_seconds", "input", lambda r: r.input_ms / 1e3)
        parts = GaugeMetricFamily(
            "gputop_train_step_part_ratio", "parts", labels=[*RANK_LABELS, "part", "clock"]
        )
        for r in node.ranks:
            for part in PARTS:
                parts.add_metric([*rank_labels(r), part, "gpu"], 0.2)
        yield parts
        yield from self._gpus(job)
        yield from self._job(job, rank_labels)

    def _gpus(self, job: list[str]):  # type: ignore[no-untyped-def]
        node = self.node
        gauges = [GaugeMetricFamily("gputop_train_" + n, n, labels=GPU_LABELS) for n in GPU_GAUGES]
        reasons = GaugeMetricFamily(
            "gputop_train_gpu_clock_event_reason", "reasons", labels=[*GPU_LABELS, "reason"]
        )
        for gpu in range(node.gpus):
            labels = [
                *job,
                str(gpu),
                "NVIDIA H100 80GB HBM3",
                _uuid(node, gpu),
                f"00000000:{gpu + 0x18:02X}:00.0",
            ]
            for gauge in gauges:
                gauge.add_metric(labels, 1.0 if gauge.name.endswith("gpu_job") else 0.9)
            for reason in REASONS:
                reasons.add_metric([*labels, reason], 0.0)
        yield from (*gauges, reasons)

    def _job(self, job: list[str], rank_labels):  # type: ignore[no-untyped-def]
        node = self.node

        def one(name: str, value: float | None) -> GaugeMetricFamily:
            family = GaugeMetricFamily("gputop_train_" + name, name, labels=JOB_LABELS)
            if value is not None:
                family.add_metric(job, value)
            return family

        yield one("job_running", 1.0 if node.running else 0.0)
        yield one("phase", 0.0)
        yield one("job_samples_per_second", 1000.0)
        yield one("job_tokens_per_second", 1e6)
        yield one("mfu_ratio", 0.4)
        yield one("job_exit_code", None if node.running else node.exit_code)
        connected = GaugeMetricFamily("gputop_train_rank_connected", "c", labels=RANK_LABELS)
        info = GaugeMetricFamily(
            "gputop_train_rank_info",
            "info",
            labels=list(RANK_INFO_LABELS),
        )
        for r in node.ranks:
            connected.add_metric(rank_labels(r), 1.0)
            info.add_metric(
                [node.job, str(r.rank), str(r.local_rank), node.node, node.host, node.host,
                 str(r.pid), str(r.local_rank), _uuid(node, r.local_rank),
                 f"00000000:{r.local_rank + 0x18:02X}:00.0"],
                1.0,
            )  # fmt: skip
        yield connected
        yield info
        job_info = GaugeMetricFamily(
            "gputop_train_job_info",
            "job",
            labels=["job", "node", "host", "hpc_job", "run_id", "pod", "namespace", "world_size"],
        )
        job_info.add_metric([node.job, node.node, node.host, "", "", "", "", ""], 1.0)
        yield job_info


def _counters(node: Node, read_at: float) -> bytes:
    """The node's counters now: as read at ``read_at``, moved on since at each step time."""
    seconds = time.monotonic() - read_at
    ranks = [replace(r, steps_total=r.steps_total + seconds * 1e3 / r.step_ms) for r in node.ranks]
    return node_page(replace(node, ranks=ranks), "counters")


def _uuid(node: Node, gpu: int) -> str:
    return f"GPU-{abs(hash(node.host)) % 10**8:08d}-{gpu:04d}"


class StandinNodes:
    """Serves each node's page at ``/<node>/metrics`` on one port, as a node's exporter does:
    its figures rendered ahead on a thread of their own (every ``refresh_s``), its step and
    sample counters at each scrape, moved on with the wall clock at each rank's step time. (The
    counters were rendered ahead too, until 2026-12-06: rendering 1,000 nodes took longer than
    the 15 s scrape interval on the loaded box, two scrapes of a node read the same counter,
    and its ranks counted no steps in a window: docs/jobs.md "Scale".)"""

    def __init__(
        self, nodes: Sequence[Node], host: str = "127.0.0.1", port: int = 0, refresh_s: float = 1.0
    ) -> None:
        self.nodes = {n.node: n for n in nodes}
        # Per node: its figures' bytes, its ranks' copies and when their counters were read.
        self._pages: dict[str, tuple[bytes, Node, float]] = {}
        self._stepped_at = time.monotonic()
        self._stop = threading.Event()
        self._render_all()
        pages = self._pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                page = pages.get(self.path.strip("/").split("/")[0])
                body = b"" if page is None else page[0] + _counters(*page[1:])
                self.send_response(200 if page is not None else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # a scraper that gave up
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.server.request_queue_size = 1024
        self._threads = [
            threading.Thread(target=self.server.serve_forever, daemon=True),
            threading.Thread(target=self._render_loop, args=(refresh_s,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _render_all(self) -> None:
        now = time.monotonic()
        seconds, self._stepped_at = now - self._stepped_at, now
        for name, node in self.nodes.items():
            for rank in node.ranks:
                rank.steps_total += seconds * 1000.0 / rank.step_ms
            copy = replace(node, ranks=[replace(r) for r in node.ranks])
            self._pages[name] = (node_page(node, "figures"), copy, now)

    def _render_loop(self, refresh_s: float) -> None:
        while not self._stop.wait(refresh_s):
            self._render_all()

    def url(self, node: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/{node}/metrics"

    def target(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

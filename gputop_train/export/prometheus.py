"""A Prometheus endpoint for what only gputop-train knows: step time and data-wait per rank,
syncs, MFU, findings; with NVML's per-GPU figures beside them (docs/prometheus.md).

The metrics are built from a fresh view at each scrape (a custom collector), so nothing runs
between scrapes: at Prometheus's usual 15 s interval the exporter costs one snapshot per 15 s
(benchmarks/exporter_cost.py).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.registry import Collector, CollectorRegistry

from ..advise.stragglers import input_ms
from ..samples import GpuSample
from ..session.clocks import SLOWDOWN_REASONS
from ..session.job_gpus import GpuFigures, GpuUser
from ..session.model import Snapshot
from ..views import View
from .http_server import BoundedServer, start_server, tls_context

PREFIX = "gputop_train_"
DEFAULT_HOST = "127.0.0.1"  # the job's figures stay on the box unless the user says otherwise
# ``job`` is Prometheus's own label (the scrape job): a target's ``job`` would be renamed
# ``exported_job`` unless every scrape config set honor_labels. Ours is ``train_job``.
# Every series also carries ``hpc_job``, the Slurm job's id as dcgm-exporter's job mapping
# names it, where the monitor runs in a Slurm job (SLURM_JOB_ID): JobCollector.__init__.
JOB_LABELS = ("host", "train_job")
# A rank's and a GPU's own labels, after the job's. ``UUID`` and ``pci_bus_id`` as
# dcgm-exporter names them: ``on (UUID)`` joins its series to ours (docs/prometheus.md).
# A rank's ``gpu`` and ``UUID`` are those of the GPU it runs on (empty where it holds none,
# or several): ``on (UUID)`` joins dcgm-exporter's clocks and throttling to a rank's series.
RANK_LABELS = ("rank", "local_rank", "pid", "gpu", "UUID")
GPU_LABELS = ("gpu", "name", "UUID", "pci_bus_id")


class ExporterError(Exception):
    """The endpoint could not be served (a bad address, a port in use): said in one line."""


def parse_address(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]") if sep else DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError:
        raise ExporterError(f"--prometheus {text!r}: expected [HOST:]PORT, as 9455") from None
    if not 0 <= port <= 65535:
        raise ExporterError(f"--prometheus {text!r}: a port is 0 to 65535")
    return host or DEFAULT_HOST, port


def job_name(command: Sequence[str]) -> str:
    """The ``train_job`` label: the script's name (``resnet`` for ``python resnet.py``), else
    the command's; with torchrun's ``--rdzv-id`` (a cluster's job id, the same on every node),
    ``train-JOBID``: two jobs of one script are told apart, one job's nodes still join."""
    name = next(
        (Path(arg).stem for arg in command if arg.endswith(".py")),
        Path(command[0]).name if command else "job",
    )
    rendezvous = _option(command, "--rdzv-id", "--rdzv_id")
    return f"{name}-{rendezvous}" if rendezvous else name


def _option(command: Sequence[str], *names: str) -> str | None:
    """The value of the first of ``names`` given as ``--name VALUE`` or ``--name=VALUE``."""
    for index, arg in enumerate(command):
        for name in names:
            if arg == name and index + 1 < len(command):
                return command[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


@dataclass
class Exporter:
    """A running endpoint; ``close`` stops it (the job is never touched). ``warning``: what
    the user should know about its exposure (all interfaces), else None."""

    url: str
    _server: BoundedServer
    _thread: threading.Thread
    warning: str | None = None
    _collector: JobCollector | None = None

    @property
    def last_scrape(self) -> float:
        """When a scrape was last served (time.time()); 0 before the first."""
        return self._collector.last_scrape if self._collector is not None else 0.0

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2.0)


@dataclass(frozen=True)
class Tls:
    """``--prometheus-tls CERT KEY`` and ``--prometheus-client-ca CA`` (docs/prometheus.md)."""

    certfile: str
    keyfile: str
    client_ca: str | None = None


def serve(
    address: str, current_view: Callable[[], View], train_job: str, tls: Tls | None = None
) -> Exporter:
    """Serve ``/metrics`` on ``address`` ([HOST:]PORT) from a background thread."""
    host, port = parse_address(address)
    registry = CollectorRegistry(auto_describe=False)
    collector = JobCollector(current_view, train_job)
    registry.register(collector)
    try:
        context = tls_context(tls.certfile, tls.keyfile, tls.client_ca) if tls else None
    except (OSError, ssl.SSLError) as error:
        raise ExporterError(f"cannot use the TLS files for Prometheus: {error}") from None
    try:
        server, thread = start_server(host, port, make_wsgi_app(registry), context)
    except OSError as error:
        raise ExporterError(
            f"cannot serve Prometheus metrics on {host}:{port}: {error.strerror or error} "
            "(another port: --prometheus PORT; 0 picks a free one)"
        ) from None
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    everywhere = ipaddress.ip_address(bound_host).is_unspecified
    shown = socket.getfqdn() if everywhere else bound_host
    shown = f"[{shown}]" if ":" in shown else shown
    scheme = "https" if tls else "http"
    warning = None
    if everywhere and not (tls and tls.client_ca):
        warning = (
            f"Prometheus metrics are served on every interface ({bound_host}): any host that "
            "can reach this one can read them (host, script name, figures); bind 127.0.0.1, "
            "or require client certificates with --prometheus-client-ca (docs/prometheus.md)"
        )
    return Exporter(f"{scheme}://{shown}:{bound_port}/metrics", server, thread, warning, collector)


class JobCollector(Collector):
    """Builds every metric from the view of the moment, at each scrape."""

    def __init__(self, current_view: Callable[[], View], train_job: str) -> None:
        self._view = current_view
        job = dict(zip(JOB_LABELS, (socket.gethostname(), train_job), strict=True))
        if hpc_job := os.environ.get("SLURM_JOB_ID"):
            job["hpc_job"] = hpc_job
        self._job, self._job_labels = tuple(job.values()), tuple(job)
        self._rank_labels = (*self._job_labels, *RANK_LABELS)
        self._gpu_labels = (*self._job_labels, *GPU_LABELS)
        self.last_scrape = 0.0

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        self.last_scrape = time.time()
        yield from self._rank_metrics(view)
        yield from self._gpu_metrics(view)
        yield from self._job_metrics(view)

    def _rank_metrics(self, view: View) -> Iterator[Metric]:
        families = {
            "step": _gauge("step_seconds", "median step time over the window", self._rank_labels),
            "p95": _gauge("step_p95_seconds", "95th percentile step time", self._rank_labels),
            "wait": _gauge(
                "data_wait_ratio", "share of step time waiting on data", self._rank_labels
            ),
            "gpu": _gauge("gpu_time_ratio", "share of step time the GPU worked", self._rank_labels),
            "rate": _gauge("samples_per_second", "samples/s over the window", self._rank_labels),
            "comm": _gauge(
                "comm_wait_seconds",
                "median step's wait in collectives (all-reduce, barrier...) over the window",
                self._rank_labels,
            ),
            "comm_share": _gauge(
                "comm_wait_ratio", "share of step time waiting in collectives", self._rank_labels
            ),
            "tokens": _gauge("tokens_per_second", "tokens/s over the window", self._rank_labels),
            "input": _gauge(
                "input_wait_seconds",
                "time a step spends before its forward on its input: DataLoader wait or a "
                "loader-less loop's host gap (the straggler's input cause; docs/ranks.md)",
                self._rank_labels,
            ),
        }
        part = _gauge(
            "step_part_ratio",
            "share of the step in each part (docs/steps.md); clock gpu or host",
            (*self._rank_labels, "part", "clock"),
        )
        steps = _counter("steps", "optimizer steps taken", self._rank_labels)
        samples = _counter("samples", "samples consumed", self._rank_labels)
        on_gpu = _rank_gpus(view.snap)
        for rank in view.snap.ranks:
            labels = [
                *self._job,
                _label(rank.who.rank),
                _label(rank.who.local_rank),
                str(rank.who.pid),
                *on_gpu.get(rank.who.pid, ("", "")),
            ]
            figures = rank.steps
            _add(families["step"], labels, _seconds(figures.step_ms_p50))
            _add(families["p95"], labels, _seconds(figures.step_ms_p95))
            _add(families["wait"], labels, _ratio(figures.data_wait_pct))
            _add(families["gpu"], labels, _ratio(figures.gpu_time_pct))
            _add(families["rate"], labels, figures.samples_per_s)
            if rank.comm is not None:
                _add(families["comm"], labels, _seconds(rank.comm.wait_ms_p50))
                _add(families["comm_share"], labels, _ratio(rank.comm.wait_pct))
            _add(families["tokens"], labels, figures.tokens_per_s)
            _add(families["input"], labels, _seconds(input_ms(rank)))
            if figures.parts is not None:
                for name, share in figures.parts.pct.items():
                    _add(part, [*labels, name, figures.parts.clock], _ratio(share))
            steps.add_metric(labels, rank.total_steps)
            _add(samples, labels, rank.total_samples)
        yield from (*families.values(), part, steps, samples)

    def _gpu_metrics(self, view: View) -> Iterator[Metric]:
        """Every GPU family of ``GPU_FAMILIES``, a series per GPU of the node."""
        families = [_gauge(f.name, f.documentation, self._gpu_labels) for f in GPU_FAMILIES]
        reasons = _gauge(
            "gpu_clock_event_reason",
            "1 while NVML reports this clock-event (throttle) reason, else 0",
            (*self._gpu_labels, "reason"),
        )
        snap = view.snap
        figures = {g.index: g for g in snap.gpus}
        for gpu in snap.latest_gpus:
            who = [_at(snap.gpu_uuids, gpu.index), _at(snap.gpu_pci_bus_ids, gpu.index)]
            labels = [*self._job, str(gpu.index), gpu.name or "", *who]
            for spec, family in zip(GPU_FAMILIES, families, strict=True):
                _add(family, labels, spec.value(gpu, figures.get(gpu.index)))
            if gpu.throttle is not None:  # N/A: no series, never a 0
                for reason in SLOWDOWN_REASONS:
                    reasons.add_metric([*labels, reason], float(reason in gpu.throttle))
        yield from (*families, reasons)

    def _job_metrics(self, view: View) -> Iterator[Metric]:
        snap, labels = view.snap, list(self._job)
        running = _gauge("job_running", "1 while the job runs", self._job_labels)
        running.add_metric(labels, 1.0 if snap.job.running else 0.0)
        phase = _gauge(
            "phase", "the phase now running (each knob change opens one)", self._job_labels
        )
        phase.add_metric(labels, snap.phase)
        rate = _gauge("job_samples_per_second", "samples/s of all ranks", self._job_labels)
        _add(rate, labels, snap.steps.samples_per_s)
        tokens = _gauge("job_tokens_per_second", "tokens/s of all ranks", self._job_labels)
        _add(tokens, labels, snap.steps.tokens_per_s)
        memory = _gauge(
            "gpu_memory_audit_bytes",
            "the memory audit: params, grads, optimizer, activations, cache (docs/steps.md)",
            (*self._job_labels, "kind"),
        )
        audit = snap.memory
        if audit is not None:
            for kind in ("params", "grads", "optimizer", "activations", "cache"):
                _add(memory, [*labels, kind], getattr(audit, kind))
        retries = _gauge("alloc_retries", "CUDA caching-allocator retries so far", self._job_labels)
        _add(retries, labels, audit.alloc_retries if audit else None)
        mfu = _gauge("mfu_ratio", "achieved FLOP/s over the GPU's dense peak", self._job_labels)
        _add(mfu, labels, _ratio(view.mfu_pct))
        syncs = _gauge("syncs_per_step", "host-device syncs in a scanned step", self._job_labels)
        observation = snap.observation
        _add(syncs, labels, observation.syncs_per_step if observation else None)
        finding = _gauge(
            "finding",
            "1 for each finding in force; headline=1 marks the first; rank: the rank it names",
            (*self._job_labels, "finding", "headline", "rank"),
        )
        for index, found in enumerate(view.findings):
            # One series per rank a finding names (a stall may name several; never rank="").
            for rank in found.ranks or (found.rank,):
                named = [found.id, "1" if index == 0 else "0", _label(rank)]
                finding.add_metric([*labels, *named], 1.0)
        exit_code = _gauge(
            "job_exit_code", "the job's exit status, once it ended", self._job_labels
        )
        if not snap.job.running:
            _add(exit_code, labels, snap.job.exit_code)
        connected = _gauge(
            "rank_connected",
            "1 while the rank's hook is connected; 0 once it is gone",
            self._rank_labels,
        )
        on_gpu = _rank_gpus(snap)
        for process in snap.hooked:
            who = [_label(process.rank), _label(process.local_rank), str(process.pid)]
            who += on_gpu.get(process.pid, ("", ""))
            connected.add_metric([*labels, *who], 1.0 if process.connected else 0.0)
        yield from (running, phase, rate, tokens, memory, retries, mfu, syncs, finding)
        yield from (exit_code, connected)


@dataclass(frozen=True)
class GpuFamily:
    """One per-GPU gauge: its name (after PREFIX), its help, and its value from the GPU's
    latest NVML sample and its figures over the window (session/job_gpus.py; None before
    the first window). A value of None is no sample: N/A is never a 0."""

    name: str
    documentation: str
    value: Callable[[GpuSample, GpuFigures | None], float | None]


def _job_gpu(gpu: GpuSample, figures: GpuFigures | None) -> float | None:
    return None if figures is None else float(figures.job)


def _others(figures: GpuFigures | None) -> tuple[GpuUser, ...]:
    return () if figures is None else figures.others


# Every per-GPU family, declared once: a new one is a line here and its row in
# docs/prometheus.md (tests/test_recipes.py adds one).
GPU_FAMILIES: tuple[GpuFamily, ...] = (
    GpuFamily("gpu_utilization_ratio", "NVML utilization", lambda g, _: _ratio(g.util_pct)),
    GpuFamily("gpu_sm_active_ratio", "GPM SM activity", lambda g, _: _ratio(g.sm_active_pct)),
    GpuFamily(
        "gpu_tensor_active_ratio",
        "GPM tensor-core activity",
        lambda g, _: _ratio(g.tensor_active_pct),
    ),
    GpuFamily("gpu_memory_used_bytes", "GPU memory used (NVML)", lambda g, _: g.mem_used_bytes),
    GpuFamily("gpu_memory_total_bytes", "GPU memory (NVML)", lambda g, _: g.mem_total_bytes),
    GpuFamily("gpu_power_watts", "GPU power draw (NVML)", lambda g, _: g.power_w),
    GpuFamily("gpu_sm_clock_hertz", "SM clock (NVML)", lambda g, _: _hertz(g.sm_clock_mhz)),
    GpuFamily(
        "gpu_sm_clock_max_hertz",
        "the SM clock's ceiling (NVML)",
        lambda g, _: _hertz(g.sm_clock_max_mhz),
    ),
    GpuFamily(
        "gpu_job",
        "1 for a GPU of the job (NVML's processes, the hook's device), 0 for the node's others",
        _job_gpu,
    ),
    GpuFamily(
        "gpu_other_processes",
        "processes on the GPU that are not the job's (NVML)",
        lambda g, f: None if f is None else float(len(f.others)),
    ),
    GpuFamily(
        "gpu_other_memory_bytes",
        "GPU memory held by processes that are not the job's (NVML)",
        lambda g, f: None if not _others(f) else f.others_mem_bytes,  # type: ignore[union-attr]
    ),
    GpuFamily(
        "gpu_other_sm_ratio",
        "SM share of processes that are not the job's, window mean (NVML per process)",
        lambda g, f: None if not _others(f) else _ratio(f.others_sm_pct),  # type: ignore[union-attr]
    ),
)


def _rank_gpus(snap: Snapshot) -> dict[int, tuple[str, str]]:
    """Each rank's GPU as (NVML index, UUID) labels, by PID: the one GPU NVML has seen it hold
    memory on (RankStats.gpus), its UUID from NVML. A rank on several GPUs, or none yet, has
    none (empty labels)."""
    return {
        rank.who.pid: (str(rank.gpus[0]), _at(snap.gpu_uuids, rank.gpus[0]))
        for rank in snap.ranks
        if len(rank.gpus) == 1
    }


def _gauge(name: str, documentation: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, labels=list(labels))


def _counter(name: str, documentation: str, labels: Sequence[str]) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, documentation, labels=list(labels))


def _hertz(mhz: float | None) -> float | None:
    return None if mhz is None else mhz * 1e6


def _add(
    family: GaugeMetricFamily | CounterMetricFamily, labels: list[str], value: float | None
) -> None:
    """N/A is no sample, never a zero: a query sees the series absent, not idle."""
    if value is not None:
        family.add_metric(labels, float(value))


def _at(values: Sequence[str | None], index: int) -> str:
    """The label of GPU ``index``, or "" (no label) where NVML did not say."""
    return (values[index] or "") if 0 <= index < len(values) else ""


def _label(value: int | None) -> str:
    return "" if value is None else str(value)


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100.0

"""A Prometheus endpoint for what only gputop-train knows: step time and data-wait per rank,
syncs, MFU, findings; with NVML's per-GPU figures beside them (docs/prometheus.md).

The metrics are built from a fresh view at each scrape (a custom collector), so nothing runs
between scrapes: at Prometheus's usual 15 s interval the exporter costs one snapshot per 15 s
(benchmarks/overhead/exporter_cost.py).
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
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.registry import Collector, CollectorRegistry

from ..session.clocks import SLOWDOWN_REASONS
from ..views import View
from . import families
from .families import (
    GPU_LABELS,
    RANK_LABELS,
    Family,
    Kind,
    LabelledFamily,
    at,
    rank_gpus,
    rank_labels,
)
from .http_server import BoundedServer, start_server, tls_context

PREFIX = "gputop_train_"
DEFAULT_HOST = "127.0.0.1"  # the job's figures stay on the box unless the user says otherwise
# ``job`` is Prometheus's own label (the scrape job): a target's ``job`` would be renamed
# ``exported_job`` unless every scrape config set honor_labels. Ours is ``train_job``.
# Every series also carries ``hpc_job``, the Slurm job's id as dcgm-exporter's job mapping
# names it, where the monitor runs in a Slurm job (SLURM_JOB_ID): JobCollector.__init__.
JOB_LABELS = ("host", "train_job")


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
    """Builds every family of the tables of families.py from the view of the moment, at each
    scrape."""

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
        """Every family of ``RANK_FAMILIES``, a series per rank."""
        on_gpu = rank_gpus(view.snap)
        subjects = [
            (
                rank,
                [
                    *self._job,
                    *rank_labels(rank.who.rank, rank.who.local_rank, rank.who.pid, on_gpu),
                ],
            )
            for rank in view.snap.ranks
        ]
        return _served(families.RANK_FAMILIES, self._rank_labels, subjects)

    def _gpu_metrics(self, view: View) -> Iterator[Metric]:
        """Every family of ``GPU_FAMILIES``, a series per GPU of the node."""
        rows = families.GPU_FAMILIES
        gauges = [_gauge(f.name, f.documentation, self._gpu_labels) for f in rows]
        # Not a row: a series per reason NVML knows, each from the same sample's set, which
        # GpuFamily's one value per GPU cannot say.
        reasons = _gauge(
            "gpu_clock_event_reason",
            "1 while NVML reports this clock-event (throttle) reason, else 0",
            (*self._gpu_labels, "reason"),
        )
        snap = view.snap
        figures = {g.index: g for g in snap.gpus}
        for gpu in snap.latest_gpus:
            who = [at(snap.gpu_uuids, gpu.index), at(snap.gpu_pci_bus_ids, gpu.index)]
            labels = [*self._job, str(gpu.index), gpu.name or "", *who]
            for spec, gauge in zip(rows, gauges, strict=True):
                _add(gauge, labels, spec.value(gpu, figures.get(gpu.index)))
            if gpu.throttle is not None:  # N/A: no series, never a 0
                for reason in SLOWDOWN_REASONS:
                    reasons.add_metric([*labels, reason], float(reason in gpu.throttle))
        yield from (*gauges, reasons)

    def _job_metrics(self, view: View) -> Iterator[Metric]:
        """Every family of ``JOB_FAMILIES``: the job's own series."""
        return _served(families.JOB_FAMILIES, self._job_labels, [(view, list(self._job))])


S = TypeVar("S")


def _served(
    rows: Sequence[Family[S] | LabelledFamily[S]],
    labels: Sequence[str],
    subjects: Sequence[tuple[S, list[str]]],
) -> Iterator[Metric]:
    """Each row of a table as a family, with a series per subject (and per label value of
    the row's own): a declared family is always served, empty where nothing is measured."""
    for row in rows:
        family = _FAMILY_TYPES[row.kind](
            PREFIX + row.name, row.documentation, labels=[*labels, *row.labels]
        )
        for subject, values in subjects:
            for own, value in row.series(subject):
                _add(family, [*values, *own], value)
        yield family


_FAMILY_TYPES: dict[Kind, type[GaugeMetricFamily] | type[CounterMetricFamily]] = {
    "gauge": GaugeMetricFamily,
    "counter": CounterMetricFamily,
}


def _gauge(name: str, documentation: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, labels=list(labels))


def _add(
    family: GaugeMetricFamily | CounterMetricFamily, labels: list[str], value: float | None
) -> None:
    """N/A is no sample, never a zero: a query sees the series absent, not idle."""
    if value is not None:
        family.add_metric(labels, float(value))

"""A Prometheus endpoint for what only gputop-train knows: step time and data-wait per rank,
syncs, MFU, findings; with NVML's per-GPU figures beside them (docs/prometheus.md).

The metrics are built from a fresh view every second on a thread of their own and served as a
pre-rendered page (page.py), so a scrape under load costs the niced monitor only a copy of
bytes (git show 6a2d3ea:benchmarks/overhead/exporter_cost.py).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
from .identity import JobIdentity
from .info import info_metrics
from .page import PageRenderer

PREFIX = "gputop_train_"
DEFAULT_HOST = "127.0.0.1"  # the job's figures stay on the box unless the user says otherwise
# ``job`` is Prometheus's own label (the scrape job): a target's ``job`` would be renamed
# ``exported_job`` unless every scrape config set honor_labels. Ours is ``train_job``: the
# job's short name, the one label of the job every series keeps (the rules and the dashboard
# group ranks by it); where the name came from (Slurm job, torchrun run id, pod) is said once,
# in the info series (info.py), never multiplied into every series.
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


@dataclass
class Exporter:
    """A running endpoint; ``close`` stops it (the job is never touched). ``warning``: what
    the user should know about its exposure (all interfaces), else None."""

    url: str
    _server: BoundedServer
    _thread: threading.Thread
    renderer: PageRenderer
    warning: str | None = None

    def job_ended(self) -> None:
        """The job has ended: render its end now, not a period later."""
        self.renderer.render_now()

    def end_read_by_every_scraper(self) -> bool:
        """Each client that scraped regularly has read a page that says the job ended."""
        return self.renderer.scrapers.all_read_end()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2.0)
        self.renderer.close()


@dataclass(frozen=True)
class Tls:
    """``--prometheus-tls CERT KEY`` and ``--prometheus-client-ca CA`` (docs/prometheus.md)."""

    certfile: str
    keyfile: str
    client_ca: str | None = None


def serve(
    address: str,
    current_view: Callable[[], View],
    who: JobIdentity,
    tls: Tls | None = None,
) -> Exporter:
    """Serve ``/metrics`` on ``address`` ([HOST:]PORT) from a background thread, a page
    rendered every second."""
    host, port = parse_address(address)
    collector = JobCollector(current_view, who)
    renderer = PageRenderer(collector, lambda: collector.ended)
    try:
        context = tls_context(tls.certfile, tls.keyfile, tls.client_ca) if tls else None
    except (OSError, ssl.SSLError) as error:
        raise ExporterError(f"cannot use the TLS files for Prometheus: {error}") from None
    try:
        server, thread = start_server(host, port, renderer.app, context)
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
    renderer.start()
    return Exporter(f"{scheme}://{shown}:{bound_port}/metrics", server, thread, renderer, warning)


class JobCollector(Collector):
    """Builds every family of the tables of families.py, and the info series, from the view
    of the moment, at each render."""

    def __init__(self, current_view: Callable[[], View], who: JobIdentity) -> None:
        self._view = current_view
        self._who = who
        self._job_labels = JOB_LABELS
        self._job = (who.host, who.job)
        self._rank_labels = (*self._job_labels, *RANK_LABELS)
        self._gpu_labels = (*self._job_labels, *GPU_LABELS)
        self.ended = False  # whether the job had ended in the view of the last collect

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        self.ended = not view.snap.job.running
        yield from self._rank_metrics(view)
        yield from self._gpu_metrics(view)
        yield from self._job_metrics(view)
        yield from info_metrics(view, self._who, PREFIX)

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
            "1 where NVML reported this clock-event (throttle) reason in the window, else 0",
            (*self._gpu_labels, "reason"),
        )
        snap = view.snap
        figures = {g.index: g for g in snap.gpus}
        for gpu in snap.latest_gpus:
            who = [at(snap.gpu_uuids, gpu.index), at(snap.gpu_pci_bus_ids, gpu.index)]
            labels = [*self._job, str(gpu.index), gpu.name or "", *who]
            window = figures.get(gpu.index)
            for spec, gauge in zip(rows, gauges, strict=True):
                _add(gauge, labels, spec.value(gpu, window))
            # The reasons seen in the window, as the screen and the JSON say them.
            seen = window.throttle if window is not None else None
            if seen is not None:  # N/A: no series, never a 0
                for reason in SLOWDOWN_REASONS:
                    reasons.add_metric([*labels, reason], float(reason in seen))
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

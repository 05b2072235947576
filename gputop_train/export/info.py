"""The info series: who each rank is (job, node, host, GPU) once, in series of value 1, so a
query joins them where it needs them instead of every series carrying the job's labels.

``gputop_train_rank_info`` joins dcgm-exporter's per-GPU series on ``UUID`` (or on
``Hostname`` and ``gpu``, dcgm-exporter's own labels); ``gputop_train_job_info`` says where the
job's name came from (Slurm, torchrun, Kubernetes). docs/prometheus.md, "One job across nodes".
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from ..views import View
from .families import at, label, rank_gpus
from .identity import JobIdentity

# ``job`` as the issue and the Prometheus docs' info-series pattern name it: a scrape with the
# default ``honor_labels: false`` keeps it as ``exported_job`` (docs/prometheus.md says why we
# leave it so). ``Hostname``: dcgm-exporter's spelling of the host (capital H, as its 3.x and
# 4.x series carry it), so ``on (Hostname, gpu)`` joins where a UUID is not exported.
RANK_INFO_LABELS = (
    "job",
    "rank",
    "local_rank",
    "node",
    "host",
    "Hostname",
    "pid",
    "gpu",
    "UUID",
    "pci_bus_id",
)
JOB_INFO_LABELS = ("job", "node", "host", "hpc_job", "run_id", "pod", "namespace", "world_size")


def info_metrics(view: View, who: JobIdentity, prefix: str) -> Iterator[GaugeMetricFamily]:
    """``rank_info`` (a series per hooked process) and ``job_info`` (one), value 1."""
    ranks = GaugeMetricFamily(
        prefix + "rank_info",
        "1 for each rank: its job, node, host and GPU (join on UUID with dcgm-exporter's series)",
        labels=list(RANK_INFO_LABELS),
    )
    snap = view.snap
    on_gpu = rank_gpus(snap)
    index_of = {uuid: i for i, uuid in enumerate(snap.gpu_uuids) if uuid}
    for process in snap.hooked:
        gpu, uuid = on_gpu.get(process.pid, ("", ""))
        bus = at(snap.gpu_pci_bus_ids, index_of[uuid]) if uuid in index_of else ""
        values = (label(process.rank), label(process.local_rank), who.node, who.host, who.host)
        ranks.add_metric([who.job, *values, str(process.pid), gpu, uuid, bus], 1.0)
    job = GaugeMetricFamily(
        prefix + "job_info",
        "1: the job's name and where it came from (Slurm job, torchrun run id, pod), this node",
        labels=list(JOB_INFO_LABELS),
    )
    sizes = {p.world_size for p in snap.hooked if p.world_size is not None}
    world = str(max(sizes)) if sizes else ""
    origin = (who.hpc_job, who.run_id, who.pod, who.namespace)
    job.add_metric([who.job, who.node, who.host, *(v or "" for v in origin), world], 1.0)
    yield ranks
    yield job

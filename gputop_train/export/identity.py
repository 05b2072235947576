"""Who the job and this node are, from what the scheduler and the launcher already say.

A node's monitor never asks the other nodes (it may not reach them): the job's name comes from
the command line and the environment that Slurm, torchrun or Kubernetes give every node alike,
so each node's exporter names the same job without talking to the others, and names itself.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Where a Kubernetes pod finds its namespace (the service account's mount): read when the
# downward API gave no POD_NAMESPACE.
K8S_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class JobIdentity:
    """The job and this node, as the exporter labels them (docs/prometheus.md, "Labels").

    ``job``: one name for every node of the job (the ``train_job`` label, ``job`` of the
    info series). ``node``: this node's name within the job. ``host``: the host to ssh into.
    The rest say where the name came from (None where not set)."""

    job: str
    node: str
    host: str
    hpc_job: str | None = None  # SLURM_JOB_ID: dcgm-exporter's HPC job mapping's label
    run_id: str | None = None  # torchrun's run id (--rdzv-id, TORCHELASTIC_RUN_ID)
    pod: str | None = None
    namespace: str | None = None


def identify(
    command: Sequence[str],
    env: Mapping[str, str] | None = None,
    job: str | None = None,
    node: str | None = None,
    host: str | None = None,
) -> JobIdentity:
    """The job's identity for a monitor of ``command`` in ``env`` (os.environ by default).

    The job's name: ``job`` (``--job NAME``) where given; else the script's name with the
    launcher's or scheduler's id after it: torchrun's run id (its ``--rdzv-id`` or
    ``TORCHELASTIC_RUN_ID``, the same on every node of one job), else ``SLURM_JOB_ID``; else
    the script's name alone. This node: ``node`` where given, else the node's index in the
    Slurm step (``SLURM_NODEID``) or torchrun's ``--node-rank``, else its host name."""
    env = os.environ if env is None else env
    host = host or socket.gethostname()
    run_id = _option(command, "--rdzv-id", "--rdzv_id") or env.get("TORCHELASTIC_RUN_ID")
    hpc_job = env.get("SLURM_JOB_ID") or None
    if not job:
        script = _script(command)
        scheduled = run_id or hpc_job
        job = f"{script}-{scheduled}" if scheduled else script
    node = node or env.get("SLURM_NODEID") or _option(command, "--node-rank", "--node_rank") or host
    pod, namespace = _kubernetes(env)
    return JobIdentity(job, node, host, hpc_job, run_id, pod, namespace)


def _script(command: Sequence[str]) -> str:
    """``resnet`` for ``python resnet.py``, else the command's name."""
    return next(
        (Path(arg).stem for arg in command if arg.endswith(".py")),
        Path(command[0]).name if command else "job",
    )


def _kubernetes(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The pod and its namespace where the monitor runs in one (KUBERNETES_SERVICE_HOST is set
    in every pod): POD_NAME / POD_NAMESPACE from the downward API where the pod spec gives
    them, else the pod's host name and the service account's namespace file."""
    if not env.get("KUBERNETES_SERVICE_HOST"):
        return None, None
    pod = env.get("POD_NAME") or env.get("HOSTNAME") or None
    namespace = env.get("POD_NAMESPACE")
    if not namespace:
        try:
            namespace = K8S_NAMESPACE_FILE.read_text().strip() or None
        except OSError:
            namespace = None
    return pod, namespace


def _option(command: Sequence[str], *names: str) -> str | None:
    """The value of the first of ``names`` given as ``--name VALUE`` or ``--name=VALUE``."""
    for index, arg in enumerate(command):
        for name in names:
            if arg == name and index + 1 < len(command):
                return command[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None

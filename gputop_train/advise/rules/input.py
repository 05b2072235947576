"""Input rules: the step waits for data (more workers, a cheaper pipeline, a busy training
process, idle workers) or copies its batches from pageable memory."""

from __future__ import annotations

from ... import format as fmt
from ...session.stats import Observation
from .finding import Change, Finding
from .loaders import (
    cores_evidence,
    cores_left,
    loaders_starved,
    loading_waits_elsewhere,
    main_process_limits,
    main_starved,
    one_worker_per_core,
    others_hold_cores,
    waiting_workers,
    within_knob,
    worker_evidence,
    workers_busy,
    workers_idle,
)
from .window import (
    gpu_activity,
    input_bound,
    main_evidence,
    site_evidence,
    wait_evidence,
    wait_pct,
)

# Pageable host-to-device copies: the playbook's rung 2 on the reference GPU took pinned memory
# from 1,408 to 1,806 img/s (+28%) on 19 MiB batches; batches under 1 MB copy in microseconds.
PAGEABLE_MIN_BYTES = 1_000_000
PINNED_GAIN = 1.3


def _waiter(o: Observation) -> str:
    """Who waits for data: the GPU, where the job uses one; else the training step."""
    return "the GPU waits for data" if o.uses_gpu else "the step waits for data"


def _image_batches(o: Observation) -> bool:
    """Batches of images (N, C, H, W) with 1, 3 or 4 channels: uint8 advice fits them."""
    shape = o.batch_shape
    return shape is not None and len(shape) == 4 and shape[1] in (1, 3, 4)


def _float_batches(o: Observation) -> bool:
    return bool(o.batch_dtype) and "float" in (o.batch_dtype or "")


def _input_gain(o: Observation) -> float:
    """Removing the wait shortens the step by the wait: at best 1 / (1 - share)."""
    share = min(0.95, wait_pct(o) / 100.0)
    return 1.0 / (1.0 - share)


def _loader_line(o: Observation) -> tuple[str, ...]:
    """Where the script constructs its DataLoader: the line each input edit changes."""
    return site_evidence(o.loader_site, "the DataLoader's construction")


def _batch_evidence(o: Observation) -> str:
    return (
        f"batches are {o.batch_dtype} {list(o.batch_shape or ())} "
        f"({fmt.size(o.batch_bytes)} each; hook)"
    )


def more_workers(o: Observation) -> Finding | None:
    """More workers pay while a core is idle and the workers, not the training process, are
    the limit: busy ones, or none at all. With none, the training process may already load
    on every core with torch's intra-op threads: on the 2-core CI box 0 workers ran the CPU
    image pipeline faster (877 samples/s) than 1, 2 or 3 workers (609-807)."""
    if not input_bound(o) or workers_idle(o) or main_process_limits(o):
        return None
    waits = loading_waits_elsewhere(o)
    if cores_left(o) is False and not waits:
        return None
    cores = int(o.room_per_rank or 2 / o.local_ranks)  # each rank's loader's share
    current = o.workers or 0
    evidence = [wait_evidence(o), worker_evidence(o), cores_evidence(o)]
    if waits:  # the loaders wait, they do not compute: overlap the waits
        suggested = waiting_workers(o)
        evidence.append(
            "the loading waits on something other than the job's CPU (storage, network, a "
            "sleep): workers overlap those waits and need no core each"
        )
    elif not current:
        # The training process does the loading: workers take it off the step (the
        # playbook's rung 1: 8 workers on 16 cores), one core left for the training process.
        suggested = max(1, min(cores - 1, max(2, cores // 2)))
    else:  # one per free core (the training process's use is counted in them already)
        free = o.free_per_rank
        added = max(1, round(free)) if free is not None else current  # unknown: double
        suggested = min(cores, current + added)
    suggested = within_knob(o, suggested)
    if suggested <= current:
        return None
    wait_gain = _input_gain(o)
    gain = wait_gain if not current else min(wait_gain, suggested / current)
    busy = workers_busy(o) or not current or waits
    evidence += [gpu_activity(o)[1], *_loader_line(o)]
    return Finding(
        "input.more_workers",
        f"Input-bound: {_waiter(o)}",
        tuple(evidence),
        f"raise DataLoader num_workers to {suggested}",
        f"up to {gain:.1f}x",
        0.8 if busy else 0.5,
        gain,
        changes=(Change("workers", suggested),),
    )


def input_saturated(o: Observation) -> Finding | None:
    """No core left while the step waits for data: the input pipeline itself must get
    cheaper. Each worker may show little CPU when there are more of them than cores (8 on
    the 2-core CI box read 20% each): the machine, not the worker count, is the limit then.
    With no workers, the training process's own threads hold the cores: workers might still
    use them better, so no claim is made about them."""
    if not (input_bound(o) and cores_left(o) is False) or loading_waits_elsewhere(o):
        return None  # loaders that wait get more workers (more_workers, idle_workers)
    evidence = [wait_evidence(o), worker_evidence(o), cores_evidence(o)]
    # Other processes hold the cores, the job's loaders busy on what they get: the shared
    # machine is the limit, and more workers would only take CPU from the others.
    starved = others_hold_cores(o) and loaders_starved(o)
    shared = others_hold_cores(o) and (starved or not one_worker_per_core(o))
    # Starved workers fewer than the cores: one per core spreads the job's share of the CPU
    # over every core, more than that only splits it (on the 2-core dev box beside 2 hogs,
    # 1 -> 3 workers ran 1.22x, 2 -> 3 ran 0.81x: docs/advisor.md).
    per_core = _starved_per_core(o) if starved else None
    if per_core is not None and not o.workers:
        no_workers = (
            "; with the cores as they are, one worker per core beside the training process "
            f"at most: num_workers {per_core} (more than one per core will not help)"
        )
    elif per_core is not None:
        no_workers = (
            f"; with the cores as they are, one worker per core at most: num_workers "
            f"{per_core} (more than one per core will not help)"
        )
    elif o.workers and (starved or not shared):
        no_workers = "; more workers will not help: no core is free to the job"
    else:
        no_workers = ""
    if o.uses_gpu and _image_batches(o):
        # Preprocessing on the GPU frees the cores of all the per-sample work; uint8 only of
        # the float conversion: with every core augmenting on the H200 box, GPU preprocessing
        # ran 4.1x faster (docs/diagnosis.md). uint8 is the fallback where nothing carries it.
        evidence += [_batch_evidence(o), gpu_activity(o)[1]]
        finding_id = "input.gpu_preprocessing"
        title = "Input-bound: every core is busy preprocessing, and the GPU idles"
        action = (
            "move the preprocessing (decode, resize, augmentation) to the GPU and ship the "
            "smallest uint8 images you can"
            + (" (at least: uint8 batches, normalized on the GPU)" if _float_batches(o) else "")
            + no_workers
        )
        changes: tuple[Change, ...] = (Change("input_format", "gpu"),)
        if _float_batches(o):
            changes += (Change("input_format", "uint8"),)
    elif _image_batches(o) and _float_batches(o):  # a CPU job
        evidence.append(_batch_evidence(o))
        finding_id, title = "input.uint8", "Input-bound: every core is busy building float batches"
        action = (
            "send uint8 images (PILToTensor) and convert + normalize a whole batch at once in "
            f"the training step: a quarter of the bytes to build{no_workers}"
        )
        changes = (Change("input_format", "uint8"),)
    else:
        finding_id, title = "input.cpu_bound", "Input-bound: every core is busy preparing data"
        action = (
            "make each sample cheaper to prepare (cache decoded or tokenized samples, simpler "
            "transforms)"
            + ("" if not o.uses_gpu else ", or move the preprocessing to the GPU")
            + no_workers
        )
        changes = ()
    if shared:
        title = "Input-bound: other processes hold the cores the input needs"
        action = (
            f"give the job cores of its own: other processes use {o.others_cores or 0:.1f} "
            f"cores (stop or move them; a cpuset or taskset for the job); or {action}"
        )
    if per_core is not None:
        changes = (Change("workers", per_core), *changes)
    gain = _input_gain(o)
    expected = f"up to {gain:.1f}x"
    if shared and starved:
        gain = _cores_of_its_own_gain(o)
        expected = f"at least {gain:.1f}x"
    ruled_out = o.workers and per_core is None and (starved or not shared)
    return Finding(
        finding_id,
        title,
        (*evidence, *_loader_line(o)),
        action,
        expected,
        0.7,
        gain,
        changes=changes,
        rules_out=("workers",) if ruled_out else (),
    )


def _cores_of_its_own_gain(o: Observation) -> float:
    """What cores of its own give a job whose starved loaders (its workers, else the training
    process) wait for a CPU, at the least: the input then runs (CPU + run-queue wait) / CPU
    times faster, and the step loses at most its wait, so the step gains at least the smaller
    of the two (the training process, starved too, only adds to it). Measured: 2 starved
    workers beside 2 hogs on the 2-core dev box, told "at least 2.5x" by this rule's inputs,
    ran 19.8x (1.17 -> 23.3 steps/s) once the hogs went (2026-11-27 16:36 UTC,
    docs/advisor.md): each hand-off between the job's processes waits for a CPU too, which no
    share of the CPU counts. A loader with no workers: docs/advisor.md, issue 46."""
    if o.workers:
        cpu, wait = o.worker_cpu_pct or 0.0, o.worker_run_wait_pct or 0.0
    else:
        cpu, wait = o.main_cpu_pct or 0.0, o.main_run_wait_pct or 0.0
    faster = (cpu + wait) / cpu if cpu > 0 else _input_gain(o)
    return min(_input_gain(o), faster)


def _starved_per_core(o: Observation) -> int | None:
    """One starved worker per core of the rank's share, where that is more than it has; with
    none, one per core beside the training process's (issue 46: beside 2 hogs on the 2-core
    dev box, 0 -> 1 worker measured 1.09x and 1.36x, 0 -> 4 workers 0.60x and 0.99x); within
    the workers knob's range."""
    room = o.room_per_rank
    if room is None:
        return None
    if not o.workers:
        per_core = within_knob(o, int(room) - 1) if main_starved(o) else 0
        return per_core if per_core >= 1 else None
    per_core = within_knob(o, int(room))
    return per_core if per_core > o.workers else None


def main_process_bound(o: Observation) -> Finding | None:
    """The workers are ahead; the training process cannot take their batches any faster."""
    if not (input_bound(o) and main_process_limits(o)):
        return None
    evidence = [
        wait_evidence(o),
        main_evidence(o),
        f"{o.workers} workers at {fmt.pct(o.worker_cpu_pct)} CPU each: they wait for the "
        f"training process (psutil)",
        cores_evidence(o),
    ]
    if o.batch_bytes:
        evidence.append(_batch_evidence(o) + (", pinned" if o.pin_memory else ""))
    if o.uses_gpu and _image_batches(o):
        # Fewer bytes per batch for the training process to unpack, pin and copy: uint8
        # (a quarter of float32), then small images resized on the GPU. On the H200 the demo
        # at batch 128 went from float to uint8 at 1.51x and was then held here again.
        action = (
            "fewer bytes per batch for the training process to unpack, pin and copy: "
            + ("uint8 images normalized on the GPU, then " if _float_batches(o) else "")
            + "the smallest images you can, resized on the GPU; more workers add little: "
            "they wait for the training process"
        )
        changes: tuple[Change, ...] = (Change("input_format", "gpu"),)
        if _float_batches(o):
            changes = (Change("input_format", "uint8"), *changes)
    else:
        action = (
            "cut what the training process does per batch: fewer bytes per batch (smaller "
            "dtypes), collate in the workers (a batched Dataset with batch_size=None), no "
            "per-batch Python work in the loop; more workers add little: they wait for it"
        )
        changes = ()
    gain = _input_gain(o)
    return Finding(
        "input.main_process",
        "Input-bound in the training process: it cannot take batches as fast as the workers "
        "make them",
        (*evidence, *_loader_line(o)),
        action,
        f"up to {gain:.1f}x",
        0.7,
        gain,
        changes=changes,
        # No "will not help" for workers: they wait, yet doubling them gained 1.07x on the
        # H200 (2026-11-23) and 1.08-1.10x on the H100 (2026-11-25, diagnosis scenario
        # main_process_bound): more batches in flight overlap the training process's unpacking.
        # Little, not nothing: the claim would be contradicted at the scorecard's 10%.
    )


def idle_workers(o: Observation) -> Finding | None:
    """The step waits for data while the workers idle: their compute is not the cause."""
    if not (input_bound(o) and workers_idle(o)) or main_process_limits(o):
        return None
    if cores_left(o) is False and not others_hold_cores(o):
        return None  # the job's own work saturates its cores (input_saturated)
    restarts = o.persistent_workers is False and o.epochs >= 2
    suggested = waiting_workers(o)
    more = suggested > (o.workers or 0)  # else the workers knob stops where they are
    if restarts:
        action = (
            "set persistent_workers=True (and keep one DataLoader): the workers are started "
            f"anew at every epoch ({o.epochs} epochs in {o.window_s or 0:.0f} s), and the step "
            "waits for their first batches"
        )
    else:
        # Workers that wait (storage, network, a sleep) deliver more batches by number; what
        # is not their wait shows between batches.
        between = (
            "look at what happens between batches: a DataLoader re-created per step, "
            "collation or copies in the training process (py-spy dump shows where it waits)"
        )
        action = (
            f"raise DataLoader num_workers to {suggested}: each worker waits on something "
            f"other than its CPU (storage, network), and more of them overlap the waits; else "
            f"{between}"
            if more
            else between
        )
    gain = _input_gain(o)
    return Finding(
        "input.idle_workers",
        "Input-bound, yet the workers are mostly idle",
        (
            wait_evidence(o),
            worker_evidence(o),
            cores_evidence(o),
            gpu_activity(o)[1],
            *_loader_line(o),
        ),
        action,
        f"up to {gain:.1f}x",
        0.6 if restarts else 0.4,
        gain,
        changes=(Change("persistent_workers", True),)
        if restarts
        else (Change("workers", suggested),)
        if more
        else (),
    )


def pinned_copies(o: Observation) -> Finding | None:
    if o.pin_memory is not False or not o.uses_gpu or not o.batch_bytes:
        return None
    if o.batch_bytes < PAGEABLE_MIN_BYTES:
        return None
    evidence = [f"DataLoader pin_memory=False, {fmt.size(o.batch_bytes)} batches (hook)"]
    if o.pcie_rx_mibps is not None:
        evidence.append(f"PCIe RX {o.pcie_rx_mibps:.0f} MiB/s (NVML)")
    evidence += _loader_line(o)
    return Finding(
        "copies.pageable",
        "Host-to-device copies from pageable memory",
        tuple(evidence),
        "pin_memory=True in the DataLoader and .to(device, non_blocking=True)",
        f"up to {PINNED_GAIN:.1f}x",
        0.5,
        PINNED_GAIN,
        changes=(Change("pin_memory", True),),
    )

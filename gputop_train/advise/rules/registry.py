"""The registry: every rule in the order ``findings()`` runs them (a tie in score keeps it),
declared once, and the ranking of what fires."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...session.stats import Observation
from .. import stragglers
from .finding import Finding
from .gpu import gpu_bound, gpu_shared, gpu_throttled, larger_batch, launch_bound
from .input import idle_workers, input_saturated, main_process_bound, more_workers, pinned_copies
from .memory import memory_near_limit
from .model import (
    attention_sdpa,
    channels_last,
    compile_transformer,
    mixed_precision,
    optimizer_for_loop,
)
from .ranks import straggler
from .syncs import host_device_syncs, per_step_sync

RULES: tuple[Callable[[Observation], Finding | None], ...] = (
    straggler,
    gpu_shared,
    gpu_throttled,
    more_workers,
    input_saturated,
    main_process_bound,
    idle_workers,
    pinned_copies,
    host_device_syncs,
    larger_batch,
    mixed_precision,
    channels_last,
    launch_bound,
    memory_near_limit,
    gpu_bound,
    compile_transformer,
    attention_sdpa,
    optimizer_for_loop,
    per_step_sync,
)

# Findings that say the step is as it should be: no change of theirs is a speed-up to expect.
HEALTHY = ("gpu.bound", "gpu.memory_near_limit")


def findings(o: Observation | None) -> list[Finding]:
    """Every rule that fires, best first; empty with no observation (too few measured steps,
    or for a job without the hook, no window of py-spy samples)."""
    if o is None or (o.steps.steps == 0 and o.data_wait_source != "py-spy"):
        return []
    fired = [f for f in (rule(o) for rule in RULES) if f is not None]
    fired = [_seen_from_one_node(f, o) for f in fired]
    return stragglers.straggler_first(sorted(fired, key=lambda f: f.score, reverse=True), o)


# A node's monitor that sees some of a job's ranks cannot tell an input-bound job from a node
# whose input is a straggler: the other nodes' ranks may wait less. Its input findings say so
# and count for less (a weighting, not a measurement: the joined view is Prometheus's).
PARTIAL_VIEW_CONFIDENCE = 0.6


def _seen_from_one_node(finding: Finding, o: Observation) -> Finding:
    """An input finding of a monitor that sees fewer ranks than the job has, with that caveat."""
    seen = max(len(o.ranks), 1)
    if not finding.id.startswith("input.") or not o.world_size or o.world_size <= seen:
        return finding
    caveat = (
        f"this monitor sees {seen} of the job's {o.world_size} ranks (WORLD_SIZE; hook): "
        "the other nodes' ranks may wait less"
    )
    return replace(
        finding,
        evidence=(*finding.evidence, caveat),
        action=finding.action + "; first compare the other nodes' data-wait (Prometheus joins "
        "them; GputopTrainStraggler): where they wait less, this node's input is a straggler",
        confidence=finding.confidence * PARTIAL_VIEW_CONFIDENCE,
    )

"""When the probes run, by step: the model facts, the FLOP count with its operator census,
the kernel profile, and the sync scan's next due step; moved on by a knob change or a new
optimizer. Pure bookkeeping: the probes themselves are in probes.py, workload.py and
kernel_profile.py; the agent runs them at the steps this says."""

from __future__ import annotations

from .probes import (
    COUNT_AFTER_CHANGE_STEPS,
    FLOP_COUNT_STEP,
    MODEL_FACTS_STEP,
    PROBE_AFTER_CHANGE_STEPS,
    PROFILE_AFTER_CHANGE_STEPS,
    PROFILE_STEP,
    SYNC_SCAN_EVERY_STEPS,
    SyncScanner,
)


class ProbeSchedule:
    """The steps each probe is due at (the sync scan's own ``due`` reads ``syncs.due_at``);
    the agent compares ``count_step`` and ``profile_step`` inline at each step's start."""

    __slots__ = ("_syncs", "count_step", "model_step", "profile_step")

    def __init__(self, syncs: SyncScanner) -> None:
        self._syncs = syncs
        self.model_step = MODEL_FACTS_STEP
        self.count_step = FLOP_COUNT_STEP
        self.profile_step = PROFILE_STEP

    def model_due(self, step: int) -> bool:
        """The precision facts: on the probe's step and as often as the periodic sync scan."""
        return step == self.model_step or step % SYNC_SCAN_EVERY_STEPS == 0

    def after_knob_change(self, step: int) -> None:
        """A knob applied after ``step``: the facts, a sync scan, the FLOPs and operators
        (batch, attention, compile) and the kernels are read again a few steps on."""
        self.model_step = step + PROBE_AFTER_CHANGE_STEPS
        self._syncs.due_at = self.model_step
        self.count_step = step + COUNT_AFTER_CHANGE_STEPS
        self.profile_step = step + PROFILE_AFTER_CHANGE_STEPS

    def after_new_optimizer(self, step: int) -> None:
        """The loop moved to a new optimizer (a sweep's trial): its model may differ, so its
        facts and FLOPs are read again."""
        self.model_step = step + PROBE_AFTER_CHANGE_STEPS
        self.count_step = step + COUNT_AFTER_CHANGE_STEPS

"""Occasional in-process probes: host-device sync sites, FLOPs per sample for MFU, and the
precision and layout the step runs in.

Each probe covers exactly one training step (from its first batch to its optimizer step),
on sampled steps only, so its cost stays off the common path.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from typing import Any

from .. import wire
from .code_sites import code_site, torch_dir, user_line

# One scanned step early on, then one every this many: warn mode slows every sync while on.
# Step 5, not later: a 40-step gradient-accumulation run on the H100 finished in 4 s and its
# .item() per micro-batch went unseen with a first scan at step 50 (issue: diagnosis).
FIRST_SYNC_SCAN_STEP = 5
SYNC_SCAN_EVERY_STEPS = 500
# A knob change can add or remove syncs or change the precision: probe again this many steps
# after it (the first full step in the new configuration, past its first-step compile).
PROBE_AFTER_CHANGE_STEPS = 3
# The forward pass's facts: on an early step, then as often as the sync scan.
MODEL_FACTS_STEP = 2
# Count FLOPs (and the workload census) on this step: after start-up, before most runs
# would compile; again after each knob change (a batch or attention change moves them).
FLOP_COUNT_STEP = 3
# Profile one step's kernels on this step (not the count's: the census's dispatch mode would
# run a compiled model's step differently; not the sync scan's).
PROFILE_STEP = 4
# After a knob change: count on the second step (the first may compile), profile on the
# fourth (the third is the sync scan's). Both stay inside the phase's warm-up (its first
# 5 steps, docs/phases.md), so a trial's measured steps never carry a probe.
COUNT_AFTER_CHANGE_STEPS = 2
PROFILE_AFTER_CHANGE_STEPS = 4
_SYNC_WARNING = "synchroniz"  # "called a synchronizing CUDA operation"


class SyncScanner:
    """Counts synchronizing CUDA ops during one step, with the file:line that called each.

    ``torch.cuda.set_sync_debug_mode("warn")`` makes PyTorch issue a warning at every
    synchronizing op, attributed to the Python caller; we collect those warnings instead of
    printing them, and pass every other warning through untouched.
    """

    def __init__(self, torch_module: Any) -> None:
        self._cuda = torch_module.cuda
        self._torch_dir = torch_dir(torch_module)
        self.requested = False
        self.due_at = FIRST_SYNC_SCAN_STEP  # moved on by a knob change
        self.active = False
        self._sites: Counter[tuple[str, int]] = Counter()
        self._saved_showwarning: Any = None

    def due(self, step: int) -> bool:
        periodic = step > 0 and step % SYNC_SCAN_EVERY_STEPS == 0
        return self.requested or step in (FIRST_SYNC_SCAN_STEP, self.due_at) or periodic

    def start(self) -> None:
        self.requested = False
        self.active = True
        self._sites.clear()
        self._saved_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning
        warnings.filterwarnings("always", message=f".*{_SYNC_WARNING}")
        self._cuda.set_sync_debug_mode("warn")

    def stop(self, step: int | None = None) -> wire.Syncs:
        """The scan of ``step``: its sync count and its ten most frequent call sites."""
        self._cuda.set_sync_debug_mode("default")
        warnings.showwarning = self._saved_showwarning
        self.active = False
        sites = [
            wire.SyncSite(**code_site(filename, lineno), count=count)
            for (filename, lineno), count in self._sites.most_common(10)
        ]
        return wire.Syncs(count=sum(self._sites.values()), sites=sites, step=step)

    def _showwarning(
        self,
        message: Any,
        category: Any,
        filename: str,
        lineno: int,
        file: Any = None,
        line: Any = None,
    ) -> None:
        if _SYNC_WARNING not in str(message):
            self._saved_showwarning(message, category, filename, lineno, file, line)
            return
        site = self._user_frame()
        if site is not None:  # None: our own call to set_sync_debug_mode
            self._sites[site] += 1

    def _user_frame(self) -> tuple[str, int] | None:
        """The user's line that made the sync (code_sites.user_line), from past this
        function and the warnings machinery's call into it."""
        return user_line(sys._getframe(2), self._torch_dir)


class FlopCounter:
    """FLOPs of one whole step (forward, backward, optimizer) via FlopCounterMode."""

    def __init__(self) -> None:
        self._mode: Any = None

    def start(self) -> None:
        from torch.utils.flop_counter import FlopCounterMode

        self._mode = FlopCounterMode(display=False)
        self._mode.__enter__()

    def stop(self) -> int | None:
        mode, self._mode = self._mode, None
        if mode is None:
            return None
        mode.__exit__(None, None, None)
        return int(mode.get_total_flops())

    @property
    def active(self) -> bool:
        return self._mode is not None


def model_facts(
    torch_module: Any, optimizer: Any, autocast_dtype: str | None, step: int | None = None
) -> wire.Model:
    """What the step ran in: the advisor's precision facts (docs/advisor.md).

    ``autocast_dtype`` is the dtype of the autocast the step entered, if any. A compiled
    function may enter autocast inside its graph, where no ``__enter__`` runs: there an
    autocast not seen is unknown (None), elsewhere it is "off".
    """
    cuda = torch_module.cuda.is_initialized()
    compiled = _dynamo_compiled()
    param = _first_float_param(optimizer)
    # The optimizer's class and implementation: ``foreach=False`` (one kernel per parameter
    # and op), foreach (the default on CUDA: a few kernels per op over all parameters) or fused.
    defaults = getattr(optimizer, "defaults", None) or {}
    return wire.Model(
        step=step,
        cuda=cuda,
        capability=list(torch_module.cuda.get_device_capability()) if cuda else None,
        device_uuid=_device_uuid(torch_module, param) if cuda else None,
        autocast=autocast_dtype or (None if compiled else "off"),
        param_dtype=str(param.dtype).removeprefix("torch.") if param is not None else None,
        tf32_matmul=float32_matmul_precision(torch_module) != "highest",
        matmul_precision=float32_matmul_precision(torch_module),
        tf32_cudnn=bool(torch_module.backends.cudnn.allow_tf32),
        channels_last=_channels_last(torch_module, optimizer),
        compiled=compiled,
        optimizer=type(optimizer).__name__,
        optimizer_foreach=defaults.get("foreach") if "foreach" in defaults else None,
        optimizer_fused=defaults.get("fused") if "fused" in defaults else None,
    )


def force_eager(torch_module: Any) -> Any:
    """Run compiled code eagerly for the counted step; the callable that restores the stance.

    Under a dispatch mode (FlopCounterMode, the census) dynamo skips the compiled frame, and
    on torch 2.11 it then kept running the model eagerly: the GPT ladder's compile rung on the
    H100 ran the eager kernels after a count taken two steps after compiling (760 kernels,
    47.5 ms, as before the change). ``torch.compiler.set_stance("force_eager")`` runs the step
    eagerly without touching dynamo's caches. None where nothing is compiled; raises
    RuntimeError where torch has no stance to set (then no count is taken).
    """
    if not _dynamo_compiled():
        return None
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    compiler: Any = getattr(torch_module, "compiler", None)
    previous = getattr(eval_frame, "_stance", None)
    if previous is None or not hasattr(compiler, "set_stance"):
        raise RuntimeError("compiled model and no torch.compiler.set_stance: FLOPs not counted")
    compiler.set_stance("force_eager")

    def restore() -> None:
        try:
            compiler.set_stance(
                previous.stance,
                skip_guard_eval_unsafe=previous.skip_guard_eval_unsafe,
                force_backend=previous.backend,
            )
        except TypeError:  # a torch whose set_stance takes the stance alone
            compiler.set_stance(previous.stance)

    return restore


def float32_matmul_precision(torch_module: Any) -> str:
    """``torch.get_float32_matmul_precision()``, which raises in torch 2.11 once a script has
    mixed it with the new per-backend API (the Hugging Face Trainer's ``tf32=True`` does:
    that disabled the whole hook on the H100, 2026-11-24); then the new API's CUDA setting."""
    try:
        return str(torch_module.get_float32_matmul_precision())
    except RuntimeError:
        setting = torch_module.backends.cuda.matmul.fp32_precision
        return "high" if setting == "tf32" else "highest"


def set_float32_matmul_precision(torch_module: Any, value: str) -> None:
    """The legacy setter, or the per-backend one where the legacy API refuses."""
    try:
        torch_module.set_float32_matmul_precision(value)
    except RuntimeError:
        torch_module.backends.cuda.matmul.fp32_precision = "ieee" if value == "highest" else "tf32"


def _dynamo_compiled() -> bool:
    """Whether torch.compile made any graph in this process (dynamo is never imported here)."""
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    if dynamo_utils is None:
        return False
    return bool(dynamo_utils.counters["stats"].get("unique_graphs"))


def _params(optimizer: Any) -> Any:
    for group in getattr(optimizer, "param_groups", ()):
        yield from group.get("params", ())


def _device_uuid(torch_module: Any, param: Any) -> str | None:
    """The UUID of the GPU the trained parameters are on, as NVML spells it ("GPU-..."): the
    monitor maps it to NVML's index whatever CUDA_VISIBLE_DEVICES renumbered (issue 37)."""
    device = getattr(param, "device", None)
    if device is None or device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch_module.cuda.current_device()
    uuid = getattr(torch_module.cuda.get_device_properties(index), "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)  # 8-4-4-4-12 hex; NVML's has "GPU-" before it
    return text if text.upper().startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def _first_float_param(optimizer: Any) -> Any:
    return next((p for p in _params(optimizer) if p.dtype.is_floating_point), None)


def _channels_last(torch_module: Any, optimizer: Any) -> bool | None:
    """The layout of the first convolution weight (4-D parameter); None without one."""
    weight = next((p for p in _params(optimizer) if p.dim() == 4), None)
    if weight is None:
        return None
    layout = torch_module.channels_last
    return bool(weight.is_contiguous(memory_format=layout) and not weight.is_contiguous())

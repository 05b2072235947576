"""What the GPU memory holds: the trained parameters, their gradients, the optimizer's state,
and the allocator's peaks, retries and OOMs; the rest of the peak is activations and
temporaries. Sizes are read from tensor metadata (numel x element size): no sync.
"""

from __future__ import annotations

from typing import Any

from .. import wire
from .forward_probe import optimizer_params

# The allocator's statistics are read every AUDIT_PERIOD_S: one call, the peaks and retries
# move from step to step.
AUDIT_PERIOD_S = 5.0
# The tensors' sizes (parameters, gradients, optimizer state) change only with a knob, a new
# optimizer or a layer (un)frozen: walked again after the first two (``forget_sizes``) and at
# least once in this many seconds for the last. A GPT-2-sized walk (148 parameters, their
# AdamW state) took ~0.3 ms on the dev box (2026-11-24): one step in 5 s is no longer held up.
SIZES_PERIOD_S = 60.0
# The first audit waits for the optimizer's state, which its first step allocates.
FIRST_AUDIT_STEP = 3


def allocator_now(cuda: Any) -> tuple[int | None, int | None, int | None]:
    """Allocated, reserved and peak allocated bytes now. From the allocator's nested stats:
    ``memory_stats()`` flattens the same ~100 entries in Python, 243 against 57 µs a read
    inside the H100's 2 ms loop (2026-11-25, docs/benchmarks.md §13)."""
    stats = cuda.memory_stats_as_nested_dict()
    allocated = stats.get("allocated_bytes", {}).get("all", {})
    reserved = stats.get("reserved_bytes", {}).get("all", {})
    return allocated.get("current"), reserved.get("current"), allocated.get("peak")


class MemoryAudit:
    """The audit of one training process, due every AUDIT_PERIOD_S from FIRST_AUDIT_STEP."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._next = 0.0
        self._steps = 0
        self._total: int | None = None
        self._sizes: tuple[int, int, int] | None = None  # params, grads, optimizer state
        self._sizes_until = 0.0

    def forget_sizes(self) -> None:
        """A knob changed or another optimizer took over: the sizes are walked again."""
        self._sizes = None

    def due(
        self, now: float, optimizer: Any, cuda: bool, step: int | None = None
    ) -> wire.MemoryAudit | None:
        """The audit of ``step`` when one is due (CUDA in use), else None."""
        self._steps += 1
        if not cuda or self._steps < FIRST_AUDIT_STEP or now < self._next:
            return None
        self._next = now + AUDIT_PERIOD_S
        if now >= self._sizes_until:
            self._sizes, self._sizes_until = None, now + SIZES_PERIOD_S
        return self.audit(optimizer, step)

    def audit(self, optimizer: Any, step: int | None = None) -> wire.MemoryAudit:
        if self._sizes is None:
            self._sizes = _sizes(optimizer)
        params_bytes, grads_bytes, optimizer_bytes = self._sizes
        stats = self._torch.cuda.memory_stats()
        if self._total is None:
            device = self._torch.cuda.current_device()
            self._total = int(self._torch.cuda.get_device_properties(device).total_memory)
        return wire.MemoryAudit(
            step=step,
            params_bytes=params_bytes,
            grads_bytes=grads_bytes,
            optimizer_bytes=optimizer_bytes,
            allocated_peak=stats.get("allocated_bytes.all.peak"),
            reserved_peak=stats.get("reserved_bytes.all.peak"),
            allocated=stats.get("allocated_bytes.all.current"),
            reserved=stats.get("reserved_bytes.all.current"),
            alloc_retries=stats.get("num_alloc_retries"),
            ooms=stats.get("num_ooms"),
            device_total=self._total,
        )


def _sizes(optimizer: Any) -> tuple[int, int, int]:
    """Bytes on the GPU of the optimizer's parameters, their gradients and its state."""
    params = [p for p in _unique(optimizer_params(optimizer)) if p.is_cuda]
    grads = [p.grad for p in params if p.grad is not None]
    state = [
        value
        for per_param in getattr(optimizer, "state", {}).values()
        if isinstance(per_param, dict)
        for value in per_param.values()
        if getattr(value, "is_cuda", False)
    ]
    return _bytes(params), _bytes(grads), _bytes(state)


def _unique(tensors: list[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for tensor in tensors:
        seen.setdefault(id(tensor), tensor)
    return list(seen.values())


def _bytes(tensors: list[Any]) -> int:
    """What the tensors hold on this GPU: a DTensor's (FSDP2) local shard, not its global
    shape."""
    return sum(int(t.numel()) * int(t.element_size()) for t in map(_local, tensors))


def _local(tensor: Any) -> Any:
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) and hasattr(tensor, "placements") else tensor

"""The model's side of a step: its training forwards (samples, tokens), the backward they
start, and the marks of the step breakdown. Hooks on the top-level module only (forward
pre/post, a gradient hook on its outputs, a callback at the backward's end) and the
optimizer's global step pre-hook: no sync, nothing inside a compiled graph.

Whatever cannot be measured says why once (``reason``, sent in the ``step_parts`` fact)
and reads N/A; it never guesses (docs/steps.md, "When a figure is N/A").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import forward_probe
from .step_parts import (
    BWD_END,
    BWD_START,
    EMPTY_ROW,
    FWD_END,
    FWD_START,
    OPT_START,
    PendingStep,
    StepTimeline,
)

# Output tensors looked at for the backward's start: a model returns logits and a loss, or
# a dict of a few.
_MAX_OUTPUT_TENSORS = 8
# Steps split on the GPU's clock (CUDA events at each mark): one in this many. A window of
# a fast loop still holds hundreds, and the seven events and six elapsed-time reads of a
# split step cost a quarter as much. A 2 ms H100 loop read +23-25% with every step split
# (hook_overhead.py tiny and gpt, 2026-11-24, docs/benchmarks.md).
GPU_SPLIT_EVERY = 4
# The step columns ``ModelProbe.row`` fills, in its order (wire.STEP_FIELDS names them).
MODEL_COLUMNS = (
    "tokens",
    "host_gap_ms",
    "part_data_ms",
    "part_fwd_ms",
    "part_bwd_ms",
    "part_opt_ms",
    "part_rest_ms",
    "part_clock",
)


@dataclass
class StepCounts:
    """What one step's training forwards received, and its marks."""

    samples: int | None
    tokens: int | None  # known now (CPU masks, no mask); else read when the step's GPU work ran
    masks: forward_probe.MaskCounts | None
    parts: PendingStep


class ModelProbe:
    """Hooks the model once found; one per training process, driven by the agent."""

    def __init__(
        self,
        torch_module: Any,
        guard: Callable[[Callable[[], None]], None],
        fail: Callable[[BaseException], None],
        enabled: Callable[[], bool],
    ) -> None:
        self._torch = torch_module
        self._guard = guard  # runs a callback; an internal error disables the agent
        self._fail = fail  # disables the agent, said once
        self._enabled = enabled
        # Traced by torch.compile (the compile knob compiles the model's call in place, its
        # hooks with it): our hooks then do nothing, so they add no graph break.
        compiler = getattr(torch_module, "compiler", None)
        self._compiling: Callable[[], bool] = getattr(compiler, "is_compiling", lambda: False)
        self.timeline = StepTimeline(torch_module)
        self.searched = False
        self.model: str | None = None  # the hooked module, described
        self.reason: str | None = None  # why samples/tokens/phases are N/A, when they are
        self._handles: list[Any] = []
        self._thread: int | None = None
        self._depth = 0
        self._training_call = False
        self._several_optimizers = False
        self._new_reason = False
        self._steps = 0
        self._reset_counts()

    def _reset_counts(self) -> None:
        self._samples: int | None = None
        self._tokens: int | None = None
        self._masks: forward_probe.MaskCounts | None = None
        self._no_tokens = False  # a training forward of the step had no token ids

    # -- set-up (training thread, at the first optimizer step) --------------------------

    def search(self, optimizer: Any, frame: Any) -> None:
        """Find the model from the loop's frames and hook it; once per process."""
        self.searched = True
        self._thread = threading.get_ident()
        modules, reason = forward_probe.find_model(self._torch, optimizer, frame)
        if reason is not None:
            self._set_reason(reason)
            return
        module = modules[0]
        self.model = forward_probe.describe_module(module)
        self._new_reason = True
        self._handles = [
            module.register_forward_pre_hook(self._pre_forward, with_kwargs=True),
            # Not always_call (5 us a call more, dev box): a forward that raised is forgotten
            # at the step's end instead (end_step resets the depth).
            module.register_forward_hook(self._post_forward, with_kwargs=True),
        ]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _set_reason(self, reason: str) -> None:
        if self.reason is None:
            self.reason, self._new_reason = reason, True

    def take_fact(self) -> dict[str, Any] | None:
        """The ``step_parts`` fact when the model or the reason changed, else None."""
        if not self._new_reason:
            return None
        self._new_reason = False
        return {"model": self.model, "reason": self.reason}

    # -- events ---------------------------------------------------------------------------

    def on_other_optimizer(self) -> None:
        """A second optimizer steps on the training thread (a GAN, a separate head): its
        model's work falls between this model's phases and its forwards are not ours."""
        if not self._several_optimizers:
            self._several_optimizers = True
            self._set_reason(
                "several optimizers step each iteration: one model's forward inputs and "
                "phases are not the step's"
            )

    def on_optimizer_pre_step(self) -> None:
        self.timeline.mark(OPT_START)

    def end_step(self, cuda: bool) -> StepCounts:
        """The step's counts and marks; what the step's forwards received resets. With
        CUDA in use, one step in GPU_SPLIT_EVERY is split on the GPU's clock."""
        self._depth, self._training_call = 0, False
        self._steps += 1
        parts = self.timeline.end_step(cuda and self._steps % GPU_SPLIT_EVERY == 0)
        usable = self.model is not None and not self._several_optimizers
        counts = StepCounts(
            samples=self._samples if usable else None,
            tokens=self._tokens if usable and not self._no_tokens else None,
            masks=self._masks if usable and not self._no_tokens else None,
            parts=parts,
        )
        self._reset_counts()
        return counts

    def row(self, counts: StepCounts, resolved: bool) -> list[Any]:
        """The step's added columns (wire.STEP_FIELDS from ``tokens`` on): tokens, host gap,
        the parts and their clock. ``resolved``: the step's GPU work has run, so its events
        and masks can be read; else the GPU figures read N/A."""
        if self._several_optimizers:
            return [None, None, *EMPTY_ROW]
        tokens = counts.tokens
        if counts.masks is not None:
            tokens = counts.masks.total() if resolved or not counts.masks.pending else None
        pending = counts.parts
        if pending.events is not None and not resolved:
            self.timeline.drop(pending)
            return [tokens, pending.host_gap_ms, *EMPTY_ROW]
        return [tokens, pending.host_gap_ms, *self.timeline.resolve(pending).row()]

    # -- module hooks (training thread; backward marks on autograd's thread) ----------

    def _pre_forward(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:  # inline, not through the guard: a forward runs several times a step
            self._forward_started(module, args, kwargs)
        except Exception as error:
            self._fail(error)

    def _post_forward(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        try:
            self._forward_ended(output)
        except Exception as error:
            self._fail(error)

    def _forward_started(self, module: Any, args: tuple[Any, ...], kwargs: Any) -> None:
        if self._compiling() or threading.get_ident() != self._thread or not self._enabled():
            return
        self._depth += 1
        if self._depth > 1:
            return  # the model calling itself: its outermost call is the forward
        self._training_call = bool(module.training and self._torch.is_grad_enabled())
        if not self._training_call:
            self.timeline.eval_forward = True  # evaluation: not the step's data or samples
            return
        self.timeline.mark(FWD_START)
        try:
            samples, tokens, mask = forward_probe.count_inputs(args, kwargs)
        except ValueError as error:
            self._set_reason(str(error))
            return
        self._samples = (self._samples or 0) + samples
        if tokens is None:
            self._no_tokens = True
            return
        self._tokens = (self._tokens or 0) + tokens
        if mask is not None:
            if self._masks is None:
                self._masks = forward_probe.MaskCounts()
            self._masks.add(mask)

    def _forward_ended(self, output: Any) -> None:
        if self._compiling() or threading.get_ident() != self._thread:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth > 0 or not self._training_call:
            return
        self._training_call = False
        self.timeline.mark(FWD_END)
        node = _backward_node(output)
        if node is not None:
            node.register_prehook(self._backward_started)

    def _backward_started(self, grad_outputs: Any) -> None:
        def started() -> None:
            self.timeline.mark(BWD_START)
            engine = self._torch.autograd.Variable._execution_engine
            engine.queue_callback(lambda: self._guard(lambda: self.timeline.mark(BWD_END)))

        self._guard(started)


def _backward_node(output: Any) -> Any:
    """Where the forward's backward begins: the autograd node of its loss (a 0-d output,
    as nanoGPT's and Hugging Face's models return one), else of its first output that has
    one. A prehook on a node costs a third of a tensor hook and a fifth of a multi-grad hook
    (dev box, 2026-11-24: ~20 vs 37 vs 100 us, loaded)."""
    first = None
    for tensor in _tensors(output):
        node = getattr(tensor, "grad_fn", None)
        if node is None:
            continue
        if tensor.dim() == 0:
            return node
        first = first or node
    return first


def _tensors(output: Any) -> list[Any]:
    """The tensors of a forward's output, one level down (a tuple, a dict, a ModelOutput)."""
    if hasattr(output, "grad_fn"):
        return [output]
    if isinstance(output, Mapping):
        values = list(output.values())
    elif isinstance(output, (list, tuple)):
        values = list(output)
    else:
        return []
    return [v for v in values[:_MAX_OUTPUT_TENSORS] if hasattr(v, "grad_fn")]

"""The model's side of a step: its training forwards (samples, tokens), the backward, and
the marks of the step breakdown. The top-level module's calls only (its class's
``__call__`` wrapped for it, model_call.py), the hook's ``torch.autograd.backward`` wrapper
(the backward's start and end) and the optimizer's global step pre-hook: no sync, nothing
inside a compiled graph. The
training thread only reads clocks and counts; the split is computed when a monitor reads
the step's row (``ModelColumns``).

Whatever cannot be measured says why once (``reason``, sent in the ``step_parts`` fact)
and reads N/A; it never guesses (docs/steps.md, "When a figure is N/A").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import wire
from . import forward_probe
from .model_call import CallWrap
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

# A CUDA step is split on the GPU's clock (CUDA events at each mark) at most once in this
# many seconds: every step of a loop of 50 ms steps or more, one in 25 of a 2 ms H100 loop.
# The same steps are the ones the step timer times (cuda_timer.py).
# A 2 ms H100 loop read +23-25% with every step split (hook_overhead.py tiny and gpt,
# 2026-11-24, docs/benchmarks.md); a window of 30 s still holds up to 600 split steps.
GPU_SPLIT_PERIOD_S = 0.05
# The step columns ``ModelProbe.row`` fills, in its order: the last of wire.STEP_COLUMNS,
# from ``tokens`` on.
MODEL_COLUMNS = wire.STEP_FIELDS[wire.COLUMN["tokens"] :]


@dataclass
class StepCounts:
    """What one step's training forwards received, and its marks."""

    samples: int | None
    tokens: int | None  # known now (CPU masks, no mask); else read when the step's GPU work ran
    masks: forward_probe.MaskCounts | None
    parts: PendingStep
    gpu_next: bool = False  # the next step is split on the GPU's clock (and timed, cuda_timer)


class ModelColumns:
    """A step's model columns (``MODEL_COLUMNS``) left to be computed off the training
    thread: its host split, or none where its GPU split was due and could not be read."""

    __slots__ = ("pending", "split", "tokens")

    def __init__(self, tokens: int | None, pending: PendingStep, split: bool) -> None:
        self.tokens, self.pending, self.split = tokens, pending, split

    def columns(self) -> list[Any]:
        host = self.pending.host()
        return [self.tokens, host.data, *(host.row() if self.split else EMPTY_ROW)]


class ModelProbe:
    """Hooks the model once found; one per training process, driven by the agent."""

    def __init__(
        self,
        torch_module: Any,
        fail: Callable[[BaseException], None],
    ) -> None:
        self._torch = torch_module
        self._fail = fail  # disables the agent, said once
        self.active = True  # False once the agent is disabled: the hooks return at once
        self._ident = threading.get_ident
        self._grad_enabled = torch_module.is_grad_enabled
        # Traced by torch.compile (the compile knob compiles the model's call in place, its
        # hooks with it): our hooks then do nothing, so they add no graph break.
        compiler = getattr(torch_module, "compiler", None)
        self._compiling: Callable[[], bool] = getattr(compiler, "is_compiling", lambda: False)
        self.timeline = StepTimeline(torch_module)
        self._tensor, self._bool = torch_module.Tensor, torch_module.bool
        self._next_gpu_split = 0.0
        self.searched = False
        self.model: str | None = None  # the hooked module, described
        self.reason: str | None = None  # why samples/tokens/phases are N/A, when they are
        self._call: CallWrap | None = None
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
        # A forward that raised leaves no end mark: it is forgotten at the step's end
        # (end_step resets the depth).
        self._call = CallWrap(module, self._pre_forward, self._post_forward, self._compiling)

    def remove(self) -> None:
        if self._call is not None:
            self._call.remove()
            self._call = None

    def _set_reason(self, reason: str) -> None:
        if self.reason is None:
            self.reason, self._new_reason = reason, True

    def take_fact(self, step: int) -> wire.StepParts | None:
        """The ``step_parts`` fact when the model or the reason changed, else None."""
        if not self._new_reason:
            return None
        self._new_reason = False
        return wire.StepParts(step=step, model=self.model, reason=self.reason)

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

    def on_backward(self, started: bool) -> None:
        """The hook's ``torch.autograd.backward`` wrapper: a backward starts or returns."""
        if self._ident() == self._thread:
            self.timeline.mark(BWD_START if started else BWD_END)

    def end_step(self, cuda: bool, now: float) -> StepCounts:
        """The step's counts and marks; what the step's forwards received resets. With
        CUDA in use, the next step is split on the GPU's clock when GPU_SPLIT_PERIOD_S has
        passed since the last one was chosen."""
        self._depth, self._training_call = 0, False
        gpu_next = cuda and now >= self._next_gpu_split
        if gpu_next:
            self._next_gpu_split = now + GPU_SPLIT_PERIOD_S
        parts = self.timeline.end_step(gpu_next)
        usable = self.model is not None and not self._several_optimizers
        counts = StepCounts(
            samples=self._samples if usable else None,
            tokens=self._tokens if usable and not self._no_tokens else None,
            masks=self._masks if usable and not self._no_tokens else None,
            parts=parts,
            gpu_next=gpu_next,
        )
        self._reset_counts()
        return counts

    def row(self, counts: StepCounts, resolved: bool) -> list[Any] | ModelColumns:
        """The step's added columns (wire.STEP_FIELDS from ``tokens`` on): tokens, host gap,
        the parts and their clock; a ModelColumns where they can wait. ``resolved``: the
        step's GPU work has run, so its events and masks can be read; else the GPU
        figures read N/A."""
        if self._several_optimizers:
            return [None, None, *EMPTY_ROW]
        tokens = counts.tokens
        if counts.masks is not None:
            tokens = counts.masks.total() if resolved or not counts.masks.pending else None
        pending = counts.parts
        if not pending.events:
            return ModelColumns(tokens, pending, split=True)
        if not resolved:
            self.timeline.drop(pending)
            return ModelColumns(tokens, pending, split=False)
        return [tokens, pending.host().data, *self.timeline.resolve(pending).row()]

    # -- module hooks (training thread; backward marks on autograd's thread) ----------

    def _pre_forward(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A call of the model starts (its class's wrapped ``__call__``, model_call.py)."""
        # Inline, not through the guard: a forward runs several times a step.
        if self._ident() != self._thread or not self.active:
            return
        try:
            self._depth += 1
            if self._depth > 1:
                return  # the model calling itself: its outermost call is the forward
            self._training_call = bool(module.training and self._grad_enabled())
            if not self._training_call:
                self.timeline.eval_forward = True  # evaluation: not the step's data or samples
                return
            self.timeline.mark(FWD_START)
            leaf: Any = args[0] if args else None
            if kwargs or type(leaf) is not self._tensor:
                self._count(args, kwargs)
                return
            # The common call, model(idx): its first argument's shape, nothing else.
            shape = leaf.shape
            if not shape:
                self._count(args, kwargs)
                return
            samples = shape[0]
            self._samples = (self._samples or 0) + samples
            dtype = leaf.dtype
            if len(shape) < 2 or dtype.is_floating_point or dtype.is_complex or dtype is self._bool:
                self._no_tokens = True
            else:
                self._tokens = (self._tokens or 0) + samples * shape[1]
        except Exception as error:
            self._fail(error)

    def _count(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Samples and tokens of a forward called otherwise (keywords, a mask, a subclass)."""
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

    def _post_forward(self) -> None:
        if self._ident() != self._thread or not self.active:
            return
        try:
            self._depth = max(0, self._depth - 1)
            if self._depth > 0 or not self._training_call:
                return
            self._training_call = False
            self.timeline.mark(FWD_END)
        except Exception as error:
            self._fail(error)

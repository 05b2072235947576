"""The numerics guard: a knob change whose next steps' loss (or gradient norm) turns NaN/Inf
or diverges from the steps before it is reverted, and the outcome says why.

What the guard sees: the scalar each backward starts from (the loss), and the
value ``torch.nn.utils.clip_grad_norm_`` returned (the gradient norm, where the script clips).
Each step keeps a detached reference to them, nothing more: no copy, no sync. When a change
applies, the last ``WINDOW_STEPS`` before it are the reference; ``WINDOW_STEPS`` steps later
both windows are stacked and copied to the host in one non-blocking copy behind a CUDA event,
and a later step boundary reads them once the event has passed. The training thread never
waits for the GPU.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

# Steps compared on each side of a change: enough for a mean and a spread, few enough that a
# bad change is undone within a second or two of a fast loop.
WINDOW_STEPS = 10
# A change diverged when the mean after it exceeds the mean before by more than this share of
# it AND by more than this many standard deviations of the steps before: a learning rate gone
# wrong or fp16 overflowing moves the loss by multiples, while a precision change moves it by
# well under the spread of 10 steps. Every judged change's before/after means go to the job's
# notices, so each run shows how far its changes moved the loss (docs/autopilot.md).
DIVERGENCE_SHARE = 0.25
DIVERGENCE_SIGMAS = 3.0


@dataclass
class _Watch:
    """One applied change under watch: what to revert, and the values on each side."""

    step: int  # the boundary it applied at
    changes: list[tuple[str, Any, Any]]  # (knob, previous value, request id)
    before: dict[str, list[Any]]  # series name -> the steps' scalars before the change
    after: dict[str, list[Any]]
    host: Any = None  # the pinned copy of both windows, once asked
    event: Any = None  # its CUDA event
    layout: list[tuple[str, int, int]] | None = None  # (series, before n, after n)


class LossGuard:
    """Keeps the last steps' loss and gradient norm, and judges each change by them."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._step_values: dict[str, Any] = {}  # this step's latest grad norm
        self._loss: Any = None  # this step's latest loss, detached at the step's end
        self._recent: dict[str, deque[Any]] = {}
        self._watch: _Watch | None = None

    # -- the training thread, during a step -------------------------------------------------

    def on_backward(self, tensor: Any) -> None:
        """The tensor the backward starts from (None: several): the loss when a scalar. Held
        as it is until the step's end and detached there, once a step: a loop of several
        backwards a step (accumulation, busy_box.py's six) paid a detach for each."""
        if tensor is not None and tensor.numel() == 1:
            self._loss = tensor

    def on_grad_norm(self, norm: Any) -> None:
        if isinstance(norm, self._torch.Tensor) and norm.numel() == 1:
            self._step_values["grad_norm"] = norm.detach()

    # -- the training thread, at a step boundary ----------------------------------------------

    def end_step(self) -> None:
        """Keep this step's values: the reference window, or the window of a change."""
        values, self._step_values = self._step_values, {}
        loss, self._loss = self._loss, None
        if loss is not None:
            values = {"loss": loss.detach(), **values}
        watch = self._watch
        for name, value in values.items():
            if watch is not None and watch.layout is None:
                watch.after.setdefault(name, []).append(value)
            recent = self._recent.get(name)
            if recent is None:  # not setdefault: its default, a deque, was built every step
                recent = self._recent[name] = deque(maxlen=WINDOW_STEPS)
            recent.append(value)

    def watch(self, step: int, changes: list[tuple[str, Any, Any]]) -> None:
        """Changes applied at ``step``: the steps before are their reference. A change still
        under watch is judged no more (its window now holds the new change's steps too)."""
        before = {name: list(values) for name, values in self._recent.items() if values}
        self._watch = _Watch(step, list(changes), before, {}) if before else None

    def verdict(self) -> tuple[list[tuple[str, Any, Any]], str | None, str] | None:
        """Once a watched change is judged: (its changes, why they must go or None, the
        figures in words); None while it is not."""
        watch = self._watch
        if watch is None:
            return None
        if watch.layout is None:
            if min((len(v) for v in watch.after.values()), default=0) < WINDOW_STEPS:
                return None
            self._copy_to_host(watch)
        if watch.event is not None and not watch.event.query():
            return None  # the GPU has not got there yet: ask again at the next boundary
        self._watch = None
        series = _read(watch)
        return watch.changes, _judge(series), _figures(series)

    def _copy_to_host(self, watch: _Watch) -> None:
        torch = self._torch
        names = [n for n in watch.before if n in watch.after]
        watch.layout = [(n, len(watch.before[n]), len(watch.after[n])) for n in names]
        values = [v for n in names for v in (*watch.before[n], *watch.after[n])]
        if not values:
            return
        stacked = torch.stack([v.reshape(()).float().to(values[0].device) for v in values])
        if stacked.is_cuda:
            watch.host = torch.empty(stacked.shape, dtype=torch.float32, pin_memory=True)
            watch.host.copy_(stacked, non_blocking=True)
            watch.event = torch.cuda.Event()
            watch.event.record()
        else:
            watch.host = stacked


def _read(watch: _Watch) -> dict[str, tuple[list[float], list[float]]]:
    if watch.host is None or not watch.layout:
        return {}
    flat = watch.host.tolist()
    out, at = {}, 0
    for name, n_before, n_after in watch.layout:
        out[name] = (flat[at : at + n_before], flat[at + n_before : at + n_before + n_after])
        at += n_before + n_after
    return out


def _figures(series: dict[str, tuple[list[float], list[float]]]) -> str:
    """The means before and after, for the job's notices: what each change did to the loss."""
    parts = []
    for name, (before, after) in series.items():
        if before and after:
            mean_before, mean_after = statistics.fmean(before), statistics.fmean(after)
            parts.append(f"{name} {mean_before:.4g} -> {mean_after:.4g}")
    return ", ".join(parts) or "no loss seen"


def _judge(series: dict[str, tuple[list[float], list[float]]]) -> str | None:
    """Why the change must go, in words with its figures; None when it may stay."""
    for name, (before, after) in series.items():
        label = "loss" if name == "loss" else "gradient norm"
        if any(not math.isfinite(v) for v in after) and all(math.isfinite(v) for v in before):
            return f"numerics guard: the {label} became NaN/Inf within {len(after)} steps"
        if len(before) < WINDOW_STEPS or not after:
            continue  # a spread of fewer steps says little: only NaN/Inf is judged
        mean_before, mean_after = statistics.fmean(before), statistics.fmean(after)
        spread = statistics.stdev(before)
        limit = mean_before + max(DIVERGENCE_SHARE * abs(mean_before), DIVERGENCE_SIGMAS * spread)
        if mean_after > limit:
            return (
                f"numerics guard: the {label} diverged: {mean_after:.4g} over the "
                f"{len(after)} steps after the change, {mean_before:.4g} before "
                f"(limit {limit:.4g})"
            )
    return None

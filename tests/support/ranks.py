"""A synthetic rank's steps over its held span, as the straggler verdict reads them."""

from __future__ import annotations

from collections.abc import Sequence

from gputop_train.session.comm import StepFigures


def held_steps(
    waits: Sequence[float | None], step_ms: float, input_ms: float | None
) -> tuple[StepFigures, ...]:
    """One step per wait (step 1 first), each ``step_ms`` long with ``input_ms`` before its
    forward; a wait of None: not measured."""
    return tuple(StepFigures(n, step_ms, wait, input_ms) for n, wait in enumerate(waits, 1))

"""When a phase has settled: the window a trial (or a baseline) is judged on opens once the
change's transient is over, read from the job's own steps, not after a fixed time.

A change leaves a transient of its own length: new DataLoader workers start and fill their
prefetch queues (the step rate climbs), a revert's old workers hand over batches they had
prefetched (the rate reads high, then falls), a compile recompiles, the allocator's cache
warms (step times fall). Each shows in the step-time and data-wait series. The phase's
measured steps (session/phases.py's warm-up excluded) are cut into blocks of about a second;
the settled window is the longest run of blocks up to now whose first half and second half
agree — in throughput and in data-wait share — within the noise their own second half shows
(and at least a floor). Its figures are the trial's; the noise bar comes from its blocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..session import stats
from ..session.phases import noise_pct, split_warmup
from ..session.steps import Step

# A block: at least this long of steps and this many steps. One second holds 5-15 steps of
# the H100 runs of issue 38 (ImageNet-style 69-200 ms, nanoGPT 220-280 ms a step).
BLOCK_S = 1.0
BLOCK_STEPS = 2
# Fewest blocks a settled window has: two halves of three, so each half's mean and the
# second half's spread say something.
MIN_LEVEL_BLOCKS = 6
# Two halves are level when their throughputs differ by at most this share of the window's
# mean, or by more only within LEVEL_SIGMAS standard errors of the second half's spread.
# 5% is half the 10% the settled gain must match the plain script by (issue 38); a ramp that
# would bias the gain by more reads as a trend and moves the window past it.
LEVEL_PCT = 5.0
LEVEL_SIGMAS = 2.0
# The data-wait share, in points of the step, on the same rule: a revert's prefetched batches
# read as no wait at first, then the old wait comes back.
LEVEL_WAIT_PTS = 5.0
# A phase still not level after this long of measured steps is judged on the latter half
# of them, said so ("not level"): a job whose throughput drifts for good (a thermal limit,
# a shrinking dataset) must still be measured. benchmarks/autopilot/any_script waits 30 s for 16
# new ImageNet workers to settle on the H100 (issue 38: 1.73x at 5 s, 2.9x settled); twice that.
GIVE_UP_S = 60.0
# Only the phase's latest this-many seconds are searched: the search is quadratic in blocks,
# and a phase the autopilot meets long after it opened (started from the Knobs tab an hour
# in) has long settled. Twice GIVE_UP_S, so a phase given up on is judged on 60 s.
HORIZON_S = 2 * GIVE_UP_S
# The window's standard error comes from the means of consecutive chunks this long (batch
# means: a noisy input's swings last seconds, so one-second blocks are not independent). The
# H100's 4-worker ImageNet input (issue 38, 2026-11-27 15:15 UTC) swung 1,376-1,842 samples/s
# between the script's own 5-s meter readings at one setting: 5 s as that meter.
ERROR_CHUNK_S = 5.0


@dataclass(frozen=True)
class Settled:
    """A phase's settled window and its figures."""

    steps: int  # the primary process's steps in the window
    seconds: float  # the step time they cover
    rate: float | None  # samples/s, or steps/s where the job's samples are unknown
    unit: str  # "samples/s" or "steps/s"
    noise_pct: float | None  # the largest deviation of NOISE_BLOCKS blocks from their mean
    data_wait_pct: float | None
    transient_s: float  # measured seconds of the phase before the window opened
    level: bool  # False: given up on a level (GIVE_UP_S), judged on the latter half
    t_mid: float = 0.0  # the window's middle (the job's clock): where it sits between others
    older_s: float = 0.0  # measured seconds before HORIZON_S, not searched (in transient_s)
    # The standard error of ``rate`` in % (ERROR_CHUNK_S chunks' means); None under 3 chunks.
    error_pct: float | None = None

    @property
    def note(self) -> str:
        """How the window was found, in words, for a trial's reason."""
        if not self.level:
            return f"not level after {GIVE_UP_S:g} s: judged on the last {self.seconds:.0f} s"
        if self.older_s:
            return f"level over its latest {self.seconds:.0f} s"
        if self.transient_s >= BLOCK_S:
            return f"settled after {self.transient_s:.0f} s"
        return "level from its start"


@dataclass(frozen=True)
class _Block:
    first: int  # index of its first step in the measured list
    end: int  # index past its last step
    rate: float
    wait: float  # data-wait share of its step time, 0..1


def settle(own: Sequence[Step], others: Sequence[Step] = ()) -> Settled | None:
    """The settled window of one phase: ``own`` the primary process's steps of the phase in
    order (its warm-up included: cut here), ``others`` other ranks' steps of the same phase.
    None while no window is level and the phase is short of ``GIVE_UP_S``."""
    _, measured = split_warmup(own)
    skipped = _horizon(measured)
    before, measured = measured[:skipped], measured[skipped:]
    blocks = _blocks(measured)
    if len(blocks) < MIN_LEVEL_BLOCKS:
        return None
    start = next((s for s in range(len(blocks) - MIN_LEVEL_BLOCKS + 1) if _level(blocks[s:])), None)
    level = start is not None
    if start is None:
        if _seconds(measured) < GIVE_UP_S:
            return None
        start = len(blocks) // 2
    window = measured[blocks[start].first : blocks[-1].end]
    transient = measured[: blocks[start].first]
    older = _seconds(before)
    return replace(_figures(window, others, older + _seconds(transient), level), older_s=older)


def _horizon(measured: Sequence[Step]) -> int:
    """How many of the oldest steps fall before the last HORIZON_S seconds."""
    seconds = 0.0
    for index in range(len(measured) - 1, -1, -1):
        seconds += (measured[index].step_ms or 0.0) / 1000.0
        if seconds > HORIZON_S:
            return index + 1
    return 0


def _blocks(measured: Sequence[Step]) -> list[_Block]:
    """Whole blocks only: the last, still filling, waits for its second."""
    blocks: list[_Block] = []
    first, seconds, samples, wait, count = 0, 0.0, 0, 0.0, 0
    for index, step in enumerate(measured):
        seconds += (step.step_ms or 0.0) / 1000.0
        samples += step.samples or 0
        wait += (step.data_ms or 0.0) / 1000.0
        count += 1
        if seconds >= BLOCK_S and count >= BLOCK_STEPS:
            rate = (samples if samples else count) / seconds
            blocks.append(_Block(first, index + 1, rate, min(1.0, wait / seconds)))
            first, seconds, samples, wait, count = index + 1, 0.0, 0, 0.0, 0
    return blocks


def _level(window: Sequence[_Block]) -> bool:
    half = len(window) // 2
    head, tail = window[:half], window[half:]
    rates_ok = _agree(
        [b.rate for b in head], [b.rate for b in tail], LEVEL_PCT / 100.0, relative=True
    )
    waits_ok = _agree(
        [b.wait for b in head], [b.wait for b in tail], LEVEL_WAIT_PTS / 100.0, relative=False
    )
    return rates_ok and waits_ok


def _agree(head: list[float], tail: list[float], floor: float, relative: bool) -> bool:
    """The halves' means differ by at most ``floor`` (of the mean, where ``relative``) or
    within LEVEL_SIGMAS standard errors, the spread taken from the settled-looking tail."""
    mean_head, mean_tail = sum(head) / len(head), sum(tail) / len(tail)
    spread = _sd(tail)
    error = LEVEL_SIGMAS * spread * math.sqrt(1.0 / len(head) + 1.0 / len(tail))
    scale = (mean_head + mean_tail) / 2.0 if relative else 1.0
    return abs(mean_head - mean_tail) <= max(floor * scale, error)


def _sd(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _seconds(steps: Sequence[Step]) -> float:
    return sum(s.step_ms or 0.0 for s in steps) / 1000.0


def _figures(
    window: Sequence[Step], others: Sequence[Step], transient_s: float, level: bool
) -> Settled:
    """The window's figures, other ranks' steps of the same time counted in its samples/s
    (as the phase table counts them)."""
    start = window[0].t - (window[0].step_ms or 0.0) / 1000.0
    stop = window[-1].t
    ranks = [s for s in others if start < s.t <= stop]
    primary = window[0].pid
    figures = stats.step_stats([*window, *ranks], primary)
    rate, unit = figures.samples_per_s, "samples/s"
    if rate is None:
        rate, unit = figures.steps_per_s, "steps/s"
    return Settled(
        steps=len(window),
        seconds=_seconds(window),
        rate=rate,
        unit=unit,
        noise_pct=noise_pct(window, _work),
        error_pct=_error_pct(window),
        data_wait_pct=figures.data_wait_pct,
        transient_s=transient_s,
        level=level,
        t_mid=(start + stop) / 2.0,
    )


def _work(steps: Sequence[Step]) -> float:
    """A block's work: its samples, or its steps where none are counted."""
    return sum(s.samples or 0 for s in steps) or len(steps)


def _error_pct(window: Sequence[Step]) -> float | None:
    """The standard error of the window's throughput in %, from the means of its
    ERROR_CHUNK_S chunks (the last, partial one left out); None under three chunks."""
    rates: list[float] = []
    seconds, work = 0.0, 0
    for step in window:
        seconds += (step.step_ms or 0.0) / 1000.0
        work += step.samples or 1
        if seconds >= ERROR_CHUNK_S:
            rates.append(work / seconds)
            seconds, work = 0.0, 0
    if len(rates) < 3:
        return None
    mean = sum(rates) / len(rates)
    return 100.0 * _sd(rates) / math.sqrt(len(rates)) / mean

"""How busy the machine was around a recorded run, from its process samples: the machine's
busy share of all cores, the job's own CPU, and what other processes took (the difference).

Two runs of one script on a shared box differ by more than their noise when other work takes
the cores one of them needed (issue 46: identical settings read 0.57x at load 17 against 20).
``compare`` shows each run's figures and says when the box differed; ``check`` refuses to
judge beyond a stated line (``--max-load-change``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import format as fmt
from ..record.reader import Recording

# A machine this busy on average had no idle core to give the job: above it, other
# processes' CPU is taken from the job. On the 2-core dev box beside other work (load 9-13,
# 2026-12-05) the samples of both a quiet and a hogged run read 97-100%.
SATURATED_PCT = 90.0
# The default line of ``check --max-load-change``: the cores other processes left free may
# differ this much between the runs before a verdict is refused. Two runs of the CPU demo a
# minute apart on the shared dev box (2026-12-05) left 0.6 and 0.9 of 2 cores free (-33%).
MAX_LOAD_CHANGE_PCT = 25.0


@dataclass(frozen=True)
class BoxLoad:
    """One run's machine, as means over its process samples; None: not measured."""

    cores: int | None
    samples: int
    busy_pct: float | None  # the machine's busy share of all its cores
    job_cores: float | None  # the job's processes together, in cores
    others_cores: float | None  # what the rest of the machine took, in cores
    job_wait_pct: float | None = None  # the training process's run-queue wait, % of its time

    @property
    def free_cores(self) -> float | None:
        """The cores other processes left to the job."""
        if self.cores is None or self.others_cores is None:
            return None
        return max(0.0, self.cores - self.others_cores)

    @property
    def saturated(self) -> bool:
        return self.busy_pct is not None and self.busy_pct >= SATURATED_PCT

    def text(self) -> str:
        if self.busy_pct is None or self.cores is None:
            return "not measured (no process samples)"
        parts = [f"{self.cores} cores {self.busy_pct:.0f}% busy",
                 f"other processes {_cores(self.others_cores)}",
                 f"the job {_cores(self.job_cores)}"]  # fmt: skip
        if self.job_wait_pct is not None:
            parts.append(f"the job waited for a CPU {fmt.pct(self.job_wait_pct)} of its time")
        return ", ".join(parts)


def _cores(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:.1f} cores"


def box_load(recording: Recording, windows: Sequence[tuple[float, float]] = ()) -> BoxLoad:
    """The means over the process samples inside ``windows`` (every sample where none falls
    inside). A sample whose machine figure is below the job's own (psutil's first reading is
    0%) is left out."""
    cores = recording.meta.get("cpu_count")
    cores = cores if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0 else None
    every = [s for s in (_sample(e, cores) for e in recording.events) if s is not None]
    inside = [s for s in every if any(start <= s[0] <= end for start, end in windows)]
    kept = inside or every
    if cores is None or not kept:
        return BoxLoad(cores, len(kept), None, None, None)
    busy = _mean([s[1] for s in kept])
    job = _mean([s[2] for s in kept])
    waits = [s[3] for s in kept if s[3] is not None]
    assert busy is not None and job is not None
    others = max(0.0, busy / 100.0 * cores - job)
    return BoxLoad(cores, len(kept), busy, job, others, _mean(waits))


def _sample(
    event: dict[str, Any], cores: int | None
) -> tuple[float, float, float, float | None] | None:
    """(t, machine busy %, the job's cores, the training process's wait %) of one process
    sample; None for another event or a sample that cannot be right."""
    if event.get("kind") != "procs" or cores is None:
        return None
    busy, samples = event.get("system_cpu_pct"), event.get("samples")
    if not isinstance(busy, (int, float)) or not _number(busy) or not isinstance(samples, list):
        return None
    processes = [p for p in samples if isinstance(p, dict)]
    job = sum(p["cpu_pct"] for p in processes if _number(p.get("cpu_pct"))) / 100.0
    if not 0 <= busy <= 100 or busy / 100.0 * cores < job * 0.9:
        return None
    waits = [p["run_wait_pct"] for p in processes
             if p.get("role") == "main" and _number(p.get("run_wait_pct"))]  # fmt: skip
    return float(event["t"]), float(busy), job, _mean(waits)


# The job could not have had in the tighter run what it used in the other when the cores left
# free to it there are under this multiple of that: with more, other processes took only what
# the job did not want (the sleepy test job used 0.1 of 0.5 free cores beside the parallel
# suite on the 2-core dev box, 2026-12-05).
ROOM_NEEDED = 1.25
# ... and the load took CPU from the job only where its own CPU fell by more than this: the CPU
# demo beside two hogs had 1.0 of 2 cores free against 2.0 alone, used 1.0 core in both, and
# ran +3.4% samples/s (dev box, 2026-12-05 10:30 UTC; docs/recording.md).
JOB_CPU_FELL = 0.10


@dataclass(frozen=True)
class BoxChange:
    """How the machine differed between two runs: the cores others left free to each, and the
    cores the job used in each."""

    free_a: float
    free_b: float
    change_pct: float  # (B - A) / the larger, %
    saturated: bool  # either run's machine had no idle core
    job_a: float
    job_b: float

    @property
    def tighter(self) -> str:
        return "B" if self.free_b < self.free_a else "A"

    @property
    def short(self) -> bool:
        """The tighter run left the job about as few cores as it used in the other run
        (``ROOM_NEEDED``) and the job got less CPU there (``JOB_CPU_FELL``): the load took
        from it."""
        b_tighter = self.tighter == "B"
        free = self.free_b if b_tighter else self.free_a
        had, got = (self.job_a, self.job_b) if b_tighter else (self.job_b, self.job_a)
        return free < had * ROOM_NEEDED and got < had * (1.0 - JOB_CPU_FELL)

    def text(self) -> str:
        return (f"other processes left {self.free_a:.1f} cores free in A and {self.free_b:.1f} "
                f"in B ({self.change_pct:+.0f}%), where the job used {self.job_a:.1f} and "
                f"{self.job_b:.1f}")  # fmt: skip

    def beyond(self, line_pct: float) -> bool:
        """The box differed beyond ``line_pct``: a run's machine was saturated, the free cores
        differ by more than the line, and the tighter run left the job short of what it used
        in the other (with idle cores or room to spare, others took nothing it wanted)."""
        return self.saturated and abs(self.change_pct) > line_pct and self.short


def box_change(a: BoxLoad, b: BoxLoad) -> BoxChange | None:
    """None where either run's machine was not measured."""
    free_a, free_b = a.free_cores, b.free_cores
    if free_a is None or free_b is None or a.job_cores is None or b.job_cores is None:
        return None
    larger = max(free_a, free_b)
    change = 0.0 if larger == 0 else 100.0 * (free_b - free_a) / larger
    return BoxChange(free_a, free_b, change, a.saturated or b.saturated, a.job_cores, b.job_cores)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None

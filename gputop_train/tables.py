"""The phase table and the process table, each declared once: its columns (header, how a cell
is written, alignment, which to keep first on a narrow screen) and one way to lay them out in
a width. The TUI, the headless printer and the Markdown summary render the same cells; only
their styling (Rich styles, Markdown pipes) is their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

from . import format as fmt
from .samples import ProcSample
from .session.model import Snapshot
from .session.phases import PhaseFigures
from .views import View

Row = TypeVar("Row")


@dataclass(frozen=True)
class Column(Generic[Row]):
    """One column: its header, its cell for a row, and how a layout treats it. ``keep`` ranks
    it when a narrow screen keeps some columns (0 first); ``optional`` leaves it out where no
    row has a figure (a CPU run's GPU columns); ``cut`` is the most characters a fixed-width
    layout shows of a cell (the whole text is the Markdown's); ``room`` is the widest its
    format writes, what a column that grows is widened to (``widened``)."""

    header: str
    cell: Callable[[Row], str]
    keep: int
    right: bool = True
    optional: bool = False
    cut: int | None = None
    room: int = 0


def widened(
    columns: Sequence[Column[Row]], shown: Sequence[int], now: Sequence[int]
) -> tuple[int, ...]:
    """The widths to keep (``fit``'s floor) after a draw whose cells need ``now``, when
    ``shown`` were kept so far (none: the first draw, as wide as its cells). A column never
    narrows, and one that must grow grows at once to its ``room``: the table's extent then
    changes (and the whole screen is laid out again) once per column, not at each wider
    figure."""
    if not shown:
        return tuple(now)
    return tuple(
        width if need <= width else max(need, column.room)
        for column, width, need in zip(columns, shown, now, strict=True)
    )


def cells(columns: Sequence[Column[Row]], rows: Sequence[Row]) -> list[tuple[str, ...]]:
    """Each row's cells, whole (not cut)."""
    return [tuple(column.cell(row) for column in columns) for row in rows]


def cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def column_widths(
    columns: Sequence[Column[Row]], rows: Sequence[tuple[str, ...]]
) -> tuple[int, ...]:
    """Each column's widest cell as a fixed-width layout shows it, the header included."""
    return tuple(
        max([len(column.header)] + [len(cut(r[i], column.cut)) for r in rows])
        for i, column in enumerate(columns)
    )


def fit(
    columns: Sequence[Column[Row]],
    rows: Sequence[tuple[str, ...]],
    width: int,
    floor: Sequence[int] = (),
) -> list[str]:
    """The header and rows as lines of the columns that fit ``width``: taken by ``keep``,
    shown in their own order, one space apart. A column that does not fit is left out whole
    (cells never run together), and so is an optional one with no figure in any row. Each
    column is as wide as its widest cell and at least ``floor`` (the widths shown before:
    columns that do not jump as figures change)."""
    widest = column_widths(columns, rows)
    widths = [max(w, floor[i] if i < len(floor) else 0) for i, w in enumerate(widest)]
    chosen: list[int] = []
    used = 0
    for index in sorted(range(len(columns)), key=lambda i: columns[i].keep):
        if rows and not _filled(columns[index], [row[index] for row in rows]):
            continue
        need = widths[index] + (1 if chosen else 0)
        if used + need <= width:
            chosen.append(index)
            used += need
    chosen.sort()

    def line(texts: Sequence[str]) -> str:
        parts = []
        for i in chosen:
            text = cut(texts[i], columns[i].cut)
            parts.append(text.rjust(widths[i]) if columns[i].right else text.ljust(widths[i]))
        return " ".join(parts).rstrip()

    return [line([c.header for c in columns]), *(line(r) for r in rows)]


def _filled(column: Column[Row], texts: Sequence[str]) -> bool:
    """Whether some cell holds something: text, or for an optional column a figure."""
    blank = ("", fmt.NA) if column.optional else ("",)
    return any(text not in blank for text in texts)


# -- the phase table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseLine(PhaseFigures):
    """One phase as every phase table shows it; None is N/A. Built from a view's phase (the
    TUI, headless) or from a summary's JSON phase (the Markdown summary)."""

    index: int
    change: str
    failed: str | None
    headline: str

    @classmethod
    def of_view(cls, view: View) -> list[PhaseLine]:
        """The view's phases: each row's figures, with the view's throughput and speed-up (the
        autopilot's settled figures where it judged the phase)."""
        return [
            cls(
                **{name: getattr(p.row, name) for name in _FIGURES}
                | {"samples_per_s": p.samples_per_s, "speedup": p.speedup},
                index=p.row.phase.index,
                change=p.row.phase.change,
                failed=p.row.phase.failed,
                headline=p.headline,
            )
            for p in view.phases
        ]

    @classmethod
    def of_dict(cls, p: Mapping[str, Any]) -> PhaseLine:
        """A phase of ``views.phase_dicts`` (a summary's JSON: the figures by their names)."""
        return cls(
            **{name: p[name] for name in _FIGURES},
            index=p["phase"],
            change=p["change"],
            failed=p["failed"],
            headline=p["headline"],
        )


_FIGURES = tuple(f.name for f in fields(PhaseFigures))


def _change(p: PhaseLine) -> str:
    return p.change + (f" ✗ reverted: {p.failed}" if p.failed else "")


def _gib(value: int | None) -> str:
    """A peak in GiB; none measured (0 or None) is N/A."""
    return f"{fmt.gib(value)} GiB" if value else fmt.NA


def _gib_or_na(value: int | None) -> str:
    """A size in GiB, 0 included."""
    return fmt.NA if value is None else f"{fmt.gib(value)} GiB"


# The change and what it did first: samples/s and speed-up, then why (wait, GPU, memory). A
# change is cut to 24 characters: the headless table's eleven columns then fit its 100.
PHASE_COLUMNS: tuple[Column[PhaseLine], ...] = (
    Column("#", lambda p: str(p.index), keep=0),
    Column("change", _change, keep=1, right=False, cut=24),
    Column("steps", lambda p: str(p.steps), keep=9),
    Column("warm-up", lambda p: fmt.ms(p.warmup_s * 1000) if p.warmup_s else fmt.NA, keep=10),
    Column("samples/s", lambda p: fmt.rate(p.samples_per_s, "").strip(), keep=2, optional=True),
    Column("step p50", lambda p: fmt.ms(p.step_ms_p50), keep=8, optional=True),
    Column("data-wait", lambda p: fmt.pct(p.data_wait_pct), keep=4, optional=True),
    Column("GPU util", lambda p: fmt.pct(p.gpu_util_pct), keep=5, optional=True),
    Column("tensor", lambda p: fmt.pct(p.tensor_active_pct), keep=6, optional=True),
    Column("peak mem", lambda p: _gib(p.peak_mem_bytes), keep=7, optional=True),
    Column(
        "speed-up", lambda p: f"{p.speedup:.2f}x" if p.speedup else fmt.NA, keep=3, optional=True
    ),
)


# -- the process table -------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessLine:
    """One process of the job with what NVML says it holds (summed over its GPUs)."""

    proc: ProcSample
    rank: int | None
    gpus: tuple[int, ...]
    gpu_mem_bytes: int | None
    gpu_sm_pct: float | None


# Main processes, then launchers, workers, other children; ranks in order, then PIDs.
_ROLE_ORDER = {"main": 0, "launcher": 1, "worker": 2, "child": 3}


def process_lines(snap: Snapshot) -> list[ProcessLine]:
    """The job's processes, GPU memory and SM % matched to psutil PIDs through NVML."""
    gpu_mem: dict[int, int] = {}
    gpu_sm: dict[int, float] = {}
    gpu_of: dict[int, list[int]] = {}
    for gpu in snap.latest_gpus:
        for proc in gpu.processes:
            gpu_of.setdefault(proc.pid, []).append(gpu.index)
            if proc.mem_bytes is not None:
                gpu_mem[proc.pid] = gpu_mem.get(proc.pid, 0) + proc.mem_bytes
            if proc.sm_pct is not None:
                gpu_sm[proc.pid] = gpu_sm.get(proc.pid, 0.0) + proc.sm_pct
    ranks = {h.pid: h.rank for h in snap.hooked if h.rank is not None}
    ordered = sorted(
        snap.processes, key=lambda p: (_ROLE_ORDER.get(p.role, 9), ranks.get(p.pid, -1), p.pid)
    )
    return [
        ProcessLine(
            p, ranks.get(p.pid), tuple(gpu_of.get(p.pid, ())), gpu_mem.get(p.pid), gpu_sm.get(p.pid)
        )
        for p in ordered
    ]


# The PID, its role, its CPU and GPU use first; then the GPU's index, RSS, IO. A room is the
# widest its format writes: a 7-digit PID (Linux's pid_max), "rank 999", 16 characters of a
# name, "1600%" (16 cores), "999.9 GiB", "999.9 MB/s", "disk-sleep", "100%"; the GPU list
# grows with the GPUs, a cell at a time.
PROCESS_COLUMNS: tuple[Column[ProcessLine], ...] = (
    Column("PID", lambda r: str(r.proc.pid), keep=0, right=False, room=7),
    Column(
        "role",
        lambda r: f"rank {r.rank}" if r.rank is not None else r.proc.role,
        keep=1,
        right=False,
        room=8,
    ),
    Column("name", lambda r: r.proc.name[:16], keep=10, right=False, room=16),
    Column("CPU", lambda r: fmt.pct(r.proc.cpu_pct), keep=2, room=5),
    Column("RSS", lambda r: _gib_or_na(r.proc.rss_bytes), keep=6, room=9),
    Column("read/s", lambda r: fmt.bytes_rate(r.proc.io_read_bps), keep=7, room=10),
    Column("write/s", lambda r: fmt.bytes_rate(r.proc.io_write_bps), keep=8, room=10),
    Column("state", lambda r: r.proc.status or fmt.NA, keep=9, right=False, room=10),
    Column("GPU", lambda r: fmt.gpus(r.gpus), keep=5, right=False),
    Column("GPU mem", lambda r: _gib_or_na(r.gpu_mem_bytes), keep=3, room=9),
    Column("SM", lambda r: fmt.pct(r.gpu_sm_pct), keep=4, room=4),
)

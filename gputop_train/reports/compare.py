"""Two runs side by side: each figure's change and whether it is beyond the runs' noise, the
findings that appeared or went away, the knobs that differ, and why the runs may not compare.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from .box import MAX_LOAD_CHANGE_PCT, BoxChange, BoxLoad, box_change
from .load import Run
from .measured import GPU_FIGURES, STEP_FIGURES, Figure, Measured, RunFigures, run_figures

BEYOND, WITHIN, NA, NOT_COMPARABLE = "beyond noise", "within noise", "N/A", "not comparable"


@dataclass(frozen=True)
class Row:
    """One figure of both runs: B's change against A, and the verdict on it."""

    name: str
    unit: str
    a: float | None
    b: float | None
    change_pct: float | None  # (B - A) / A, %
    noise: float | None  # A's noise + B's, in the figure's unit
    verdict: str  # BEYOND, WITHIN, NA or NOT_COMPARABLE
    better: bool | None  # B better than A (None: within noise, N/A, or neither way better)
    why: str = ""  # why N/A or not comparable, or what the noise rests on
    key: str = ""


@dataclass(frozen=True)
class FindingChange:
    change: str  # "appeared" (in B, not A) or "went away" (in A, not B)
    id: str
    title: str
    evidence: tuple[str, ...]


@dataclass
class Comparison:
    a: str
    b: str
    warnings: list[str]
    rows: list[Row]
    ranks: dict[str, list[Row]]
    findings: list[FindingChange]
    knobs: list[tuple[str, Any, Any]]  # name, A's value, B's
    basis: str  # how the figures were measured
    box_a: BoxLoad  # how busy each run's machine was
    box_b: BoxLoad
    box_change: BoxChange | None  # None: either machine not measured
    headline: str = field(default="")

    @property
    def box_note(self) -> str:
        """Where the box differed enough to move the figures: how, and which verdict it may
        explain; empty where it did not."""
        change = self.box_change
        if change is None or not change.beyond(MAX_LOAD_CHANGE_PCT):
            return ""
        return f"the box differed: {change.text()}, a machine with no idle core"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare(a: Run, b: Run) -> Comparison:
    fa, fb = run_figures(a), run_figures(b)
    rows = [_row(f, fa.figures[f.key], fb.figures[f.key], _gpu_na(a, b, f)) for f in STEP_FIGURES]
    rows += [_row(f, fa.figures[f.key], fb.figures[f.key], _gpu_na(a, b, f)) for f in GPU_FIGURES]
    rows += _summary_rows(a, b)
    comparison = Comparison(
        a=str(a.path),
        b=str(b.path),
        warnings=_warnings(a, b),
        rows=rows,
        ranks=_rank_rows(fa, fb),
        findings=_finding_changes(a, b),
        knobs=_knob_changes(a, b),
        basis=f"A: {fa.measured_steps} measured steps, {fa.warmup_note}; "
        f"B: {fb.measured_steps}, {fb.warmup_note}",
        box_a=fa.box,
        box_b=fb.box,
        box_change=box_change(fa.box, fb.box),
    )
    comparison.headline = _headline(comparison)
    return comparison


def _row(figure: Figure, a: Measured, b: Measured, na_reason: str | None) -> Row:
    change = _change(a.value, b.value)
    if a.value is None or b.value is None:
        where = "either run" if a.value is None and b.value is None else (
            "A" if a.value is None else "B")  # fmt: skip
        why = na_reason or f"not measured in {where}"
        return Row(
            figure.name, figure.unit, a.value, b.value, None, None, NA, None, why, figure.key
        )
    if a.noise is None or b.noise is None:
        return Row(
            figure.name, figure.unit, a.value, b.value, change, None, NA, None,
            "too few measured steps to measure the noise", figure.key,
        )  # fmt: skip
    noise = a.noise + b.noise
    beyond = abs(b.value - a.value) > noise
    direction = figure.higher_is_better
    better = ((b.value > a.value) == direction) if beyond and direction is not None else None
    return Row(
        figure.name, figure.unit, a.value, b.value, change, noise,
        BEYOND if beyond else WITHIN, better, f"{figure.source}", figure.key,
    )  # fmt: skip


def _change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return 100.0 * (b - a) / abs(a)


def _gpu_na(a: Run, b: Run, figure: Figure) -> str | None:
    """Why a GPU figure is N/A: the summary's own reason (no driver, no GPM)."""
    if figure.source == "hook":
        return None
    for run, name in ((a, "A"), (b, "B")):
        if not run.summary["gpus"]:
            return f"{name} has no GPU figures (CPU run or NVML unavailable)"
    return None


def _summary_rows(a: Run, b: Run) -> list[Row]:
    """MFU, peak memory and syncs, as each summary has them (no noise: a peak, a count, a
    ratio of whole-run counts)."""
    sa, sb = a.summary, b.summary
    rows = []
    pa, pb = (s["figures"].get("mfu") or {} for s in (sa, sb))
    na_reason = pa.get("na_reason") or pb.get("na_reason") or ""
    mfu = Row("MFU", "%", sa["mfu_pct"], sb["mfu_pct"], _change(sa["mfu_pct"], sb["mfu_pct"]),
              None, NA, None, na_reason, "mfu_pct")  # fmt: skip
    if pa.get("precision") and pb.get("precision") and pa["precision"] != pb["precision"]:
        why = f"precision {pa['precision']} vs {pb['precision']}: peaks differ"
        mfu = Row(mfu.name, mfu.unit, mfu.a, mfu.b, mfu.change_pct, None, NOT_COMPARABLE, None,
                  why, "mfu_pct")  # fmt: skip
    elif mfu.a is not None and mfu.b is not None:
        mfu = Row(mfu.name, mfu.unit, mfu.a, mfu.b, mfu.change_pct, None, NA, None,
                  "no noise figure: judge with step time", "mfu_pct")  # fmt: skip
    rows.append(mfu)
    ma, mb = peak_memory(sa), peak_memory(sb)
    rows.append(
        Row(
            "peak memory",
            "bytes",
            ma,
            mb,
            _change(ma, mb),
            None,
            NA,
            None,
            "a peak has no noise figure"
            if ma is not None and mb is not None
            else "not measured (a CPU run: no GPU memory)",
            "peak_mem_bytes",
        )
    )
    ya, yb = (s["figures"].get("syncs_per_step") for s in (sa, sb))
    rows.append(
        Row(
            "host-device syncs",
            "per step",
            ya,
            yb,
            _change(ya, yb),
            None,
            NA,
            None,
            "a count per step: any change is real"
            if ya is not None and yb is not None
            else "not scanned",
            "syncs_per_step",
        )
    )
    return rows


def peak_memory(summary: dict[str, Any]) -> float | None:
    """NVML's peak (the summary's), else the hook's allocator peak (the memory audit)."""
    if summary["gpu_mem_peak_bytes"]:
        return float(summary["gpu_mem_peak_bytes"])
    memory = summary["figures"].get("memory") or {}
    peak = memory.get("allocated_peak_bytes")
    return float(peak) if peak else None


def _rank_rows(fa: RunFigures, fb: RunFigures) -> dict[str, list[Row]]:
    names = {f.key: f for f in STEP_FIGURES}
    return {
        rank: [_row(names[k], fa.ranks[rank][k], fb.ranks[rank][k], None) for k in fa.ranks[rank]]
        for rank in fa.ranks
        if rank in fb.ranks
    }


def _finding_changes(a: Run, b: Run) -> list[FindingChange]:
    found_a = {f["id"]: f for f in a.summary["findings"]}
    found_b = {f["id"]: f for f in b.summary["findings"]}
    changes = [
        FindingChange("went away", f["id"], f["title"], tuple(f["evidence"]))
        for key, f in found_a.items()
        if key not in found_b
    ]
    changes += [
        FindingChange("appeared", f["id"], f["title"], tuple(f["evidence"]))
        for key, f in found_b.items()
        if key not in found_a
    ]
    return changes


def _knob_changes(a: Run, b: Run) -> list[tuple[str, Any, Any]]:
    """Knobs whose value in force at the end differs (the script's and the hook's own)."""
    ka = {k["name"]: k["value"] for k in a.summary["figures"].get("knobs") or ()}
    kb = {k["name"]: k["value"] for k in b.summary["figures"].get("knobs") or ()}
    return [(name, ka[name], kb[name]) for name in ka if name in kb and ka[name] != kb[name]]


def _warnings(a: Run, b: Run) -> list[str]:
    warnings = []
    sa, sb = a.summary, b.summary
    script_a, script_b = _script(sa["command"]), _script(sb["command"])
    if script_a != script_b:
        warnings.append(f"different scripts: {script_a} vs {script_b}")
    if sa["host"] != sb["host"]:
        warnings.append(f"different machines: {sa['host']} vs {sb['host']}")
    if sa["gpus"] != sb["gpus"]:
        warnings.append(
            f"different GPUs: {len(sa['gpus'])} ({', '.join(map(str, sa['gpus'])) or 'none'}) "
            f"vs {len(sb['gpus'])} ({', '.join(map(str, sb['gpus'])) or 'none'})"
        )
    ranks_a, ranks_b = len(sa["figures"].get("ranks") or ()), len(sb["figures"].get("ranks") or ())
    if ranks_a != ranks_b:
        warnings.append(f"different numbers of ranks: {ranks_a} vs {ranks_b}")
    return warnings


def _script(command: list[str]) -> str:
    """The script a command runs: the first argument ending in .py, else the program."""
    script = next((c for c in command if c.endswith(".py")), command[0] if command else "?")
    return os.path.basename(script)


def _headline(c: Comparison) -> str:
    if not any(r.a is not None and r.b is not None for r in c.rows):
        return "nothing to compare: no figure was measured in both runs"
    beyond = [r for r in c.rows if r.verdict == BEYOND]
    if not beyond:
        return "no change beyond noise"
    parts = []
    for row in beyond:
        assert row.a is not None and row.b is not None
        if row.unit.startswith("%"):
            parts.append(f"{row.name} {row.a:.0f}% -> {row.b:.0f}%")
        elif row.key in ("samples_per_s", "tokens_per_s") and row.a:
            parts.append(f"{row.name} {row.b / row.a:.2f}x")
        else:
            parts.append(f"{row.name} {row.change_pct:+.0f}%")
    knobs = ", ".join(f"{name} {a} -> {b}" for name, a, b in c.knobs)
    judged = [r.better for r in beyond if r.better is not None]
    if not judged:
        word = "different"
    else:
        word = "better" if all(judged) else "worse" if not any(judged) else "mixed"
    who = f"B ({knobs})" if knobs else "B"
    return f"{who} is {word} beyond noise: " + ", ".join(parts) + _load_explains(c, word)


def _load_explains(c: Comparison, word: str) -> str:
    """The mark on a verdict the box's load explains: B worse with fewer free cores, or better
    with more."""
    if not c.box_note or c.box_change is None:
        return ""
    tighter = c.box_change.tighter
    if (word == "worse" and tighter == "B") or (word == "better" and tighter == "A"):
        return f" (the box's load may explain it: {tighter} had fewer free cores)"
    return ""

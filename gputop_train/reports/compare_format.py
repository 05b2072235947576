"""A comparison as text, Markdown or JSON (``gputop-train compare --format``)."""

from __future__ import annotations

import json

from .. import format as fmt
from .compare import BEYOND, Comparison, Row


def value_text(value: float | None, unit: str) -> str:
    """A figure with its unit, N/A alone where not measured."""
    if value is None:
        return fmt.NA
    if unit == "bytes":
        return fmt.size(int(value))
    if unit == "ms":
        return fmt.ms(value)
    if unit.startswith("%"):
        return f"{value:.1f}%"
    if unit == "per step":
        return f"{value:g}/step"
    return fmt.rate(value, unit)


def noise_text(row: Row) -> str:
    """The noise in the figure's unit; a share's in points."""
    if row.noise is None:
        return fmt.NA
    return f"{row.noise:.1f} pts" if row.unit.startswith("%") else value_text(row.noise, row.unit)


def _cells(row: Row) -> tuple[str, ...]:
    change = fmt.NA if row.change_pct is None else f"{row.change_pct:+.1f}%"
    if row.unit.startswith("%") and row.a is not None and row.b is not None:
        change = f"{row.b - row.a:+.1f} pts"  # a share's change in points, not % of itself
    noise = "" if row.noise is None else f" (noise ±{noise_text(row)})"
    verdict = row.verdict
    if row.verdict == BEYOND and row.better is not None:
        verdict += ", better" if row.better else ", worse"
    elif row.verdict == BEYOND and row.a is not None and row.b is not None:
        verdict += ", higher" if row.b > row.a else ", lower"
    if row.why and row.verdict != BEYOND and row.verdict != "within noise":
        verdict += f": {row.why}"
    return (row.name, value_text(row.a, row.unit), value_text(row.b, row.unit), change,
            verdict + noise)  # fmt: skip


COLUMNS = ("figure", "A", "B", "change", "verdict")


def text(c: Comparison) -> str:
    lines = [f"A: {c.a}", f"B: {c.b}", ""]
    lines += [f"warning: {w}" for w in c.warnings]
    lines += [c.headline, f"(figures over the measured steps: {c.basis})"]
    lines += [*_box_lines(c, ""), ""]
    lines += _text_table([_cells(r) for r in c.rows])
    for rank, rows in c.ranks.items():
        lines += ["", f"{rank}:", *_text_table([_cells(r) for r in rows])]
    lines += ["", *_knob_lines(c, "knobs that differ: ")]
    lines += _finding_lines(c, "- ")
    return "\n".join(lines).rstrip() + "\n"


def _text_table(rows: list[tuple[str, ...]]) -> list[str]:
    table = [COLUMNS, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
            for r in table]  # fmt: skip


def markdown(c: Comparison) -> str:
    lines = ["# gputop-train compare", "", f"- A: `{c.a}`", f"- B: `{c.b}`"]
    lines += [f"- **warning**: {w}" for w in c.warnings]
    lines += ["", f"**{c.headline}** (figures over the measured steps: {c.basis})", ""]
    lines += [*_box_lines(c, "- "), ""]
    lines += _md_table([_cells(r) for r in c.rows])
    for rank, rows in c.ranks.items():
        lines += ["", f"## {rank}", "", *_md_table([_cells(r) for r in rows])]
    lines += ["", "## What differs", "", *_knob_lines(c, "- knobs that differ: ")]
    lines += _finding_lines(c, "- ")
    return "\n".join(lines) + "\n"


def _box_lines(c: Comparison, bullet: str) -> list[str]:
    """Each run's machine, and whether it differed enough to move the figures."""
    lines = [f"{bullet}box A: {c.box_a.text()}", f"{bullet}box B: {c.box_b.text()}"]
    if c.box_note:
        lines.append(f"{bullet}warning: {c.box_note}")
    return lines


def _md_table(rows: list[tuple[str, ...]]) -> list[str]:
    return [
        "| " + " | ".join(COLUMNS) + " |",
        "|---|---:|---:|---:|---|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _knob_lines(c: Comparison, prefix: str) -> list[str]:
    if not c.knobs:
        return [prefix + "none"]
    return [prefix + ", ".join(f"{name} {a} -> {b}" for name, a, b in c.knobs)]


def _finding_lines(c: Comparison, bullet: str) -> list[str]:
    if not c.findings:
        return [bullet + "findings: the same in both"]
    lines = []
    for f in c.findings:
        lines.append(f"{bullet}finding {f.change}: {f.title} ({f.id})")
        lines += [f"    {e}" for e in f.evidence]
    return lines


def as_json(c: Comparison) -> str:
    return json.dumps(c.as_dict(), indent=2)


RENDERERS = {"text": text, "md": markdown, "json": as_json}

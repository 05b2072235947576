"""The report as one self-contained HTML file: inline CSS and SVG, no script, no link out,
so a copy opens anywhere, offline."""

from __future__ import annotations

import datetime
import html
import platform
from collections.abc import Sequence
from typing import Any

from .. import __version__, tables
from .. import format as fmt
from ..record.summary import markdown
from ..views import TRIAL_COLUMNS, trial_rows, warmup_caption
from . import plots, series
from .load import Run

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1120px;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
code{font-size:12px} .muted{color:#666} .headline{font-size:16px;padding:8px 12px;
background:#fff6e5;border-left:4px solid #f0a020} table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right} td:nth-child(2),th:nth-child(2),
td:last-child{text-align:left} .finding{margin:8px 0} .finding ul{margin:2px 0}
figure{margin:8px 0} svg{max-width:100%;height:auto}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def render(run: Run) -> str:
    """The whole page for ``run``."""
    summary = run.summary
    procs, gpus = series.processes(run), series.gpus(run)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>gputop-train report: {_e(' '.join(summary['command'])[:80])}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>gputop-train session: <code>{_e(' '.join(summary['command']))}</code></h1>",
        f'<p class="muted">{_e(_when(summary))} · {_e(run.path.name)}</p>',
        *_headline(summary),
        "<h2>Figures (whole run, as the summary has them)</h2>",
        _figure_list(summary),
        "<h2>Over the run</h2>",
        '<p class="muted">Dashed magenta lines: where each phase began (a knob change, an '
        "autopilot rung), with its samples/s against phase 1. Long series are cut to "
        "time buckets: the line is each bucket's mean, the band its min-max.</p>",
        f'<figure id="timeline">{plots.timeline(run, procs, gpus)}</figure>',
    ]
    ranks = plots.ranks(summary)
    if ranks:
        parts += ["<h2>Ranks (end of run)</h2>", f'<figure id="ranks">{ranks}</figure>']
        parts.append(_rank_table(summary))
    split = plots.step_split(run)
    parts.append("<h2>Step split (each phase's measured steps)</h2>")
    parts.append(f'<figure id="split">{split}</figure>' if split else _na(_split_reason(summary)))
    memory = plots.memory(run, procs, gpus)
    parts.append("<h2>Memory</h2>")
    parts.append(
        f'<figure id="memory">{memory}</figure>'
        if memory
        else _na("no GPU memory measured (a CPU run, or no NVML and no CUDA allocator)")
    )
    parts += ["<h2>Phases</h2>", f'<p class="muted">{_e(warmup_caption().capitalize())}.</p>']
    parts.append(_phase_table(summary))
    autopilot = summary["figures"].get("autopilot")
    if autopilot:
        parts.append(f"<h2>{_e(autopilot['mode'].capitalize())}: {_e(autopilot['state'])}</h2>")
        parts.append(_table(TRIAL_COLUMNS, trial_rows(autopilot)))
    parts += ["<h2>Machine and versions</h2>", _machine(run)]
    if summary["notices"]:
        parts += ["<h2>Notices</h2>", "<ul>"]
        parts += [f"<li>{_e(n)}</li>" for n in summary["notices"]]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _when(summary: dict[str, Any]) -> str:
    started = datetime.datetime.fromtimestamp(summary["started_at"], datetime.timezone.utc)
    return (
        f"started {started:%Y-%m-%d %H:%M:%S} UTC on {summary['host']}, "
        f"{fmt.duration(summary['duration_s'])}"
    )


def _headline(summary: dict[str, Any]) -> list[str]:
    findings = summary["findings"]
    phases = summary["phases"]
    span = f"phase {phases[-1]['phase']}, the last" if len(phases) > 1 else "whole run"
    if not findings:
        why = summary["figures"].get("advice_wait") or f"no rule fired over the {span}"
        return [f'<p class="headline">No finding ({_e(span)}): {_e(why)}</p>']
    lines = [f'<p class="headline"><b>{_e(findings[0]["title"])}</b></p>']
    lines.append(f"<h2>Findings ({_e(span)}, warm-up excluded)</h2>")
    for finding in findings:
        lines.append(
            f'<div class="finding"><b>{_e(finding["title"])}</b> — {_e(finding["action"])}<ul>'
        )
        lines += [f"<li>{_e(e)}</li>" for e in finding["evidence"]]
        lines.append("</ul></div>")
    return lines


def _figure_list(summary: dict[str, Any]) -> str:
    """The summary's own figure lines (record/summary.py), word for word."""
    text = markdown(summary).split("\n## ")[0]
    items = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    return "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in items) + "</ul>"


def _table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _phase_table(summary: dict[str, Any]) -> str:
    """The phase table as every front end shows it (tables.PHASE_COLUMNS), with each phase's
    headline."""
    phases = [tables.PhaseLine.of_dict(p) for p in summary["phases"]]
    rows = [
        (*cells, p["headline"])
        for cells, p in zip(
            tables.cells(tables.PHASE_COLUMNS, phases), summary["phases"], strict=True
        )
    ]
    headers = tuple(column.header for column in tables.PHASE_COLUMNS)
    return _table((*headers, "headline finding"), rows)


def _rank_table(summary: dict[str, Any]) -> str:
    rows = [
        (
            str(r["rank"]) if r["rank"] is not None else fmt.NA, str(r["pid"]),
            str(r["host"] or fmt.NA), str(r["total_steps"]), fmt.ms(r["step_ms_p50"]),
            fmt.pct(r["data_wait_pct"]), fmt.ms(r.get("comm_ms_p50")),
            fmt.rate(r["samples_per_s"], "").strip(),
        )
        for r in summary["figures"]["ranks"]
    ]  # fmt: skip
    columns = ("rank", "PID", "host", "steps", "step p50", "data-wait", "comm wait p50",
               "samples/s")  # fmt: skip
    return _table(columns, rows)


def _split_reason(summary: dict[str, Any]) -> str:
    parts = summary["figures"].get("step_parts") or {}
    return f"no step split: {parts.get('reason') or 'no step was split (docs/steps.md)'}"


def _na(text: str) -> str:
    return f'<p class="muted">N/A: {_e(text)}</p>'


def _machine(run: Run) -> str:
    summary, meta = run.summary, run.recording.meta
    gpus = ", ".join(g or fmt.NA for g in summary["gpus"]) or "none (NVML unavailable)"
    rows = [
        ("host", summary["host"]),
        ("CPU cores", meta.get("cpu_count") or fmt.NA),
        ("GPUs", gpus),
        ("driver", summary["driver"] or fmt.NA),
        ("torch (the job's)", ", ".join(run.torch_versions) or fmt.NA),
        ("gputop-train (recorded / report)", f"{meta.get('gputop_train') or fmt.NA} / "
         f"{__version__}"),
        ("recording", f"{run.path} (format {meta.get('format')})"),
        ("report made with", f"Python {platform.python_version()}, matplotlib {_mpl()}"),
    ]  # fmt: skip
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _mpl() -> str:
    import matplotlib

    return str(matplotlib.__version__)

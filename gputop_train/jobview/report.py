"""``gputop-train job report FILE``: a recording of the job view (``--record``) told back:
its span, its nodes, what the verdict named and in how many of its lines, and its last view."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..format import duration, ms, pct


class ReportError(Exception):
    """The recording cannot be read: said in one line."""


def load(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The recorded views, and how many lines were not one (skipped, counted)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error.strerror or error}") from None
    views, bad = [], 0
    for line in text.splitlines():
        try:
            view = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(view, dict) and "nodes" in view and "findings" in view:
            views.append(view)
        else:
            bad += 1
    if not views:
        raise ReportError(f"{path}: no job view recorded in it (gputop-train job --record)")
    return views, bad


def summarize(views: list[dict[str, Any]], bad: int) -> dict[str, Any]:
    """What a report says, as one object (its JSON form)."""
    named: Counter[str] = Counter()
    for view in views:
        for text in {f["text"].split(";")[0] for f in view["findings"]}:
            named[text] += 1
    last = views[-1]
    return {
        "job": last["job"],
        "source": last["source"],
        "from": views[0]["at"],
        "to": last["at"],
        "lines": len(views),
        "skipped_lines": bad,
        "nodes": len(last["nodes"]),
        "ranks": len(last["ranks"]),
        "named": [{"finding": text, "lines": count} for text, count in named.most_common()],
        "last": last,
    }


def report(path: Path, form: str = "text") -> str:
    summary = summarize(*load(path))
    if form == "json":
        return json.dumps(summary, indent=2)
    last = summary["last"]
    lines = [
        f"job {summary['job']} ({summary['source']}): {summary['lines']} views over "
        f"{duration(summary['to'] - summary['from'])}, {summary['nodes']} nodes, "
        f"{summary['ranks']} ranks"
        + (
            f" ({summary['skipped_lines']} unreadable lines skipped)"
            if summary["skipped_lines"]
            else ""
        )
    ]
    lines.append("named:" if summary["named"] else "named: nothing (no straggler, no slow node)")
    lines += [
        f"  {n['finding']}: {n['lines']} of {summary['lines']} lines" for n in summary["named"]
    ]
    lines.append("last view, the worst nodes first:")
    for node in last["nodes"]:
        worst = (
            f"worst rank {node['worst_rank']} ({node['worst_cause']})"
            if node["worst_rank"] is not None
            else "no rank lags"
        )
        lines.append(
            f"  node {node['node']} ({node['host']}): step {ms(node['step_ms'])}, data-wait "
            f"{pct(node['data_wait_pct'])}, comm {ms(node['comm_ms'])}, {worst}, {node['state']}"
        )
    return "\n".join(lines)

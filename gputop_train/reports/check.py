"""``gputop-train check``: run a script headless for a while, then judge it against a baseline
recording or stated bounds, for CI (JUnit XML and a Markdown summary beside the verdict).

The run is the product's own headless launch (``python -m gputop_train --headless``), as a
user's, recorded; after ``--steps`` steps or ``--seconds`` seconds it is stopped as Ctrl+C
stops it (the monitor passes SIGINT to the job). A figure regresses when it is worse than the
baseline's by more than ``--max-regression`` *and* by more than the two runs' noise
(reports/measured.py); a figure neither run measured (a GPU's on a CPU runner) is skipped
with its reason, never failed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import format as fmt
from .box import MAX_LOAD_CHANGE_PCT
from .compare import BEYOND, Comparison, Row, compare, peak_memory
from .compare_format import markdown as compare_markdown
from .compare_format import noise_text, value_text
from .junit import Verdict, junit_xml
from .load import Run, load
from .measured import run_figures

SUITE = "gputop-train check"
# The figures a check gates on against a baseline: throughput first, then step time, then
# the GPU's (skipped with their reason where N/A).
GATED = ("samples_per_s", "tokens_per_s", "step_ms_p50", "gpu_util_pct")
# Seconds to wait for the job and monitor to stop after Ctrl+C: the stop ladder's SIGINT,
# SIGTERM and SIGKILL graces (10 + 5 s, docs/exits.md) and the summaries' writing.
STOP_GRACE_S = 30.0


class NotRun(RuntimeError):
    """The monitor ended before it recorded anything; the message says why, from its log."""


def _last_words(recording: Path) -> str:
    log = log_path(recording)
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    said = lines[-1].strip() if lines else "it said nothing"
    return f"{said} (all of its output: {log})"


@dataclass
class Bounds:
    max_regression_pct: float = 5.0
    max_memory_bytes: int | None = None
    min_samples_per_s: float | None = None
    max_step_ms: float | None = None
    # The cores other processes left free may differ this much between the runs (reports/box.py)
    max_load_change_pct: float = MAX_LOAD_CHANGE_PCT


@dataclass
class Outcome:
    verdicts: list[Verdict]
    comparison: Comparison | None
    run: Run
    seconds: float
    notes: list[str] = field(default_factory=list)
    not_judged: str = ""  # why the run was not judged against its baseline (exit 2)

    @property
    def failed(self) -> bool:
        return any(v.outcome == "failed" for v in self.verdicts)


def log_path(recording: Path) -> Path:
    """Where the monitor's and the job's messages go: a CI log stays the check's verdicts (a
    job stopped by Ctrl+C prints its KeyboardInterrupt, which reads as a failure)."""
    return recording.with_suffix(".check.log")


def run_job(
    target: list[str], recording: Path, steps: int | None, seconds: float | None
) -> tuple[int, bool]:
    """The job under the headless monitor, recorded; stopped after ``steps`` or ``seconds``.
    Returns the monitor's exit code and whether this check stopped it."""
    command = [sys.executable, "-m", "gputop_train", "--headless", "--format", "json",
               "--interval", "1", "--record", str(recording), *target]  # fmt: skip
    with log_path(recording).open("w") as log:
        return _watch(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True),
                      steps, seconds)  # fmt: skip


def _watch(monitor: subprocess.Popen[str], steps: int | None, seconds: float | None
           ) -> tuple[int, bool]:  # fmt: skip
    assert monitor.stdout is not None
    started = time.monotonic()
    stopped = False
    for line in monitor.stdout:
        try:
            status = json.loads(line)
        except ValueError:
            continue
        due = seconds is not None and time.monotonic() - started >= seconds
        reached = steps is not None and (status.get("total_steps") or 0) >= steps
        if not stopped and (due or reached):
            monitor.send_signal(signal.SIGINT)
            stopped = True
    for _ in range(2):  # SIGTERM, then SIGTERM again: the monitor SIGKILLs the job at once
        try:
            return monitor.wait(timeout=STOP_GRACE_S), stopped
        except subprocess.TimeoutExpired:
            monitor.send_signal(signal.SIGTERM)  # never SIGKILL: the job would be orphaned
    return monitor.wait(), stopped


def judge(
    run: Run, comparison: Comparison | None, bounds: Bounds, job_ok: bool, why: str
) -> list[Verdict]:
    verdicts = [Verdict("the job ran", "passed" if job_ok else "failed", why)]
    if comparison is not None:
        rows = {r.key: r for r in comparison.rows}
        gates = [_gate(rows[key], bounds.max_regression_pct) for key in GATED]
        verdicts += [_against_load(gate, comparison, bounds) for gate in gates]
    if bounds.max_memory_bytes is not None:
        peak = peak_memory(run.summary)
        verdicts.append(_bound("peak memory", peak, bounds.max_memory_bytes, "bytes", True))
    if bounds.min_samples_per_s is None and bounds.max_step_ms is None:
        return verdicts
    # Over the measured steps, as against a baseline: a short CI run's warm-up is left out.
    measured = run_figures(run).figures
    if bounds.min_samples_per_s is not None:
        rate = measured["samples_per_s"].value
        verdicts.append(
            _bound("samples/s", rate, bounds.min_samples_per_s, "samples/s", ceiling=False)
        )
    if bounds.max_step_ms is not None:
        step = measured["step_ms_p50"].value
        verdicts.append(_bound("step time p50", step, bounds.max_step_ms, "ms", ceiling=True))
    return verdicts


def _gate(row: Row, max_regression_pct: float) -> Verdict:
    name = f"{row.name} against the baseline"
    if row.a is None or row.b is None or row.change_pct is None:
        return Verdict(name, "skipped", f"N/A: {row.why}")
    shown = (f"{value_text(row.a, row.unit)} -> {value_text(row.b, row.unit)} "
             f"({row.change_pct:+.1f}%; noise ±{noise_text(row)})")  # fmt: skip
    worse = row.verdict == BEYOND and not row.better
    if worse and abs(row.change_pct) > max_regression_pct:
        return Verdict(name, "failed", f"regressed beyond noise and {max_regression_pct:g}%: "
                       + shown)  # fmt: skip
    return Verdict(name, "passed", shown)


def not_judged(comparison: Comparison | None, bounds: Bounds) -> str:
    """Why the gates against the baseline cannot be judged: the box differed beyond the line."""
    change = comparison.box_change if comparison is not None else None
    if change is None or not change.beyond(bounds.max_load_change_pct):
        return ""
    return (f"the box differed beyond the {bounds.max_load_change_pct:g}% line: {change.text()} "
            "on a machine with no idle core; rerun on a quieter machine, or raise "
            "--max-load-change")  # fmt: skip


def _against_load(gate: Verdict, comparison: Comparison, bounds: Bounds) -> Verdict:
    """A gate the box's load may explain, marked so; skipped where it is not judged."""
    if gate.outcome != "skipped" and not_judged(comparison, bounds):
        return Verdict(gate.name, "skipped", f"not judged (the box differed): {gate.message}")
    change = comparison.box_change
    if gate.outcome == "failed" and comparison.box_note and change and change.tighter == "B":
        return Verdict(gate.name, "failed", f"{gate.message}; the box's load may explain it: "
                       f"{change.text()}")  # fmt: skip
    return gate


def _bound(name: str, value: float | None, limit: float, unit: str, ceiling: bool) -> Verdict:
    label = f"{name} {'at most' if ceiling else 'at least'} {value_text(limit, unit)}"
    if value is None:
        return Verdict(label, "skipped", f"N/A: {name} was not measured in this run")
    ok = value <= limit if ceiling else value >= limit
    return Verdict(label, "passed" if ok else "failed", f"measured {value_text(value, unit)}")


def markdown(outcome: Outcome, report: str | None) -> str:
    failed = [v for v in outcome.verdicts if v.outcome == "failed"]
    head = f"FAILED: {len(failed)} of {len(outcome.verdicts)}" if failed else "PASSED"
    if outcome.not_judged and not failed:
        head = f"NOT JUDGED: {outcome.not_judged}"
    lines = [f"# gputop-train check: {head}", "",
             f"`{' '.join(outcome.run.summary['command'])}`, {fmt.duration(outcome.seconds)}", "",
             "| check | outcome | detail |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {v.name} | {v.outcome} | {v.message} |" for v in outcome.verdicts]
    if report:
        lines += ["", f"Plots: [{Path(report).name}]({report}) (self-contained HTML report)"]
    lines += [f"- {note}" for note in outcome.notes]
    if outcome.comparison is not None:
        text = compare_markdown(outcome.comparison).replace("# gputop-train compare", "")
        lines += ["", "## Against the baseline", text.lstrip("\n")]
    return "\n".join(lines) + "\n"


def check(
    target: list[str],
    recording: Path,
    baseline: Path | None,
    bounds: Bounds,
    steps: int | None,
    seconds: float | None,
) -> Outcome:
    """Run, load and judge (the baseline is read first: a bad one refuses before the run)."""
    before = load(baseline) if baseline else None
    started = time.monotonic()
    code, stopped = run_job(target, recording, steps, seconds)
    elapsed = time.monotonic() - started
    if not recording.exists():
        raise NotRun(f"the monitor exited ({code}) before it recorded: {_last_words(recording)}")
    run = load(recording)
    exit_code = run.summary["exit_code"]
    if stopped:
        job_ok, why = True, f"stopped by the check after its {_budget(steps, seconds)}"
    else:
        job_ok = code == 0 and exit_code in (0, None)
        why = f"exit code {exit_code if exit_code is not None else code}"
    notes = []
    steps_done = run.summary["figures"]["total_steps"]
    if steps and steps_done < steps:
        notes.append(f"the job ended after {steps_done} of the {steps} steps asked")
    comparison = compare(before, run) if before else None
    verdicts = judge(run, comparison, bounds, job_ok, why)
    return Outcome(verdicts, comparison, run, elapsed, notes, not_judged(comparison, bounds))


def _budget(steps: int | None, seconds: float | None) -> str:
    return f"{steps} steps" if steps is not None else f"{seconds:g} s"


def write_junit(path: Path, outcome: Outcome) -> None:
    path.write_text(junit_xml(SUITE, outcome.verdicts, outcome.seconds))

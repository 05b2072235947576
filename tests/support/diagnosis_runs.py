"""Diagnosis runs as benchmarks/diagnosis/scorecard.py reads them (summaries with phases, trials and
findings), for the scorecard's tests."""

from __future__ import annotations


def summary(headline: dict | None, trials: list[tuple[str, float]], roles: dict) -> dict:
    """A run's summary: phase 1 (baseline at 100/s) with ``headline``, then each trial's
    phase and a baseline phase after it at 100/s."""
    phases = [{"phase": 1, "samples_per_s": 100.0, "findings": [headline] if headline else []}]
    recorded = []
    for change, gain in trials:
        trial_phase = len(phases) + 1
        phases += [
            {"phase": trial_phase, "samples_per_s": 100.0 * gain, "findings": []},
            {"phase": trial_phase + 1, "samples_per_s": 100.0, "findings": []},
        ]
        recorded.append({"change": change, "phase": trial_phase, "baseline_phase": trial_phase - 1})
    return {"phases": phases, "autopilot": {"trials": recorded}, "knob_roles": roles}


def finding(id_: str, *changes: tuple[str, object], rules_out: tuple[str, ...] = ()) -> dict:
    return {
        "id": id_,
        "changes": [{"role": r, "value": v} for r, v in changes],
        "rules_out": list(rules_out),
    }


ROLES = {"num_workers": "workers", "input": "input_format", "precision": "precision"}

"""The scorecard never counts "healthy" right where a candidate gained 10%, even when the
healthy finding lists that candidate among its changes (issue 26: "GPU-bound (healthy)" was
said of eager transformers that had 1.3x left in one flag)."""

from __future__ import annotations

from benchmarks.diagnosis.scorecard import judge
from tests.support.diagnosis_runs import ROLES, finding, summary


def test_healthy_with_compile_among_its_changes_is_wrong_when_compile_pays() -> None:
    healthy = finding("gpu.bound", ("compile", True))
    roles = {**ROLES, "compile": "compile"}
    outcome = judge("s", summary(healthy, [("compile=true", 1.27)], roles))
    assert outcome.verdict == "wrong: says healthy, yet compile=true gained 1.27x"
    compile_rule = finding("gpu.compile", ("compile", True))
    assert judge("s", summary(compile_rule, [("compile=true", 1.27)], roles)).verdict == "right"

"""``PendingStep.host`` splits a step's marks in one pass, apart from ``split``'s loop, for
the listener's thread's sake (docs/benchmarks.md section 16): it must give ``split``'s parts."""

from __future__ import annotations

from itertools import accumulate, pairwise

from hypothesis import given
from hypothesis import strategies as st

from gputop_train.hook.step_parts import HOOK_END, STEP_END, PendingStep, split

KINDS = st.integers(min_value=0, max_value=HOOK_END)


@given(
    inner=st.lists(KINDS, max_size=12),
    ends=st.tuples(st.booleans(), st.booleans()),
    gaps=st.lists(st.floats(min_value=0.0, max_value=0.05), min_size=14, max_size=14),
    clean=st.booleans(),
)
def test_the_host_split_is_splits_on_any_marks(
    inner: list[int], ends: tuple[bool, bool], gaps: list[float], clean: bool
) -> None:
    kinds = ([STEP_END] if ends[0] else []) + inner + ([STEP_END] if ends[1] else [])
    times = list(accumulate([100.0, *gaps]))[: len(kinds)]
    pending = PendingStep([(k, t, None) for k, t in zip(kinds, times, strict=True)], clean, False)
    durations = [0.0, *((b - a) * 1000.0 for a, b in pairwise(times))]
    assert pending.host() == split(kinds, durations, "host", clean)

"""Typed events: the session's one input, recorded and read back through one registry.

The property: for any sequence of events, the live session's snapshot equals the snapshot of
a session replayed from its recording. And every recorded field is checked on the way back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop_train import events
from gputop_train.record.reader import Recording, apply, new_session, read, replay_all
from gputop_train.samples import CATEGORIES, GpuProcess, GpuSample, ProcSample, StackShares
from gputop_train.session.model import Session
from tests.support.clock import ManualClock

REPO = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000.0
PIDS = st.sampled_from([11, 12])
SMALL = st.floats(0.0, 1e4, allow_nan=False)
MAYBE = st.none() | SMALL
KNOB_SPECS = (
    {"name": "num_workers", "kind": "int", "value": 0, "min": 0, "max": 16},
    {"name": "amp", "kind": "bool", "value": False},
    {"name": "mode", "kind": "choice", "value": "a", "choices": ["a", "b"]},
)
KNOB_VALUES = st.sampled_from([0, 2, 4, True, False, "a", "b", None, 1.5])


def _row(step: int, t: float, step_ms: float | None) -> list[Any]:
    return [step, t, step_ms, 1.0, 32, 1, None, 1024, 2048, 4096]


hellos = st.builds(
    events.ProcessHello,
    pid=PIDS,
    argv=st.tuples(st.sampled_from(["train.py", "x"])),
    rank=st.none() | st.integers(0, 3),
    local_rank=st.none() | st.integers(0, 3),
    torch=st.none() | st.just("2.11"),
    host=st.none() | st.just("node"),
)
outcomes = st.builds(
    events.KnobOutcome,
    pid=PIDS,
    name=st.sampled_from(["num_workers", "amp", "mode", "nope"]),
    value=KNOB_VALUES,
    ok=st.booleans(),
    previous=KNOB_VALUES,
    step=st.none() | st.integers(0, 400),
    seq=st.none() | st.integers(0, 30),
    error=st.none() | st.just("refused: busy"),
    t=st.none() | st.floats(T0, T0 + 500, allow_nan=False),
    reverted=st.booleans(),
)
step_rows = st.builds(
    lambda pid, first, n, t, bad: events.StepRows(
        pid,
        tuple(_row(first + i, t + i * 0.1, 100.0) for i in range(n)) + (("bad",) if bad else ()),
    ),
    PIDS,
    st.integers(1, 300),
    st.integers(1, 30),
    st.floats(T0, T0 + 500, allow_nan=False),
    st.booleans(),
)
gpu_ticks = st.builds(
    lambda t, util, pid: events.GpuSampled(
        (
            GpuSample(
                0,
                t,
                name="NVIDIA H100",
                util_pct=util,
                throttle=("sw_power",),
                processes=(GpuProcess(pid, 1024, None),),
            ),
        )
    ),
    st.floats(T0, T0 + 500, allow_nan=False),
    MAYBE,
    PIDS,
)
procs = st.builds(
    lambda cpus, system: events.ProcsSampled(
        tuple(
            ProcSample(20 + i, 11, "python", "worker" if i else "main", c, 1, None, None, "R")
            for i, c in enumerate(cpus)
        ),
        system,
    ),
    st.lists(MAYBE, max_size=4),
    MAYBE,
)
facts = st.builds(
    lambda pid, frame: events.FactSeen.of(pid, frame),
    PIDS,
    st.sampled_from(
        [
            {"type": "loader", "num_workers": 4, "pin_memory": True, "shape": [32, 3]},
            {
                "type": "syncs",
                "count": 3,
                "sites": [{"file": "a", "line": 1, "op": "x", "count": 3}],
            },
            {"type": "flops", "flops": 10**12, "samples": 32, "step": 5},
            {"type": "model", "cuda": True, "autocast": "bfloat16", "capability": [9, 0]},
        ]
    ),
)
any_event = st.one_of(
    hellos,
    st.builds(events.ProcessGone, PIDS),
    st.builds(events.KnobsDeclared, PIDS, st.just(KNOB_SPECS)),
    st.builds(events.KnobRequested, st.sampled_from(["num_workers", "amp"]), KNOB_VALUES),
    outcomes,
    step_rows,
    gpu_ticks,
    procs,
    facts,
    st.builds(
        events.StacksSampled,
        st.builds(
            StackShares,
            st.just("MainThread"),
            st.integers(0, 500),
            st.fixed_dictionaries({c: SMALL for c in CATEGORIES}),
        ),
    ),
    st.builds(events.StacksExpected, st.floats(0.5, 20.0)),
    st.builds(
        events.AutopilotChanged,
        st.fixed_dictionaries(
            {"state": st.sampled_from(["trying", "done"]), "trials": st.just([])}
        ),
    ),
    st.builds(events.FindingsShown, st.just(({"id": "input.workers"},))),
    st.builds(events.NoticeAdded, st.text(max_size=20)),
    st.builds(events.ReadingTaken, st.just("gpm"), st.just({"sm": 50.0})),
    st.builds(events.FramesDropped, st.integers(0, 5)),
    st.builds(events.StopAsked, st.just("Ctrl+C")),
    st.builds(events.JobEnded, st.none() | st.integers(0, 2), st.just(("Traceback",))),
)


def _record_live(sequence: list[tuple[float, events.Event]]) -> tuple[Session, list[dict]]:
    """Run a live session over ``sequence``, its recording kept as a recorder writes it
    (kind, recorder time, payload, through JSON)."""
    clock = ManualClock(T0)
    session = Session(command=("train.py",), clock=clock, started_at=T0)
    lines: list[dict] = []

    def record(item: events.Event) -> None:
        kind, payload = events.encode(item)
        lines.append(json.loads(json.dumps({"kind": kind, "t": clock(), **payload}, default=str)))

    session.listener = record
    for dt, item in sequence:
        clock.advance(dt)
        session.apply(item)
    return session, lines


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(0.0, 5.0, allow_nan=False), any_event), max_size=40))
def test_the_live_session_equals_its_replay(sequence: list[tuple[float, events.Event]]) -> None:
    live, lines = _record_live(sequence)
    recording = Recording(
        Path("live.jsonl"), {"t": T0, "started_at": T0, "command": ["train.py"]}, lines
    )
    replayed = replay_all(recording)
    assert recording.skipped_events == 0  # everything the session wrote reads back
    replayed.clock.t = live.clock()  # type: ignore[attr-defined]
    for window in (10.0, 600.0):
        a = live.snapshot(window, with_phases=True)
        b = replayed.snapshot(window, with_phases=True)
        assert a == b
    assert live.steps() == replayed.steps()
    assert live.gpu_ticks() == replayed.gpu_ticks()
    for kind in events.FACT_FRAMES:
        assert live.facts(kind) == replayed.facts(kind)


def test_every_kind_has_one_class_and_reads_back_what_it_wrote() -> None:
    assert len(events.EVENTS) == len(set(events.EVENTS.values()))
    sample = events.GpuSampled((GpuSample(0, T0, util_pct=50.0, throttle=("hw",)),))
    for item in (sample, events.JobEnded(1, ("boom",)), events.StopAsked("q")):
        kind, payload = events.encode(item)
        assert events.decode(json.loads(json.dumps({"kind": kind, **payload}))) == item


@pytest.mark.parametrize(
    "line",
    [
        {"kind": "notice", "text": 5},
        {"kind": "dropped", "frames": "many"},
        {"kind": "dropped", "frames": True},
        {"kind": "job_ended", "exit_code": 1.5},
        {"kind": "job_ended", "exit_code": 1, "stderr_tail": [1, 2]},
        {"kind": "gpus", "names": "H100"},
        {"kind": "gpu", "samples": [{"index": "0", "t": 1.0}]},
        {"kind": "procs", "samples": [{"pid": 1, "name": 7}]},
        {"kind": "stacks", "thread": "m", "samples": 1, "shares": {"data": "x"}},
        {"kind": "knob_outcome", "pid": 1, "frame": {"name": 3}},
        {"kind": "hello", "pid": "11", "frame": {}},
        {"kind": "fact", "pid": 11, "frame": {"type": "loader", "num_workers": "four"}},
        {"kind": "fact", "pid": 11, "frame": {"type": "unknown"}},
        {"kind": "fact", "pid": 11, "frame": {"type": "notice", "text": "not a fact"}},
        {"kind": "fact", "pid": 11, "frame": {"type": "syncs", "count": 1, "sites": [{}]}},
        {"kind": "steps", "pid": 11},
        {"kind": "no-such-kind"},
    ],
)
def test_a_recorded_field_of_the_wrong_type_is_refused(line: dict) -> None:
    with pytest.raises(events.BadEvent):
        events.decode(line)
    assert apply(Session(), {**line, "t": T0}) is False  # skipped and counted by the replay


def test_a_field_this_version_does_not_know_is_ignored() -> None:
    item = events.decode({"kind": "notice", "text": "hi", "colour": "red"})
    assert item == events.NoticeAdded("hi")


def test_the_h100_ladder_recording_plays_whole_and_records_back_the_same() -> None:
    # Recorded on an H100 in 2026-11 by the code before typed events: every line still
    # decodes, and a session replayed from it, recorded again, replays to the same state.
    recording = read(REPO / "docs" / "examples" / "h100-ladder.jsonl")
    first = replay_all(recording)
    assert recording.skipped_events == 0
    lines: list[dict] = []

    def record(item: events.Event) -> None:
        kind, payload = events.encode(item)
        lines.append(json.loads(json.dumps({"kind": kind, "t": again_clock.t, **payload})))

    again, again_clock = new_session(recording)
    again.listener = record
    for line in recording.events:
        again_clock.t = line["t"]
        apply(again, line)
    rerecorded = Recording(recording.path, recording.meta, lines)
    second = replay_all(rerecorded)
    assert rerecorded.skipped_events == 0
    second.clock.t = first.clock()  # type: ignore[attr-defined]
    whole = first.clock() - first.started_at + 1.0
    assert first.snapshot(whole, with_phases=True) == second.snapshot(whole, with_phases=True)
    assert first.snapshot(whole, with_phases=True).total_steps > 1000


def test_recording_md_documents_every_event_kind_and_nothing_else() -> None:
    text = (REPO / "docs" / "recording.md").read_text()
    table = text.split("| kind | fields | what |", 1)[1].split("\n\n", 1)[0]
    kinds = set()
    for line in table.splitlines()[2:]:
        kinds |= set(re.findall(r"`(\w+)`", line.split("|")[1]))
    assert kinds - {"meta"} == set(events.EVENTS)


def test_the_machines_cores_come_in_through_apply_and_a_replay_takes_the_headers() -> None:
    # The monitor applies its count unrecorded (the header holds it); a replay applies the
    # header's, so live and replayed sessions reckon idle cores alike.
    live, lines = _record_live([])
    live.apply(events.CoresCounted(12), record=False)
    assert lines == [] and live._series().cpu_count == 12
    header = {"t": T0, "started_at": T0, "command": ["train.py"], "cpu_count": 12}
    replayed = replay_all(Recording(Path("live.jsonl"), header, lines))
    assert replayed._series().cpu_count == 12
    unknown = replay_all(Recording(Path("old.jsonl"), {**header, "cpu_count": "12"}, lines))
    assert unknown._series().cpu_count is None  # a header's count of another type: unknown

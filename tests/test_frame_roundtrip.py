"""Every frame the hook sends, through the live hook client into a recorded session and back:
each event is built from its frame by one ``from_frame``, so what a live monitor sees and
what its replay sees are the same, field for field (issue 40: the live hello dropped
``world_size``, the recording kept it)."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path
from typing import Any

from gputop_train import events, wire
from gputop_train.monitor.hook_client import HookClient, _Connection
from gputop_train.record.reader import Recording, replay_all
from gputop_train.session.model import Session
from tests.support.clock import ManualClock

T0 = 1_800_000_000.0
PID = 4242  # the socket's PID: the session's, whatever a frame says
KNOB = {"name": "num_workers", "kind": "int", "value": 0, "min": 0, "max": 8, "help": "w"}
FACTS: list[wire.Frame] = [
    wire.Loader(
        num_workers=4,
        pin_memory=True,
        persistent_workers=False,
        batch_size=32,
        dtype="float32",
        shape=[32, 3],
        bytes=384,
        pinned=True,
        constructed_at={"file": "/w/train.py", "line": 40, "op": "loader = DataLoader(ds)"},
    ),
    wire.Syncs(count=2, sites=[{"file": "a.py", "line": 3, "op": "x.item()", "count": 2}], step=4),
    wire.Flops(flops=10**12, samples=32, step=3),
    wire.Model(
        step=2,
        cuda=True,
        capability=[9, 0],
        device_uuid="GPU-1",
        autocast="bfloat16",
        param_dtype="float32",
        tf32_matmul=True,
        tf32_cudnn=False,
        channels_last=False,
        compiled=False,
        matmul_precision="high",
        optimizer="AdamW",
        optimizer_foreach=True,
        optimizer_fused=False,
    ),
    wire.Workload(
        step=3,
        census={"ops": 657, "attention_at": {"file": "/w/gpt.py", "line": 87, "op": "softmax"}},
        profile={"kernels": 9},
        peak={"tflops": 400.0},
    ),
    wire.StepParts(step=1, model="GPT", reason="timed"),
    wire.MemoryAudit(
        step=3,
        params_bytes=10,
        grads_bytes=11,
        optimizer_bytes=12,
        allocated_peak=13,
        reserved_peak=14,
        allocated=15,
        reserved=16,
        alloc_retries=1,
        ooms=0,
        device_total=80,
    ),
]
OUTCOME = wire.KnobApplied(
    name="num_workers", value=4, ok=True, previous=0, error=None, step=2, reverted=False,
    t=T0 + 1, id="r1", seq=1,
)  # fmt: skip
REFUSAL = wire.KnobApplied(
    name="num_workers", value=4, ok=False, previous=None, error="busy", step=None,
    reverted=True, t=T0 + 2, id=7, seq=None,
)  # fmt: skip
HELLO = wire.Hello(
    pid=PID,
    ppid=1,
    host="node",
    argv=["train.py", "--lr", "1"],
    python="3.12",
    torch="2.11",
    rank=1,
    local_rank=1,
    world_size=4,
    started_at=T0,
    step_fields=list(wire.STEP_FIELDS),
    step=0,
    knobs=[KNOB],
    knob_history=[OUTCOME.fields()],
    latest=[FACTS[2].fields()],
    rows_recorded_for=1,  # another monitor's: this one records the rows itself
    rows_unrecorded_from=5,
)
# The hello's fields the session has no place for (the monitor reads rows_recorded_for to
# know who records the rows; the socket names the PID): each one is listed here, so a new
# field is either carried below or said to be left.
HELLO_NOT_CARRIED = {"pid", "ppid", "python", "started_at", "step_fields", "step"}
HELLO_NOT_CARRIED |= {"rows_recorded_for", "rows_unrecorded_from"}
HELLO_OWN_EVENTS = {"knobs", "knob_history", "latest"}  # each its events, compared below
ROWS = [[1, T0 + 1, 100.0, 10.0, 8, 1, 90.0, 1, 2, 3, 0.5, 16, 1.0, 2, 3, 4, 5, 6, "gpu"]]
FROM_HOOK: list[wire.Frame] = [
    HELLO,
    wire.Steps(PID, ROWS, at=T0 + 1),
    wire.Knobs([KNOB]),
    OUTCOME,
    REFUSAL,
    *FACTS,
    wire.Notice("hi", pid=PID),
    wire.RowsUnrecorded(pid=PID, from_step=2, reason="a write failed"),  # for another monitor
    wire.Waiting(pid=PID, at=T0 + 3, step=2, collective="all_reduce", since=T0 + 2),
    wire.Bye(PID),
]
COMMANDS = {wire.SetKnob, wire.ScanSyncs, wire.WhereWaiting, wire.AutopilotDone}
COMMANDS |= {wire.KeepTrials, wire.Alive}


def test_the_list_holds_every_frame_the_hook_sends_with_every_field_set() -> None:
    assert {type(f) for f in FROM_HOOK} | COMMANDS == set(wire.FRAMES.values())
    for cls in {type(f) for f in FROM_HOOK}:
        examples = [f for f in FROM_HOOK if type(f) is cls]
        for field in dataclasses.fields(cls):
            assert any(getattr(f, field.name) is not None for f in examples), field.name


def test_every_hook_frame_reads_the_same_live_and_replayed_field_for_field() -> None:
    live, applied, lines, client = _live(FROM_HOOK)
    replayed_events = [events.decode(line) for line in lines]
    assert replayed_events == applied  # every event, every field, back from the recording
    replayed = replay_all(_recording(lines))
    replayed.clock.t = live.clock()  # type: ignore[attr-defined]
    assert live.snapshot(600.0) == replayed.snapshot(600.0)
    for session in (live, replayed):
        assert [p.world_size for p in session.snapshot(600.0).hooked] == [4]  # live too

    hello = next(e for e in applied if isinstance(e, events.ProcessHello))
    carried = {f.name for f in dataclasses.fields(hello)} - {"pid"}
    assert carried | HELLO_NOT_CARRIED | HELLO_OWN_EVENTS == {
        f.name for f in dataclasses.fields(wire.Hello)
    }
    for name in carried:
        sent = getattr(HELLO, name)
        assert getattr(hello, name) == (tuple(sent) if isinstance(sent, list) else sent), name
    assert hello.pid == PID

    outcomes = [e for e in applied if isinstance(e, events.KnobOutcome)]
    assert [_outcome_frame(o) for o in outcomes] == [
        OUTCOME,  # from the hello's history
        OUTCOME,  # and as its own frame
        REFUSAL,
    ]
    facts = [e.frame for e in applied if isinstance(e, events.FactSeen)]
    assert facts == [FACTS[2], *FACTS]  # the hello's latest first; typed, every field
    assert [e.rows for e in applied if isinstance(e, events.StepRows)] == [tuple(ROWS)]
    declared = [e.knobs for e in applied if isinstance(e, events.KnobsDeclared)]
    assert declared == [(KNOB,), (KNOB,)]
    assert events.NoticeAdded(f"[pid {PID}] hi") in applied
    assert client.waiting[PID] == FROM_HOOK[-2]  # a stall's answer: live only, by design


def _outcome_frame(outcome: events.KnobOutcome) -> wire.KnobApplied:
    """The knob_applied frame an outcome holds (its recorded ``frame``), typed."""
    return wire.KnobApplied.decode(outcome.payload()["frame"])


def _live(frames: list[wire.Frame]) -> tuple[Session, list[events.Event], list[dict], Any]:
    """The frames through a hook client into a live session whose recorder keeps the lines
    as the recorder writes them (through JSON)."""
    clock = ManualClock(T0 + 5)
    session = Session(command=("train.py",), clock=clock, started_at=T0)
    applied: list[events.Event] = []
    lines: list[dict] = []

    def record(item: events.Event) -> None:
        if not item.informational:
            applied.append(item)
        kind, payload = events.encode(item)
        if not item.informational:
            lines.append(json.loads(json.dumps({"kind": kind, "t": clock(), **payload})))

    session.listener = record
    client = HookClient(session, set, directory=Path("/nonexistent"))
    ours, theirs = socket.socketpair()
    connection = _Connection(PID, ours)
    try:
        for frame in frames:
            (raw,) = wire.FrameDecoder().feed(frame.encode())
            client._dispatch(connection, raw)
    finally:
        ours.close()
        theirs.close()
        client.close()
    return session, applied, lines, client


def _recording(lines: list[dict]) -> Recording:
    return Recording(
        Path("live.jsonl"), {"t": T0, "started_at": T0, "command": ["train.py"]}, lines
    )

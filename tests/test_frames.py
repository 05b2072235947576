"""The wire owns its frames: one class per frame type, encode and a checking decode, the
hook client's dispatch by class, and docs/protocol.md held to the list of classes."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from gputop_train import wire
from gputop_train.cli import parse_args
from gputop_train.hook import listener
from gputop_train.monitor.hook_client import HookClient, _Connection
from gputop_train.session.model import Session

REPO = Path(__file__).resolve().parent.parent

EXAMPLES: list[wire.Frame] = [
    wire.Hello(pid=7, argv=["train.py"], rank=0, torch="2.11", knobs=[], latest=[]),
    wire.Steps(pid=7, rows=[[1, 2.0, None, 0.5, 32, 1, None, None, None, None]]),
    wire.Notice("hook disabled", pid=7),
    wire.Bye(7),
    wire.Knobs([{"name": "num_workers", "kind": "int", "value": 0}]),
    wire.KnobApplied(name="num_workers", value=4, ok=True, previous=0, step=10, t=1.5, seq=1),
    wire.Loader(num_workers=4, pin_memory=True, dtype="float32", shape=[32, 3], bytes=96),
    wire.Syncs(count=2, sites=[{"file": "a.py", "line": 3, "op": "item", "count": 2}], step=4),
    wire.Flops(flops=10**12, samples=32, step=3),
    wire.Model(step=2, cuda=True, capability=[9, 0], autocast="bfloat16", compiled=False),
    wire.Workload(step=3, census={"ops": 657, "analytic_flops": 7 * 10**12}, peak=None),
    wire.StepParts(step=1, model="GPT", reason=None),
    wire.MemoryAudit(step=3, params_bytes=10, grads_bytes=10, alloc_retries=0, ooms=0),
    wire.SetKnob(1, "num_workers", 4),
    wire.SetKnob(2, "autocast", "bf16", at_step=40, trial=True),
    wire.KeepTrials(["autocast"]),
    wire.Alive(),
    wire.ScanSyncs(),
    wire.AutopilotDone(),
    wire.WhereWaiting(),
    wire.Waiting(pid=7, at=100.0, step=20, collective="all_reduce", since=98.0),
    wire.RowsUnrecorded(pid=7, from_step=12, reason="a write failed: Read-only file system"),
]


def test_every_frame_type_has_an_example_here() -> None:
    assert {type(frame) for frame in EXAMPLES} == set(wire.FRAMES.values())


@pytest.mark.parametrize("frame", EXAMPLES, ids=lambda f: f.TYPE)
def test_a_frame_reads_back_as_it_was_sent(frame: wire.Frame) -> None:
    (raw,) = wire.FrameDecoder().feed(frame.encode())
    assert raw["type"] == frame.TYPE and raw["v"] == wire.VERSION
    assert wire.decode_frame(raw) == frame


def test_the_pre_encoded_steps_path_sends_the_frame_the_class_encodes() -> None:
    rows: list[list[Any]] = [
        [1, 1.5, None, 2.25, 64, 1, None, None, None, None],
        [2, 3.0, 1e-7, 0, 0, 2, 5, 6, 7, 8],
    ]
    fast = wire.Steps.encode_rows(9, [wire.encode_row(row) for row in rows])
    assert fast == wire.Steps(9, rows).encode()


def test_a_refusal_has_no_seq_key() -> None:
    (raw,) = wire.FrameDecoder().feed(wire.KnobApplied(name="x", value=1, ok=False).encode())
    assert "seq" not in raw


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "hello", "pid": "7"},
        {"type": "hello", "pid": 7, "argv": "train.py"},
        {"type": "hello", "pid": 7, "rank": True},
        {"type": "steps", "pid": 7, "rows": "1,2,3"},
        {"type": "steps", "rows": []},
        {"type": "notice", "text": 5},
        {"type": "knob_applied", "name": "x", "value": 1, "ok": "yes"},
        {"type": "knob_applied", "name": "x", "value": 1, "ok": True, "t": 1e400},
        {"type": "loader", "num_workers": "four"},
        {"type": "loader", "shape": [32, "3"]},
        {"type": "syncs", "count": 1, "sites": ["a.py:3"]},
        {"type": "flops", "flops": 1.5},
        {"type": "model", "cuda": 1},
        {"type": "workload", "census": {"ops": "657"}},
        {"type": "workload", "census": [657]},
        {"type": "workload", "profile": {"top_non_math": "aten::add"}},
        {"type": "workload", "peak": {"tflops": True}},
        {"type": "workload", "census": {"attention_at": {"file": "a.py", "line": 3}}},
        {"type": "no_such_frame"},
    ],
)
def test_a_frame_with_a_field_of_the_wrong_type_is_counted_and_dropped(raw: dict) -> None:
    assert wire.decode_frame(raw) is None
    session = Session()
    client, connection = _client(session)
    try:
        client._dispatch(connection, raw)
    finally:
        connection.sock.close()
        client.close()
    assert session.snapshot().dropped_frames == 1
    assert not session.hooked_pids()


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ({"census": {"ops": "657"}}, "census.ops must be int or null, not '657'"),
        ({"census": [657]}, "census must be Census or null, not [657]"),
        ({"profile": {"kernel_ms": float("nan")}}, "profile.kernel_ms must be float or null"),
        ({"profile": {"top_non_math": [3]}}, "profile.top_non_math must be str, not 3"),
        ({"peak": {"reason": 5}}, "peak.reason must be str or null, not 5"),
        ({"census": {"attention_at": {"file": "a.py"}}}, "census.attention_at has no line"),
    ],
)
def test_a_malformed_workload_part_is_refused_naming_its_key(part: dict, reason: str) -> None:
    with pytest.raises(TypeError) as refused:
        wire.Workload.decode({"type": "workload", "step": 3, **part})
    assert str(refused.value).startswith(reason)


# A workload frame of the H100 GPT ladder's recording (docs/results/gpt-ladder-h100-2026-11-25T04h51
# .tar.gz, ladder.jsonl), as the hook sent it.
H100_WORKLOAD = (
    '{"type": "workload", "step": 4, "census": {"ops": 2177, "optimizer_ops": 1480, '
    '"fused_attention": 0, "manual_attention": 12, "convolutions": 0, "fp8_matmuls": 0, '
    '"params": 124475904, "non_embedding_params": 123689472, "analytic_flops": 7007297863680, '
    '"tokens": 8192, "sequence": 1024, "analytic_note": null, "matmul_precision": "fp32", '
    '"census_error": null}, "profile": {"kernels": 1866, "triton_kernels": 0, "kernel_ms": '
    '199.086, "non_math_pct": 24.3, "top_non_math": ["void at::native::vectorized_elementwise_'
    'kernel<4, at::native", "void at::native::elementwise_kernel<128, 2, at::native::gpu_", '
    '"void (anonymous namespace)::softmax_warp_backward<float, flo"], "probe_ms": 275.0}, '
    '"peak": {"precision": "fp32", "device": "NVIDIA H100 80GB HBM3", "repeats": 2, '
    '"enqueue_ms": 2.1, "run_ms": 5.321, "tflops": 51.65852655401475, "reason": null}}'
)


def test_a_workload_frame_as_the_hook_sends_it_decodes_typed_and_a_newer_key_is_ignored() -> None:
    raw = json.loads(H100_WORKLOAD)
    raw["census"]["from_a_newer_hook"] = [1]
    frame = wire.Workload.decode(raw)
    assert frame.census is not None and frame.census.get("analytic_flops") == 7007297863680
    assert frame.peak is not None and frame.peak.get("tflops") == 51.65852655401475
    skipped = wire.Workload.decode({"type": "workload", "census": {"skipped": "compiled"}})
    assert skipped.census == {"skipped": "compiled"}  # every key may be absent


FLOPS = {"type": "flops", "flops": 10**12, "samples": 32, "step": 3}


def test_the_hook_client_hands_the_session_typed_events_by_frame_class() -> None:
    session = Session(clock=lambda: 2000.0)
    client, connection = _client(session)
    knob = {"name": "num_workers", "kind": "int", "value": 0, "min": 0, "max": 8}
    frames = [
        wire.Hello(pid=1, argv=["train.py"], rank=0, knobs=[knob], latest=[FLOPS]),
        wire.Steps(1, [[n, 1990.0 + n, 100.0, 10.0, 8, 1, None, None, None, None] for n in (1, 2)]),
        wire.KnobApplied(name="num_workers", value=4, ok=True, previous=0, step=2, seq=1, t=1.0),
        wire.KnobApplied(name="num_workers", value=4, ok=False, error="busy"),
        wire.Loader(num_workers=4, pin_memory=False),
        wire.Notice("hi"),
        wire.Bye(1),
    ]
    try:
        for frame in frames:
            (raw,) = wire.FrameDecoder().feed(frame.encode())
            client._dispatch(connection, raw)
    finally:
        connection.sock.close()
        client.close()
    snap = session.snapshot()
    assert snap.hooked[0].pid == connection.pid and snap.hooked[0].argv == ("train.py",)
    assert snap.total_steps == 2
    assert session.knob("num_workers").value == 4
    assert session.facts(wire.Loader) == [wire.Loader(num_workers=4, pin_memory=False)]
    # the hello's latest, for a late monitor
    assert [f.fields() for f in session.facts(wire.Flops)] == [FLOPS]
    assert any("knob num_workers: busy" in n for n in snap.notices)
    assert any(n.endswith("] hi") for n in snap.notices)
    assert connection.said_bye and snap.dropped_frames == 0


def test_the_send_period_lives_in_the_wire_and_sets_the_default_refresh() -> None:
    assert listener.SEND_PERIOD_S == wire.SEND_PERIOD_S
    assert parse_args(["x.py"]).refresh == wire.SEND_PERIOD_S


def test_protocol_md_documents_every_frame_class_and_nothing_else() -> None:
    documented = _documented_frames((REPO / "docs" / "protocol.md").read_text())
    assert set(documented) == set(wire.FRAMES)
    for frame_type, cls in wire.FRAMES.items():
        missing = {f.name for f in dataclasses.fields(cls)} - documented[frame_type]
        assert not missing, f"docs/protocol.md: {frame_type} does not document {missing}"


def _documented_frames(text: str) -> dict[str, set[str]]:
    """Each frame table row's type (first column) and the `names` in the rest of its row."""
    rows: dict[str, set[str]] = {}
    for section in ("## Frames from the hook", "## Frames from the monitor"):
        body = re.split(r"\n#{2,} ", text.split(section, 1)[1], maxsplit=1)[0]
        for line in body.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            match = re.fullmatch(r"`(\w+)`", cells[0]) if line.startswith("|") else None
            if match:
                rows[match.group(1)] = set(re.findall(r"`(\w+)`", "|".join(cells[1:])))
    return rows


def _client(session: Session) -> tuple[HookClient, Any]:
    client = HookClient(session, set, directory=Path("/nonexistent"))
    ours, _theirs = socket.socketpair()
    return client, _Connection(4242, ours)

"""The wire format: one contract, tolerant of garbage."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop_train import wire


def test_frames_round_trip_and_carry_the_version() -> None:
    decoder = wire.FrameDecoder()
    frames = decoder.feed(wire.encode(wire.STEPS, pid=7, rows=[[1, 2.0]]))
    assert frames == [{"v": wire.VERSION, "type": "steps", "pid": 7, "rows": [[1, 2.0]]}]


def test_rows_encoded_once_make_the_same_steps_frame() -> None:
    rows: list[list[Any]] = [
        [1, 1.5, None, 2.25, 64, 1, None, None, None, None],
        [2, 3.0, 1e-7, 0, 0, 2, 5, 6, 7, 8],
    ]
    joined = wire.encode_steps(9, [wire.encode_row(row) for row in rows])
    assert joined == wire.encode(wire.STEPS, pid=9, rows=rows)


def test_a_frame_split_across_reads_is_reassembled() -> None:
    data = wire.encode(wire.HELLO, pid=1) + wire.encode(wire.BYE, pid=1)
    decoder = wire.FrameDecoder()
    first = decoder.feed(data[:10])
    rest = decoder.feed(data[10:])
    assert first == [] and [f["type"] for f in rest] == ["hello", "bye"]


def test_malformed_and_foreign_frames_are_counted_and_dropped() -> None:
    decoder = wire.FrameDecoder()
    frames = decoder.feed(
        b'not json\n[1,2]\n{"v":1}\n{"v":99,"type":"steps"}\n\xff\xfe\n'
        + wire.encode(wire.BYE, pid=3)
    )
    assert [f["type"] for f in frames] == ["bye"]
    assert decoder.malformed == 4
    assert decoder.unsupported_version == 1


def test_an_endless_line_is_dropped_as_it_arrives_up_to_its_newline() -> None:
    decoder = wire.FrameDecoder(max_frame_bytes=1024)
    for _ in range(100):  # 100 KB without a newline: never buffered beyond the limit
        assert decoder.feed(b"x" * 1024) == []
    assert decoder.malformed == 1
    frames = decoder.feed(b'still the long line"}\n' + wire.encode(wire.BYE, pid=1))
    assert [f["type"] for f in frames] == ["bye"]
    assert decoder.malformed == 1


def test_a_line_just_over_the_limit_in_one_read_is_refused() -> None:
    decoder = wire.FrameDecoder(max_frame_bytes=64)
    frame = wire.encode(wire.NOTICE, text="y" * 100)
    assert decoder.feed(frame + wire.encode(wire.BYE, pid=1))[0]["type"] == "bye"
    assert decoder.malformed == 1


@pytest.mark.parametrize(
    "line",
    [
        b'{"v":1,"type":"set_knob","name":"workers","value":Infinity}',
        b'{"v":1,"type":"set_knob","name":"workers","value":-Infinity}',
        b'{"v":1,"type":"set_knob","name":"workers","value":1e400}',
        b'{"v":1,"type":"set_knob","name":"workers","value":1,"id":NaN}',
        b'{"v":1,"type":"x","n":' + b"9" * 5000 + b"}",  # past int's digit limit
        b'{"v":1,"type":"x","deep":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"v":1,"type":"x","n":1' + b"0" * 250 + b"e99}",  # 1e349: a 2-digit exponent
        b'{"v":1,"type":"x","n":-' + b"9" * 309 + b".5}",  # no exponent at all
    ],
    ids=["inf", "-inf", "overflow", "nan-id", "huge-int", "nested", "long-e99", "long-float"],
)
def test_frames_with_numbers_json_forbids_or_deep_nesting_are_malformed(line: bytes) -> None:
    decoder = wire.FrameDecoder()
    assert decoder.feed(line + b"\n" + wire.encode(wire.BYE, pid=1))[0]["type"] == "bye"
    assert decoder.malformed == 1


@settings(max_examples=500, deadline=None)
@given(
    mantissa=st.from_regex(r"-?(0|[1-9]\d{0,330})(\.\d{1,30})?", fullmatch=True),
    exponent=st.from_regex(r"([eE][+-]?\d{1,4})?", fullmatch=True),
)
def test_numbers_decode_as_the_strict_parse_would(mantissa: str, exponent: str) -> None:
    """Any JSON number reads as Python's own parse reads it, or is refused where that parse
    gives a non-finite float."""
    number = mantissa + exponent
    try:
        parsed = json.loads(number)
        expected: object = ValueError if parsed in (math.inf, -math.inf) else parsed
    except ValueError:
        expected = ValueError
    try:
        got: object = wire.decode(f"[{number}, {number}]")
    except ValueError:
        got = ValueError
    assert got == (expected if expected is ValueError else [expected, expected])


# -- property-based: whatever the bytes, the decoder returns frames and never raises --------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=300), max_size=20))
def test_any_bytes_in_any_pieces_decode_without_raising(chunks: list[bytes]) -> None:
    decoder = wire.FrameDecoder(max_frame_bytes=256)
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            assert isinstance(frame, dict) and isinstance(frame["type"], str)
            assert frame["v"] == wire.VERSION


@settings(max_examples=200, deadline=None)
@given(
    fields=st.dictionaries(st.sampled_from(["pid", "rows", "text", "id"]), json_values),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=5),
)
def test_every_encoded_frame_comes_back_whole_however_it_is_cut(
    fields: dict[str, Any], cuts: list[int]
) -> None:
    data = wire.encode(wire.NOTICE, **fields) * 2
    decoder = wire.FrameDecoder()
    frames, start = [], 0
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        frames += decoder.feed(data[start:cut])
        start = cut
    assert frames == [{"v": wire.VERSION, "type": wire.NOTICE, **fields}] * 2
    assert decoder.malformed == 0


@settings(max_examples=300, deadline=None)
@given(value=json_values | st.floats() | st.binary(max_size=8))
def test_knob_validation_returns_the_declared_type_or_refuses(value: object) -> None:
    specs: list[dict[str, Any]] = [
        {"name": "n", "kind": "int", "min": 0, "max": 64},
        {"name": "b", "kind": "bool"},
        {"name": "c", "kind": "choice", "choices": ["fp32", "bf16", 3]},
    ]
    for spec in specs:
        try:
            taken = wire.validate_knob(spec, value)
        except ValueError as error:
            assert len(str(error)) < 200  # a refusal never echoes a big value back
            continue
        if spec["kind"] == "int":
            assert type(taken) is int and 0 <= taken <= 64
        elif spec["kind"] == "bool":
            assert type(taken) is bool
        else:
            assert any(type(taken) is type(c) and taken == c for c in spec["choices"])

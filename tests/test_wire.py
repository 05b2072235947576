"""The wire format: one contract, tolerant of garbage."""

from __future__ import annotations

from gputop_train import wire


def test_frames_round_trip_and_carry_the_version() -> None:
    decoder = wire.FrameDecoder()
    frames = decoder.feed(wire.encode(wire.STEPS, pid=7, rows=[[1, 2.0]]))
    assert frames == [{"v": wire.VERSION, "type": "steps", "pid": 7, "rows": [[1, 2.0]]}]


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


def test_an_endless_line_is_discarded_instead_of_buffered_forever() -> None:
    decoder = wire.FrameDecoder()
    decoder.feed(b"x" * (wire.MAX_FRAME_BYTES + 1))
    assert decoder.malformed == 1
    assert decoder.feed(wire.encode(wire.BYE, pid=1))[0]["type"] == "bye"

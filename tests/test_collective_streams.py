"""FSDP2's collectives run on side streams, overlapped with the compute: their wait is the
compute stream's stall on them, not their span (hook/collectives.py; issue 45). A fake CUDA
module stands in for torch.cuda: which stream recorded which event, and which stream waited."""

from __future__ import annotations

import types
from typing import Any

from gputop_train.hook.collectives import CollectiveClock


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream | None = None) -> None:
        self.stream = stream or CUDA.current


class FakeStream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle
        self.device = "cuda:0"
        self.waited: list[FakeEvent] = []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and other.cuda_stream == self.cuda_stream

    def __hash__(self) -> int:
        return self.cuda_stream

    def record_event(self, event: FakeEvent | None = None) -> FakeEvent:
        event = event or FakeEvent()
        event.record(self)
        return event

    def wait_event(self, event: FakeEvent) -> None:
        self.waited.append(event)

    def wait_stream(self, stream: FakeStream) -> None:
        self.wait_event(stream.record_event())


class FakeCuda(types.SimpleNamespace):
    def __init__(self) -> None:
        super().__init__(Event=FakeEvent, Stream=FakeStream)
        self.default = FakeStream(0)
        self.current = self.default

    def current_stream(self) -> FakeStream:
        return self.current

    def default_stream(self, device: Any = None) -> FakeStream:
        return self.default


CUDA = FakeCuda()
CUDA_TENSOR = types.SimpleNamespace(is_cuda=True)


def clock() -> tuple[CollectiveClock, list[Any]]:
    """A clock on the fake CUDA module, its stream patches undone by the returned list."""
    global CUDA
    CUDA = FakeCuda()
    made = CollectiveClock(types.SimpleNamespace(cuda=CUDA), lambda text: None)
    undo: list[Any] = []
    made._undo = undo
    return made, undo


def all_gather(*args: Any, **kwargs: Any) -> None:
    return None  # NCCL enqueues it on the current stream and returns at once


def test_a_collective_on_a_side_stream_is_timed_where_the_compute_stream_waits_for_it() -> None:
    timer, undo = clock()
    try:
        gather = timer.timed_call("all_gather_into_tensor", all_gather)
        side = FakeStream(7)
        CUDA.current = side
        gather(CUDA_TENSOR, CUDA_TENSOR)  # FSDP2: on its all-gather stream
        done = side.record_event()
        CUDA.current = CUDA.default
        assert timer.take_step() == (0.0, [])  # its span on the side stream is no wait
        CUDA.default.wait_event(done)  # the compute stream waits for the all-gather
        host_ms, pairs = timer.take_step()
        assert host_ms == 0.0 and len(pairs) == 1
        start, end = pairs[0]
        assert start.stream is CUDA.default and end.stream is CUDA.default
        assert CUDA.default.waited == [done]  # the wait itself still happens
    finally:
        for step in reversed(undo):
            step()


def test_waits_on_other_streams_and_between_collective_streams_are_not_timed() -> None:
    timer, undo = clock()
    try:
        gather = timer.timed_call("all_gather_into_tensor", all_gather)
        side, other, copies = FakeStream(7), FakeStream(8), FakeStream(9)
        CUDA.current = side
        gather(CUDA_TENSOR, CUDA_TENSOR)
        CUDA.current = other
        gather(CUDA_TENSOR, CUDA_TENSOR)  # a reduce-scatter stream, say
        CUDA.current = CUDA.default
        other.wait_stream(side)  # one collective stream after another: not the compute's
        CUDA.default.wait_stream(copies)  # a prefetcher's copy stream: an input wait
        assert timer.take_step() == (0.0, [])
        CUDA.default.wait_stream(side)  # wait_stream records on the side stream: timed
        assert len(timer.take_step()[1]) == 1
    finally:
        for step in reversed(undo):
            step()


def test_a_collective_on_the_compute_stream_is_timed_in_the_call() -> None:
    timer, undo = clock()
    gather = timer.timed_call("all_reduce", all_gather)
    gather(CUDA_TENSOR)
    _, pairs = timer.take_step()
    assert len(pairs) == 1 and not undo  # no side stream: the streams are not patched


def test_a_failing_stream_leaves_the_wait_to_happen_and_disables_the_timing() -> None:
    timer, undo = clock()
    try:
        gather = timer.timed_call("all_gather_into_tensor", all_gather)
        side = FakeStream(7)
        CUDA.current = side
        gather(CUDA_TENSOR, CUDA_TENSOR)
        done = side.record_event()
        CUDA.current = CUDA.default

        def broken(enable_timing: bool = False) -> None:
            raise RuntimeError("no events")

        CUDA.Event = broken
        timer._torch.cuda.Event = broken
        CUDA.default.wait_event(done)
        assert CUDA.default.waited == [done] and not timer.enabled
    finally:
        for step in reversed(undo):
            step()

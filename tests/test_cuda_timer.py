"""GPU step timing against a scripted CUDA clock: right pairs, no syncs, events reused safely."""

from __future__ import annotations

from types import SimpleNamespace

from gputop_train.hook.cuda_timer import CudaStepTimer


class FakeGpuClock:
    """A GPU timeline: events complete when the test says the GPU got that far."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.done_upto_ms = 0.0
        self.created = 0
        self.synchronized = False

    def module(self) -> SimpleNamespace:
        clock = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                clock.created += 1
                self.at: float | None = None

            def record(self) -> None:
                self.at = clock.now_ms

            def query(self) -> bool:
                return self.at is not None and self.at <= clock.done_upto_ms

            def elapsed_time(self, end: Event) -> float:
                assert self.query() and end.query(), "elapsed_time on an unfinished event syncs"
                return end.at - self.at

            def synchronize(self) -> None:
                clock.synchronized = True

        return SimpleNamespace(cuda=SimpleNamespace(Event=Event))


def test_gpu_time_is_read_only_once_the_gpu_got_there() -> None:
    gpu = FakeGpuClock()
    timer = CudaStepTimer(gpu.module())
    for step in range(3):
        gpu.now_ms = step * 10.0
        timer.mark_start()
        gpu.now_ms += 7.0
        timer.mark_end()
    assert timer.poll() == []  # the GPU has not finished anything: nothing is read, no wait
    gpu.done_upto_ms = 17.0
    assert timer.poll() == [7.0, 7.0]
    gpu.done_upto_ms = 100.0
    assert timer.poll() == [7.0]
    assert not gpu.synchronized


def test_steps_without_batches_start_at_the_previous_end_even_with_reused_events() -> None:
    gpu = FakeGpuClock()
    timer = CudaStepTimer(gpu.module())
    results = []
    for step in range(50):
        gpu.now_ms = step * 5.0 + 5.0
        timer.mark_end()  # no batch: the step spans from the previous end
        gpu.done_upto_ms = gpu.now_ms - 5.0  # the GPU runs one step behind
        results += timer.poll()
    assert results[0] is None  # the first step has nothing to start from
    assert results[1:] == [5.0] * (len(results) - 1)
    assert gpu.created < 10  # events come back from the pool instead of being re-created


def test_only_the_chosen_steps_are_timed_and_every_step_is_reported_in_order() -> None:
    # A fast loop times one step in a few (the step split's period): the others record no
    # event, wait on nothing and read None, in their place among the timed ones.
    gpu = FakeGpuClock()
    timer = CudaStepTimer(gpu.module())
    chosen = [step % 4 == 3 for step in range(12)]  # time the step after each chosen one
    for step in range(12):
        gpu.now_ms = step * 10.0
        timer.mark_start()
        gpu.now_ms += 7.0
        timer.mark_end(time_next=chosen[step])
    # Two events for each of the 3 timed steps, and the end of each step before one (it may
    # open that step); none for the other 6 steps.
    assert gpu.created == 9
    assert timer.poll() == []  # the first step's end has not run: nothing behind it either
    gpu.done_upto_ms = 1000.0
    times = [7.0, None, None, None] * 3
    assert timer.poll() == times
    assert not gpu.synchronized


def test_a_step_not_timed_still_waits_for_its_end_when_a_figure_needs_its_gpu_work() -> None:
    gpu = FakeGpuClock()
    timer = CudaStepTimer(gpu.module())
    timer.mark_end(time_next=False)  # the first step, timed: its end is recorded
    gpu.now_ms = 10.0
    timer.mark_end(time_next=False, needs_end=True)  # a step with masks still on the GPU
    gpu.done_upto_ms = 5.0
    assert timer.poll() == [None]  # the first step read (no start: N/A); the second waits
    gpu.done_upto_ms = 10.0
    assert timer.poll() == [None]  # its end ran: its figures may be read now

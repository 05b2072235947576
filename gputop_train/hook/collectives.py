"""Time each rank waits in collectives, per step, without syncing the training thread.

Under DDP every rank meets the others at each gradient all-reduce, so their step times come
out equal; what tells the slow rank from the others is where they wait. This module times:

- the DDP reducer's all-reduces: DDP's own (C++) all-reduce and comm hooks are left as they
  are; the rank's wait is from the moment its backward compute is done (the gradient of the
  model's first parameter, the last one backward computes, is accumulated: one Python hook a
  step) to ``backward()`` returning, which is where ``finalize_backward`` blocks on the
  all-reduces;
- explicit ``torch.distributed`` calls (barrier, all_reduce, broadcast, all-gathers,
  reduce-scatters...) made synchronously: the time in the call;
- asynchronous ones (FSDP's all-gathers and reduce-scatters): the time in ``Work.wait()``.

On CPU tensors (gloo) these are the host's blocking times. On CUDA tensors (NCCL) the host
does not block; the wait is the compute stream's: a CUDA event recorded on the current stream
before the call and one after it (or, for DDP, when the last gradient is accumulated and when
``backward()`` returns), read later with ``Event.query()`` when the step's own GPU time is
read. A collective issued on a side stream (FSDP2 runs its all-gathers and reduce-scatters on
streams of their own, overlapped with the compute) does not stall the compute stream where
it runs: its span there is not a wait (on two H200s an unslowed FSDP2 job read ~80 ms of an
84 ms step so, issue 45). The compute stream stalls where it waits for that stream's event
(``Stream.wait_event``/``wait_stream``): that wait is timed, by an event pair on the waiting
stream around it.

Every timing step is guarded: an error disables the timing (said once) and the collective
itself runs as if unhooked.

A Python DDP comm hook was tried first (the default all-reduce plus clock reads in its
future's callback): its callbacks run on gloo's thread and take the GIL from the training
thread, +833 us of CPU a step with 4 buckets on the dev box against the loop unhooked
(git show 6a2d3ea:benchmarks/overhead/comm_hook_cost.py; docs/benchmarks.md section 12).
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from collections.abc import Callable
from typing import Any

# The synchronous/asynchronous collectives of torch.distributed that a step may wait in.
TIMED_CALLS = (
    "all_reduce",
    "barrier",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_gather_object",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "all_to_all",
    "all_to_all_single",
    "reduce",
    "gather",
    "scatter",
    "broadcast_object_list",
    "monitored_barrier",
    "_broadcast_coalesced",  # DDP's buffer and parameter broadcasts
)


class CollectiveClock:
    """Per-step collective wait of one process: host seconds, plus CUDA event pairs."""

    def __init__(self, torch_module: Any, notice: Callable[[str], None]) -> None:
        self._torch = torch_module
        self._notice = notice
        self.enabled = True
        self.seen = False  # any collective timed in this process
        self.cuda_collectives = False  # a collective on CUDA tensors seen (NCCL): waits are
        # then the stream's
        self._local = threading.local()  # depth: the outermost timed call counts
        self._lock = threading.Lock()
        self._host_s = 0.0
        self._cuda_pairs: list[tuple[Any, Any]] = []
        # DDP: when the current backward's compute was done (its last gradient), host clock
        # and CUDA event; the wait is from there to backward() returning.
        self._grads_done: float | None = None
        self._grads_done_event: Any = None
        # A DDP model was built: from then on the hook's backward wrapper (patches.py) calls
        # backward_returned after each backward; until then it skips the call.
        self.ddp_models = False
        # What the training thread is in now, for a stalled job's dump: (name, wall clock).
        self.current: tuple[str, float] | None = None
        self._in_ddp_wait_since: float | None = None  # wall clock, while in finalize
        # Side streams a collective ran on (their handles), and what to undo the streams'
        # patches with (install's list): the compute stream's waits on them are timed.
        self._collective_streams: set[int] = set()
        self._undo: list[Callable[[], None]] | None = None

    # -- the wait of one step (training thread, at the step boundary) ---------------------

    def take_step(self) -> tuple[float | None, list[tuple[Any, Any]]]:
        """The host milliseconds waited since the last step (None: no collective seen yet)
        and the CUDA event pairs still to be read for it."""
        if not self.seen:  # nothing timed yet, so nothing to take: no lock a step
            return None, []
        with self._lock:
            host_s, self._host_s = self._host_s, 0.0
            pairs, self._cuda_pairs = self._cuda_pairs, []
        return host_s * 1000.0, pairs

    def waiting_in(self) -> tuple[str | None, float | None]:
        """The collective the training thread waits in now and since when (None, None: none):
        for a stall's dump."""
        current = self.current
        if current is not None:
            return current[0], current[1]
        since = self._in_ddp_wait_since
        if since is not None:
            return "all_reduce (DDP gradient buckets)", since
        return None, None

    # -- timing ----------------------------------------------------------------------------

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def timed_call(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """``original`` with its blocking time added to the step (outermost call only)."""
        clock = self

        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not clock.enabled or clock._depth():
                return original(*args, **kwargs)
            started = clock._enter(name, args)
            blocked = True
            try:
                result = original(*args, **kwargs)
                # An asynchronous call returns its Work: its wait is timed in Work.wait().
                blocked = result is None
            finally:
                clock._leave(started if blocked else None)
            return result

        call.__gputop_original__ = original  # type: ignore[attr-defined]
        return call

    def timed_wait(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``Work.wait`` with its blocking time added to the step."""
        clock = self

        @functools.wraps(original)
        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            if not clock.enabled or clock._depth():
                return original(work, *args, **kwargs)
            started = clock._enter("wait", (), on_cuda=clock.cuda_collectives)
            try:
                return original(work, *args, **kwargs)
            finally:
                clock._leave(started)

        wait.__gputop_original__ = original  # type: ignore[attr-defined]
        return wait

    def _enter(
        self, name: str, args: tuple[Any, ...], on_cuda: bool = False
    ) -> tuple[float, Any] | None:
        try:
            self._local.depth = 1
            self.current = (name, time.time())
            if _on_cuda(args):
                on_cuda = self.cuda_collectives = True
                if self._on_side_stream():
                    self.seen = True
                    return None  # its span is its stream's; the compute's wait is timed there
            event = self._cuda_event() if on_cuda else None
            return (time.perf_counter(), event)
        except Exception as error:
            self._fail(error)
            return None

    def _leave(self, started: tuple[float, Any] | None) -> None:
        self._local.depth = 0
        self.current = None
        if started is None or not self.enabled:
            return
        try:
            begun, event = started
            elapsed = time.perf_counter() - begun
            self.seen = True
            if event is not None:
                end = self._cuda_event()
                with self._lock:
                    self._cuda_pairs.append((event, end))
            else:
                with self._lock:
                    self._host_s += elapsed
        except Exception as error:
            self._fail(error)

    def _cuda_event(self, stream: Any = None) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record(stream)
        return event

    # -- side streams (FSDP2) ---------------------------------------------------------------

    def _on_side_stream(self) -> bool:
        """Whether the current CUDA stream is not its device's default one: note it as a
        collective's stream (its waiters are timed from now on)."""
        cuda = self._torch.cuda
        stream = cuda.current_stream()
        if stream == cuda.default_stream(stream.device):
            return False
        if not self._collective_streams and self._undo is not None:
            _install_stream_waits(self, self._undo)
        self._collective_streams.add(stream.cuda_stream)
        return True

    def after_collective(self, stream: Any, event: Any) -> None:
        """``stream`` recorded ``event``: where it ran a collective, a wait on that event is a
        wait on the collective."""
        if not self.enabled:
            return
        try:
            if stream.cuda_stream in self._collective_streams:
                event.__gputop_collective__ = True
        except Exception as error:
            self._fail(error)

    def timed_stream_wait(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``Stream.wait_event`` with the waiting stream's stall on a collective's event timed:
        an event pair on the waiting stream around it (not a collective stream's own wait)."""
        clock = self

        @functools.wraps(original)
        def wait_event(stream: Any, event: Any) -> Any:
            if not (clock.enabled and getattr(event, "__gputop_collective__", False)):
                return original(stream, event)
            try:
                if stream.cuda_stream in clock._collective_streams:
                    return original(stream, event)
                start = clock._cuda_event(stream)
            except Exception as error:
                clock._fail(error)
                return original(stream, event)
            result = original(stream, event)
            try:
                end = clock._cuda_event(stream)
                with clock._lock:
                    clock._cuda_pairs.append((start, end))
            except Exception as error:
                clock._fail(error)
            return result

        wait_event.__gputop_original__ = original  # type: ignore[attr-defined]
        return wait_event

    # -- DDP --------------------------------------------------------------------------------

    def grads_done(self, parameter: Any) -> None:
        """The DDP model's first parameter has its gradient: backward's compute is done and
        what is left of ``backward()`` is the wait for the all-reduces (autograd thread)."""
        if not self.enabled:
            return
        try:
            self._grads_done = time.perf_counter()
            self._in_ddp_wait_since = time.time()
            cuda = bool(getattr(parameter, "is_cuda", False))
            self._grads_done_event = self._cuda_event() if cuda else None
            self.seen = True
        except Exception as error:
            self._fail(error)

    def backward_returned(self) -> None:
        """``backward()`` returned (training thread): DDP's wait, if a DDP model's compute
        finished in it, is from then to now."""
        done, self._grads_done = self._grads_done, None
        self._in_ddp_wait_since = None
        if done is None or not self.enabled:
            return
        try:
            event, self._grads_done_event = self._grads_done_event, None
            if event is not None:  # the stream waits on NCCL's all-reduces in finalize
                end = self._cuda_event()
                with self._lock:
                    self._cuda_pairs.append((event, end))
            else:
                with self._lock:
                    self._host_s += max(0.0, time.perf_counter() - done)
        except Exception as error:
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self.enabled:
            self.enabled = False
            self._notice(
                f"collective timing disabled after an internal error: {error!r}; "
                "training and its collectives go on untimed"
            )


def _on_cuda(args: tuple[Any, ...]) -> bool:
    """Whether a call's tensors are CUDA tensors (its wait is then on a stream). The tensors
    come first, or second after a process group (``_broadcast_coalesced``)."""
    for arg in args[:2]:
        if isinstance(arg, (list, tuple)) and arg:
            arg = arg[0]
        if hasattr(arg, "is_cuda"):
            return bool(arg.is_cuda)
    return False


def read_pairs(pairs: list[tuple[Any, Any]]) -> float | None:
    """Milliseconds of CUDA event pairs whose end has run; None while one has not."""
    total = 0.0
    for start, end in pairs:
        if not end.query():
            return None
        total += start.elapsed_time(end)
    return total


# -- installing ----------------------------------------------------------------------------


def install(clock: CollectiveClock, undo: list[Callable[[], None]]) -> None:
    """Wrap torch.distributed's collectives, ``Work.wait`` and DDP's comm hook registration."""
    dist = importlib.import_module("torch.distributed")
    if not dist.is_available():
        return
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    for name in TIMED_CALLS:
        original = getattr(dist, name, None)
        if original is None or hasattr(original, "__gputop_original__"):
            continue
        timed = clock.timed_call(name, original)
        modules = [m for m in (dist, c10d) if getattr(m, name, None) is original]
        for module in modules:
            setattr(module, name, timed)
        undo.append(functools.partial(_restore, modules, name, original))
    clock._undo = undo
    work = getattr(dist, "Work", None)
    if work is not None and not hasattr(work.wait, "__gputop_original__"):
        original_wait = work.wait
        work.wait = clock.timed_wait(original_wait)
        undo.append(functools.partial(setattr, work, "wait", original_wait))
    _install_ddp(clock, undo)


def _restore(modules: list[Any], name: str, original: Any) -> None:
    for module in modules:
        setattr(module, name, original)


def _install_stream_waits(clock: CollectiveClock, undo: list[Callable[[], None]]) -> None:
    """Once a collective ran on a side stream: tag the events such streams record
    (``wait_stream`` records one too) and time the other streams' waits on them."""
    stream_cls = clock._torch.cuda.Stream
    original_record, original_wait = stream_cls.record_event, stream_cls.wait_event
    if hasattr(original_wait, "__gputop_original__"):
        return

    @functools.wraps(original_record)
    def record_event(stream: Any, event: Any = None) -> Any:
        recorded = original_record(stream, event)
        clock.after_collective(stream, recorded)
        return recorded

    stream_cls.record_event = record_event
    stream_cls.wait_event = clock.timed_stream_wait(original_wait)
    undo.append(functools.partial(setattr, stream_cls, "record_event", original_record))
    undo.append(functools.partial(setattr, stream_cls, "wait_event", original_wait))


def _install_ddp(clock: CollectiveClock, undo: list[Callable[[], None]]) -> None:
    """Every DDP model, when built, gets a post-accumulate-grad hook on its first parameter
    (backward computes its gradient last), and the clock hears when each backward returns
    from then on (``ddp_models``: the hook's one ``torch.autograd.backward`` wrapper,
    patches.py, calls ``backward_returned``). DDP's all-reduce and the script's comm hooks
    are left untouched."""
    ddp_cls = importlib.import_module("torch.nn.parallel").DistributedDataParallel
    original_init = ddp_cls.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if not clock.enabled:
            return
        try:
            first = next((p for p in self.module.parameters() if p.requires_grad), None)
            if first is not None:
                first.register_post_accumulate_grad_hook(clock.grads_done)
                clock.ddp_models = True
        except Exception as error:
            clock._fail(error)

    ddp_cls.__init__ = __init__
    undo.append(functools.partial(setattr, ddp_cls, "__init__", original_init))

"""Time each rank waits in collectives, per step, without syncing the training thread.

Under DDP every rank meets the others at each gradient all-reduce, so their step times come
out equal; what tells the slow rank from the others is where they wait. This module times:

- the DDP reducer's all-reduces, through a comm hook that is the default all-reduce plus
  two clock reads (a user's own comm hook is wrapped the same way, never replaced): the
  rank's wait is from its last bucket's launch (its backward compute done) to its buckets'
  completion, which is where ``finalize_backward`` blocks;
- explicit ``torch.distributed`` calls (barrier, all_reduce, broadcast, all-gathers,
  reduce-scatters...) made synchronously: the time in the call;
- asynchronous ones (FSDP's all-gathers and reduce-scatters): the time in ``Work.wait()``.

On CPU tensors (gloo) these are the host's blocking times. On CUDA tensors (NCCL) the host
does not block; the wait is the compute stream's: a CUDA event recorded on the current stream
before the call and one after it (or, for DDP, in the future's callback, whose stream waits
on the collective), read later with ``Event.query()`` when the step's own GPU time is read.

Every timing step is guarded: an error disables the timing (said once) and the collective
itself runs as if unhooked; the DDP hook always returns the all-reduce's own future.
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
        # DDP buckets of the current backward: [launch, completion or None], host clock.
        self._buckets: list[list[float | None]] = []
        self._bucket_events: list[list[Any]] = []  # [start event, end event or None]
        # What the training thread is in now, for a stalled job's dump: (name, wall clock).
        self.current: tuple[str, float] | None = None
        self._open_buckets = 0
        self._bucket_since = 0.0

    # -- the wait of one step (training thread, at the step boundary) ---------------------

    def take_step(self) -> tuple[float | None, list[tuple[Any, Any]]]:
        """The host milliseconds waited since the last step (None: no collective seen yet)
        and the CUDA event pairs still to be read for it."""
        with self._lock:
            host_s, self._host_s = self._host_s, 0.0
            buckets, self._buckets = self._buckets, []
            pairs, self._cuda_pairs = self._cuda_pairs, []
            events, self._bucket_events = self._bucket_events, []
        if buckets and all(done is not None for _, done in buckets):
            last_launch = max(launch for launch, _ in buckets if launch is not None)
            last_done = max(done for _, done in buckets if done is not None)
            host_s += max(0.0, last_done - last_launch)
        if events and all(end is not None for _, end in events):
            # The stream's wait for DDP's buckets: from the last bucket's launch to its
            # completion (NCCL runs a process group's buckets in order on one stream).
            pairs.append((events[-1][0], events[-1][1]))
        if not self.seen:
            return None, pairs
        return host_s * 1000.0, pairs

    def waiting_in(self) -> dict[str, Any] | None:
        """The collective the training thread waits in now, if any: for a stall's dump."""
        current = self.current
        if current is not None:
            return {"collective": current[0], "since": current[1]}
        if self._open_buckets > 0:
            return {"collective": "all_reduce (DDP gradient buckets)", "since": self._bucket_since}
        return None

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

    def _cuda_event(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    # -- DDP --------------------------------------------------------------------------------

    def ddp_hook(self, inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """A DDP comm hook: ``inner`` (the default all-reduce, or the user's hook), with the
        bucket's launch and completion noted. The future DDP waits on is always ``inner``'s
        result, chained: the gradients are the same with or without the timing."""
        clock = self

        # Unannotated: DDP checks a hook's annotations, and these module's are strings.
        def hook(state, bucket):
            entry = clock._bucket_launched(bucket) if clock.enabled else None
            future = inner(state, bucket)
            if entry is None:
                return future
            return future.then(functools.partial(clock._bucket_done, entry))

        return hook

    def _bucket_launched(self, bucket: Any) -> list[Any] | None:
        try:
            cuda = bool(bucket.buffer().is_cuda)
            entry: list[Any] = [cuda, None]
            if cuda:
                pair: list[Any] = [self._cuda_event(), None]
                entry[1] = pair
                with self._lock:
                    self._bucket_events.append(pair)
            else:
                times: list[float | None] = [time.perf_counter(), None]
                entry[1] = times
                with self._lock:
                    self._buckets.append(times)
            if self._open_buckets == 0:
                self._bucket_since = time.time()
            self._open_buckets += 1
            self.seen = True
            return entry
        except Exception as error:
            self._fail(error)
            return None

    def _bucket_done(self, entry: list[Any], future: Any) -> Any:
        """The then-callback: runs when the all-reduce completes (gloo: on its thread; NCCL:
        with the current stream made to wait on the collective). Returns its value."""
        value = future.value()  # raises the collective's own error, as DDP expects
        try:
            self._open_buckets = max(0, self._open_buckets - 1)
            if entry[0]:
                entry[1][1] = self._cuda_event()
            else:
                entry[1][1] = time.perf_counter()
        except Exception as error:
            self._fail(error)
        return value

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
    work = getattr(dist, "Work", None)
    if work is not None and not hasattr(work.wait, "__gputop_original__"):
        original_wait = work.wait
        work.wait = clock.timed_wait(original_wait)
        undo.append(functools.partial(setattr, work, "wait", original_wait))
    _install_ddp(clock, undo)


def _restore(modules: list[Any], name: str, original: Any) -> None:
    for module in modules:
        setattr(module, name, original)


def _install_ddp(clock: CollectiveClock, undo: list[Callable[[], None]]) -> None:
    """Every DDP model gets the timed default all-reduce as its comm hook when built; a
    comm hook the script registers later runs inside the timed one (DDP takes one hook)."""
    ddp_cls = importlib.import_module("torch.nn.parallel").DistributedDataParallel
    original_init = ddp_cls.__init__
    original_register = ddp_cls.register_comm_hook
    original_builtin = ddp_cls._register_builtin_comm_hook

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if not clock.enabled:
            return
        try:
            delegate: dict[str, Any] = {"hook": None, "state": None}
            self.__gputop_delegate__ = delegate
            hook = clock.ddp_hook(_delegating_allreduce(delegate))
            original_register(self, self.process_group, hook)
        except Exception as error:
            self.__gputop_delegate__ = None
            clock._fail(error)

    def register_comm_hook(self: Any, state: Any, hook: Any) -> None:
        delegate = getattr(self, "__gputop_delegate__", None)
        if delegate is None:
            return original_register(self, state, hook)
        self._check_comm_hook(hook)
        if delegate["hook"] is not None:
            raise RuntimeError(
                "register_comm_hook or register_builtin_comm_hook can only be called once."
            )
        delegate["hook"], delegate["state"] = hook, state
        self._comm_hooks.append((hook, state))
        if self.logger is not None:
            self.logger._set_comm_hook_name(hook.__qualname__)
        return None

    def _register_builtin_comm_hook(self: Any, comm_hook_type: Any) -> None:
        delegate = getattr(self, "__gputop_delegate__", None)
        if delegate is None:
            return original_builtin(self, comm_hook_type)
        hook = _python_builtin(comm_hook_type)
        if hook is None:
            raise RuntimeError(
                f"gputop-train's DDP timing cannot run the builtin comm hook {comm_hook_type}; "
                "run without the hook (GPUTOP_TRAIN_HOOK=0) to use it"
            )
        return register_comm_hook(self, None, hook)

    for name, patched in (
        ("__init__", __init__),
        ("register_comm_hook", register_comm_hook),
        ("_register_builtin_comm_hook", _register_builtin_comm_hook),
    ):
        original = getattr(ddp_cls, name)
        functools.update_wrapper(patched, original)
        setattr(ddp_cls, name, patched)
        undo.append(functools.partial(setattr, ddp_cls, name, original))


def _delegating_allreduce(delegate: dict[str, Any]) -> Callable[[Any, Any], Any]:
    """DDP's default all-reduce (``allreduce_hook``), or the script's own hook once it
    registers one."""
    hooks = importlib.import_module("torch.distributed.algorithms.ddp_comm_hooks.default_hooks")

    def allreduce(process_group, bucket):
        hook = delegate["hook"]
        if hook is not None:
            return hook(delegate["state"], bucket)
        return hooks.allreduce_hook(process_group, bucket)

    return allreduce


def _python_builtin(comm_hook_type: Any) -> Callable[[Any, Any], Any] | None:
    """The Python twin of a builtin comm hook (the same arithmetic)."""
    hooks = importlib.import_module("torch.distributed.algorithms.ddp_comm_hooks.default_hooks")
    return {
        "ALLREDUCE": hooks.allreduce_hook,
        "FP16_COMPRESS": hooks.fp16_compress_hook,
    }.get(getattr(comm_hook_type, "name", str(comm_hook_type)).split(".")[-1])

"""The per-process agent: turns DataLoader and optimizer events into step rows.

Everything here runs on the training thread, so it does the least it can: a few clock
reads, one CUDA event record, an append to a bounded ring. Anything that goes wrong
disables the agent (said once on stderr) and training carries on untouched.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import wire
from .builtin_knobs import BuiltinKnobs
from .collectives import CollectiveClock, read_pairs
from .cuda_timer import CudaStepTimer
from .feeds import Feeds
from .kernel_profile import KernelProfile
from .knobs import KnobBoard
from .loss_guard import LossGuard
from .matmul_peak import MatmulPeak, matmul_precision
from .memory_audit import MemoryAudit, allocator_now
from .model_probe import MODEL_COLUMNS, ModelColumns, ModelProbe, StepCounts
from .primary import NOT_PRIMARY, TOOK_OVER, PrimaryElection
from .probe_schedule import ProbeSchedule
from .probes import FlopCounter, SyncScanner, force_eager, model_facts
from .step_parts import OPT_START
from .workload import Census

# Enough history for a monitor that attaches minutes late, at a few KB per 100 steps.
RING_STEPS = 8192
# The allocator's figures cost ~57 µs a read inside a fast loop (memory_audit.allocator_now):
# sample them, not every step.
MEMORY_PERIOD_S = 0.1
# Steps whose GPU time is still outstanding; past this the GPU is hopelessly behind.
MAX_STEPS_AWAITING_GPU = 256

# The step after which the built-in knobs are declared: by then the optimizer has stepped
# once and the loader that fed it, the model and the script's own autocast are known.
BUILTIN_KNOBS_STEP = 1

# How long an exiting job waits for the monitor that launched it to connect.
WAIT_FOR_MONITOR_S = 3.0


class Agent:
    """Step detection and bookkeeping for one training process."""

    def __init__(self, torch_module: Any, ring_steps: int = RING_STEPS) -> None:
        self._torch = torch_module
        self.pid = os.getpid()
        self.enabled = True
        self.active = False
        self.listener: Any = None
        self._ring: deque[list[Any]] = deque(maxlen=ring_steps)
        self._notices: deque[str] = deque(maxlen=64)
        self._lock = threading.Lock()
        self._step = 0
        self._last_end: float | None = None
        self._feeds = Feeds()  # DataLoader iterators active since the last optimizer step
        self._counted_samples: int | None = None  # count_samples() for loops without a loader
        self._batches = 0  # batches of any loader since the last step (starts the GPU timer)
        self._autocast_dtype: str | None = None  # the autocast entered during this step
        self._primary = PrimaryElection()  # the optimizer (and thread) whose steps count
        self._rebind_builtins = False  # the loop moved to a new optimizer: knobs built anew
        self._told_handover = False
        self._timer: CudaStepTimer | None = None
        self.collectives: CollectiveClock | None = None  # set by patches.install
        self._comm_pairs: dict[int, list[Any]] = {}  # step -> CUDA event pairs still to read
        self._awaiting_gpu: deque[list[Any]] = deque()
        self._awaiting_counts: deque[StepCounts] = deque()  # beside _awaiting_gpu, in step
        self._counted_tokens: int | None = None  # count_tokens() overrides the forward's
        self._model = ModelProbe(torch_module, self.fail)
        self._memory_audit = MemoryAudit(torch_module)
        self._next_memory_sample = 0.0
        self._started_at = time.time()
        self.board = KnobBoard()
        # Facts not yet taken by the listener, and the latest of each kind it has taken: a
        # monitor's hello carries only facts already sent to the others, so a fact reaches
        # each monitor exactly once (in its hello or in a frame after it).
        self._pending_facts: deque[wire.Frame] = deque(maxlen=256)
        self._latest: dict[str, dict[str, Any]] = {}
        self._facts_lock = threading.Lock()
        self._syncs = SyncScanner(torch_module)
        self._schedule = ProbeSchedule(self._syncs)  # when each probe is due
        self._publish_fact = self._publish  # bound once: the feeds publish through it
        self._flops = FlopCounter()
        # The workload probes (docs/advisor.md, MFU): a census of the step's operators beside
        # the FLOP count, the matmul peak once, one step's kernels; one frame, republished whole.
        self._census: Census | None = None
        self._census_hook: Any = None
        self._peak: MatmulPeak | None = None
        self._profile = KernelProfile()
        self._workload: dict[str, Any] = {}
        self._workload_off = False
        self._restore_stance: Any = None  # undoes force_eager after the counted step
        self._peaks_measured: set[str] = set()  # precisions whose matmul peak was measured
        self._launcher = launcher_pid()  # the gputop-train that started this job, if one did
        self._row_log: Any = None  # hook/row_log.py: our rows in the launcher's recording
        self._take_schedule(os.environ.get(wire.SCHEDULE_ENV))
        self.guard = LossGuard(torch_module)
        self.autopilot_done = False  # the monitor said its autopilot has finished
        self.builtins = BuiltinKnobs(torch_module, self._feeds.current, self._builtin_failed)
        self._script_autocast: str | None = None  # the autocast the script entered itself

    def _take_schedule(self, text: str | None) -> None:
        """A --schedule, only from the launcher of this very job: a GPUTOP_TRAIN_SCHEDULE left
        in a shell (or a garbage one) is said and ignored, never applied, never fatal."""
        if not text:
            return
        why = None
        if self._launcher is None:
            why = "no gputop-train launcher of this job passed it (a stale shell variable?)"
        else:
            try:
                self.board.set_schedule(text)
            except (ValueError, TypeError, AttributeError) as error:
                why = f"not a schedule ({type(error).__name__}: {str(error)[:80]})"
        if why is not None:
            self._say(f"{wire.SCHEDULE_ENV} ignored: {why}")

    def _say(self, text: str) -> None:
        """Tell the monitors (a notice) and the job's log (stderr)."""
        self._notices.append(text)
        with contextlib.suppress(Exception):
            print(f"gputop-train: {text}", file=sys.stderr, flush=True)

    # -- events from the patched torch entry points (training thread) ---------------------

    def on_iterator_created(self, seconds: float, loader: Any, iterator: Any) -> None:
        """Starting an epoch's iterator (forking workers) is time spent waiting for data."""
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self._open_first_step(seconds)
        self._feeds.started(seconds, loader, iterator)

    def on_batch(self, seconds: float, batch: Any, iterator: Any) -> None:
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self._open_first_step(seconds)
        self._feeds.batch(seconds, batch, iterator)
        self._batches += 1
        if self._batches == 1:
            if self._timer is not None:
                self._timer.mark_start()
            self._begin_step()

    def on_iterator_exhausted(self, seconds: float, iterator: Any) -> None:
        """StopIteration: an iterator started in this interval has made a whole pass."""
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self._feeds.exhausted(seconds, iterator)

    def on_autocast(self, dtype: Any) -> None:
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self._autocast_dtype = str(dtype).removeprefix("torch.")

    def on_backward(self, tensor: Any) -> None:
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self.guard.on_backward(tensor)
        self._model.on_backward(started=True)
        if self._census is not None:
            self._census.in_backward = True

    def on_backward_end(self) -> None:
        """The backward returned: the backward's end mark (the model's thread only)."""
        self._model.on_backward(started=False)
        if self._census is not None:
            self._census.in_backward = False

    def on_grad_norm(self, norm: Any) -> None:
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self.guard.on_grad_norm(norm)

    def count_samples(self, samples: int) -> None:
        """Samples a step consumed, for loops that do not use a DataLoader."""
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self._counted_samples = (self._counted_samples or 0) + int(samples)

    def count_tokens(self, tokens: int) -> None:
        """Tokens a step consumed, where the model's forward inputs do not say."""
        if self._primary.other_trainer and not self._primary.on_primary_thread():
            return
        self._counted_tokens = (self._counted_tokens or 0) + int(tokens)

    def on_optimizer_pre_step(self, optimizer: Any) -> None:
        """The optimizer phase starts (the step breakdown's mark)."""
        counted = self._primary.optimizer  # inline: the training thread's hot path
        if counted is None or counted() is optimizer:
            self._model.timeline.mark(OPT_START)

    def on_optimizer_step(self, optimizer: Any) -> None:
        elected = self._primary.elect(optimizer)
        if elected == TOOK_OVER:
            self._took_over(optimizer)
        elif elected == NOT_PRIMARY:
            primary = self._primary
            if not primary.other_trainer and not primary.on_primary_thread():
                self._note_other_trainer()
            elif primary.on_primary_thread():
                self._model.on_other_optimizer()
            return
        self._activate()
        now = time.perf_counter()
        self._step += 1
        data_s, samples, batches = self._feeds.take(self._publish_fact)
        if self._counted_samples is not None:
            samples = (samples or 0) + self._counted_samples
        cuda = self._cuda_in_use()  # read once a step: the model and the audit share it
        counts = self._model.end_step(cuda, now)
        if samples is None:
            samples = counts.samples  # no DataLoader: what the model's forwards received
        if self._counted_tokens is not None:
            counts.tokens, counts.masks = self._counted_tokens, None
        row = [
            self._step,
            time.time(),
            # The first step's start is unknown unless a batch or iterator opened it.
            None if self._last_end is None else (now - self._last_end) * 1000.0,
            data_s * 1000.0 if self._feeds.seen else None,
            samples,
            batches,
            None,
            *self._memory(now),
            self._comm_ms(),
        ]
        self._last_end = now
        self._counted_samples = self._counted_tokens = None
        self._batches = 0
        self._finish_row(row, counts, cuda)
        if not self._model.searched:
            self._model.search(optimizer, sys._getframe(1))
        fact = self._model.take_fact(self._step)
        if fact is not None:
            self._publish(fact)
        audit = self._memory_audit.due(now, optimizer, cuda, self._step)
        if audit is not None:
            self._publish(audit)
        self._end_probes(samples, optimizer)
        self.guard.end_step()
        if self.board.apply_pending(self._step):
            self._memory_audit.forget_sizes()  # a knob may change them (precision, optimizer)
            self._schedule.after_knob_change(self._step)
            self.guard.watch(self._step, self.board.applied_at(self._step))
        while self.board.trial_reverts:  # the job's log says it (the monitors: the outcome)
            told = self.board.trial_reverts.popleft()
            with contextlib.suppress(Exception):
                print(f"gputop-train: {told}", file=sys.stderr, flush=True)
        verdict = self.guard.verdict()
        if verdict is not None:
            changes, why, figures = verdict
            names = ", ".join(name for name, _, _ in changes)
            if why is not None:
                self.board.revert_changes(changes, why, self._step)
            else:  # said once per change: what it did to the loss, over 10 steps each side
                self._notices.append(f"numerics guard: {names} kept ({figures})")
        if self._step == BUILTIN_KNOBS_STEP or self._rebind_builtins:
            self._rebind_builtins = False
            self._declare_builtins(optimizer)
        if not self._feeds.seen:
            self._begin_step()  # no DataLoader: the next step starts now
        self._model.timeline.mark_hook_end()

    def _comm_ms(self) -> float | None:
        """The step's wait in collectives: the host's now; the streams' once its events ran."""
        clock = self.collectives
        if clock is None or not clock.enabled:
            return None
        host_ms, pairs = clock.take_step()
        if pairs:
            self._comm_pairs[self._step] = pairs
        return host_ms

    def notice(self, text: str) -> None:
        """A line for the monitor (said once by the caller)."""
        self._notices.append(text)

    def _declare_builtins(self, optimizer: Any) -> None:
        """The hook's own knobs (builtin_knobs.py); a failure here leaves them out, said once."""
        try:
            knobs = self.builtins.build(optimizer, self._script_autocast)
        except Exception as error:
            self._notices.append(f"gputop-train built-in knobs left out: {error!r}")
            return
        self.board.declare_builtin(knobs)

    def _builtin_failed(self, error: str) -> None:
        """A built-in change failed after it applied (a compile error at its first call)."""
        self.board.revert_last_change(error, self._step)

    # -- internals ----------------------------------------------------------------------

    def _begin_step(self) -> None:
        """Start the probes that cover the coming step, when one is due."""
        upcoming = self._step + 1
        if self._cuda_in_use() and self._syncs.due(upcoming):
            self._syncs.start()
        schedule = self._schedule  # its steps read inline: the training thread's hot path
        if upcoming == schedule.count_step and self._start_eager_step():
            self._flops.start()
            self._guard_workload(self._start_census)
        elif upcoming == schedule.profile_step and self._cuda_in_use():
            self._guard_workload(self._profile.start)

    def _start_eager_step(self) -> bool:
        """A compiled model runs the counted step eagerly (probes.force_eager); False where
        that cannot be done: no count then, said in the workload frame."""
        try:
            self._restore_stance = force_eager(self._torch)
        except Exception as reason:  # no count rather than a compiled model run eagerly
            self._update_workload(census={"skipped": str(reason)})
            return False
        return True

    def _guard_workload(self, probe: Any, *args: Any) -> None:
        """The workload probes fail alone: said once, they stop; the rest of the hook and the
        training go on."""
        if self._workload_off:
            return
        try:
            probe(*args)
        except Exception as error:
            self._workload_off = True
            census, self._census = self._census, None
            with contextlib.suppress(Exception):
                if census is not None and census.active:
                    census.stop()
            with contextlib.suppress(Exception):
                if self._census_hook is not None:
                    self._census_hook.remove()
            with contextlib.suppress(Exception):
                if self._profile.active:
                    self._profile.stop()
            self._notices.append(
                "the workload probes (FLOP census, kernel profile, matmul peak) stopped after "
                f"an internal error: {error!r}; MFU falls back to the FLOP counter"
            )

    def _start_census(self) -> None:
        census = Census()
        optimizer_module = sys.modules["torch.optim.optimizer"]
        self._census_hook = optimizer_module.register_optimizer_step_pre_hook(
            lambda optimizer, args, kwargs: census.optimizer_started()
        )
        census.start()
        self._census = census

    def _end_probes(self, samples: int | None, optimizer: Any) -> None:
        if self._syncs.active:
            self._publish(self._syncs.stop(self._step))
        autocast, self._autocast_dtype = self._autocast_dtype, None
        if self._step <= BUILTIN_KNOBS_STEP and autocast:
            self._script_autocast = autocast
        if self._census is not None:  # entered inside the FLOP counter: left first
            self._guard_workload(self._end_census, self._census, optimizer, autocast)
        if self._flops.active:
            self._publish(wire.Flops(step=self._step, flops=self._flops.stop(), samples=samples))
            self._restore_compiled()
            self._guard_workload(self._measure_peak)
        if self._profile.active:
            self._guard_workload(lambda: self._update_workload(profile=self._profile.stop()))
        if self._peak is not None and self._peak.pending:
            self._guard_workload(self._poll_peak, self._peak)
        self._model_frame(optimizer, autocast)

    def _poll_peak(self, peak: MatmulPeak) -> None:
        measured = peak.poll()
        if measured is not None:
            self._update_workload(peak=measured)

    def _model_frame(self, optimizer: Any, autocast: str | None) -> None:
        """The precision facts, on the probe's step and as often as the sync scan."""
        if self._schedule.model_due(self._step):
            self._publish(model_facts(self._torch, optimizer, autocast, self._step))

    def _end_census(self, census: Census, optimizer: Any, autocast: str | None) -> None:
        """The census's facts, and the matmul peak's measurement started once (CUDA)."""
        self._census = None
        census.stop()
        if self._census_hook is not None:
            self._census_hook.remove()
            self._census_hook = None
        params = [p for group in optimizer.param_groups for p in group.get("params", ())]
        facts = census.facts(params)
        param = next((p for p in params if p.dtype.is_floating_point), None)
        param_dtype = str(param.dtype).removeprefix("torch.") if param is not None else None
        precision = matmul_precision(self._torch, autocast, param_dtype)
        if census.fp8_matmuls:
            precision = "fp8"
        facts.update(matmul_precision=precision, census_error=census.error)
        self._update_workload(census=facts)

    def _restore_compiled(self) -> None:
        """After the counted step, compiled code runs again."""
        restore, self._restore_stance = self._restore_stance, None
        if restore is not None:
            restore()

    def _measure_peak(self) -> None:
        """The matmul peak of the precision now in force, once per precision; enqueued after
        the FLOP counter stopped (its matmuls are not the step's)."""
        precision = (self._workload.get("census") or {}).get("matmul_precision")
        if not precision or precision in self._peaks_measured or not self._cuda_in_use():
            return
        if self._peak is not None and self._peak.pending:
            return
        self._peaks_measured.add(precision)
        self._peak = MatmulPeak(self._torch)
        unmeasured = self._peak.enqueue(precision)
        if unmeasured is not None:
            self._update_workload(peak=unmeasured)

    def _update_workload(self, **parts: Any) -> None:
        self._workload.update(parts)
        workload = self._workload
        self._publish(
            wire.Workload(
                step=self._step,
                census=workload.get("census"),
                profile=workload.get("profile"),
                peak=workload.get("peak"),
            )
        )

    def _publish(self, fact: wire.Frame) -> None:
        """Send a fact now, and keep the latest of its kind for monitors that come later."""
        with self._facts_lock:
            self._pending_facts.append(fact)

    def _open_first_step(self, seconds: float) -> None:
        """Data activity before any step starts the first step: it began when the wait did."""
        if self._last_end is None:
            self._activate()
            self._last_end = time.perf_counter() - seconds

    def _took_over(self, optimizer: Any) -> None:
        """A new optimizer took over (primary.py; a sweep's next trial): its model, facts and
        knobs are read again."""
        if not self._told_handover:  # a sweep makes one per trial: said once
            self._told_handover = True
            self._notices.append(
                f"the training loop moved to a new {type(optimizer).__name__}: the steps of "
                "the newest optimizer are counted, and the built-in knobs act on its model"
            )
        self._rebind_builtins = self._step >= BUILTIN_KNOBS_STEP
        # The model may differ (a sweep's trial): its facts and FLOPs are read again.
        self._schedule.after_new_optimizer(self._step)
        self.forget_model()  # its model is looked for again at this step's end
        self._memory_audit.forget_sizes()

    def _note_other_trainer(self) -> None:
        """Threads that train models side by side: their steps and batches would interleave
        into rows that are neither's. Measure the first one, and say so once."""
        notice = self._primary.note_other_trainer()
        # What the other thread fetched before its first step is not this step's either.
        self._feeds.keep_thread(self._primary.thread)
        self._notices.append(notice)

    def _finish_row(self, row: list[Any], counts: StepCounts, cuda: bool) -> None:
        if self._timer is None and cuda:
            self._timer = CudaStepTimer(self._torch)
        if self._timer is None:
            _fill(row, self._model.row(counts, resolved=True))
            self._ring.append(row)
            return
        # A step not timed still gets its end event where a figure waits on its GPU work.
        masks = counts.masks is not None and bool(counts.masks.pending)
        needs_end = masks or self._step in self._comm_pairs
        self._timer.mark_end(time_next=counts.gpu_next, needs_end=needs_end)
        self._awaiting_gpu.append(row)
        self._awaiting_counts.append(counts)
        self._collect_gpu_times()
        while len(self._awaiting_gpu) > MAX_STEPS_AWAITING_GPU:
            self._timer.drop_oldest()
            dropped = self._take_awaiting(resolved=False)
            if self._comm_pairs.pop(dropped[0], None):
                dropped[wire.COLUMN["comm_ms"]] = None  # its streams' wait is not read
            self._ring.append(dropped)

    def _take_awaiting(self, resolved: bool) -> list[Any]:
        """The oldest row awaiting the GPU, with its model columns (N/A if not resolved)."""
        row = self._awaiting_gpu.popleft()
        _fill(row, self._model.row(self._awaiting_counts.popleft(), resolved))
        return row

    def _collect_gpu_times(self) -> None:
        if self._timer is None:
            return
        for gpu_ms in self._timer.poll():
            row = self._take_awaiting(resolved=True)
            row[wire.COLUMN["gpu_ms"]] = gpu_ms
            pairs = self._comm_pairs.pop(row[wire.COLUMN["step"]], None)
            if pairs:
                # The step's end event ran, so the collectives it waited on have too.
                stream_ms = read_pairs(pairs)
                host_ms = row[wire.COLUMN["comm_ms"]]
                row[wire.COLUMN["comm_ms"]] = (
                    None if stream_ms is None else (host_ms or 0.0) + stream_ms
                )
            self._ring.append(row)

    def _cuda_in_use(self) -> bool:
        # Never initialise CUDA ourselves: a CPU job must not grow a 500 MB context.
        cuda = getattr(self._torch, "cuda", None)
        return bool(cuda is not None and cuda.is_initialized())

    def _memory(self, now: float) -> tuple[int | None, int | None, int | None]:
        if now < self._next_memory_sample or not self._cuda_in_use():
            return (None, None, None)
        self._next_memory_sample = now + MEMORY_PERIOD_S
        return allocator_now(self._torch.cuda)

    def _activate(self) -> None:
        """Open the socket on the first sign of training (workers and launchers never get here)."""
        if self.active:
            return
        self.active = True
        from .listener import Listener

        path = wire.socket_path(self.pid, wire.runtime_dir(create=True))
        recording = os.environ.get(wire.RECORDING_ENV)
        if recording and self._launcher is not None:
            from .row_log import RowLog

            row_log = RowLog(recording, self.pid, self._launcher, self._say)
            self._row_log = row_log if row_log.active else None  # else the monitor records
        self.listener = Listener(
            path,
            hello=self.hello,
            rows_after=self.rows_after,
            take_frames=self.take_frames,
            on_frame=self.on_frame,
            on_leave=self.on_client_left,
            record_rows=self._row_log.append if self._row_log is not None else None,
            backlog_rows=self._ring.maxlen or RING_STEPS,
        )
        self.listener.start()

    # -- called from the listener thread --------------------------------------------------

    def rows_after(self, step: int) -> list[list[Any]]:
        """Finished rows with a step number above ``step``, oldest first. The ring is in step
        order, so this walks back from its newest row and costs what is new, not the ring:
        copying and filtering the whole ring, once it held its 8192 rows, held the GIL for
        ~1.4 ms a send (the hook's thread 0.06% -> 0.34% of a core after 3 minutes, dev box,
        attach_toggle.py --pause, 2026-11-24)."""
        column = wire.COLUMN["step"]
        for _ in range(3):
            newer = []
            try:
                for row in reversed(self._ring):
                    if row[column] <= step:
                        break
                    newer.append(row)
            except RuntimeError:  # the ring moved under us; try again
                continue
            newer.reverse()
            return [_resolved(row) for row in newer]
        return []

    def take_frames(self) -> list[bytes]:
        """Facts, notices and knob outcomes waiting to be sent, oldest first. Facts go at once
        (a later monitor gets the latest of each in its hello); notices and knob outcomes
        wait, bounded, for the first monitor to connect."""
        with self._facts_lock:  # held briefly: the training thread publishes under it
            taken = list(self._pending_facts)
            self._pending_facts.clear()
            for fact in taken:
                self._latest[fact.TYPE] = fact.fields()
        frames = [fact.encode() for fact in taken]
        if self.listener is None or not self.listener.connected:
            return frames
        while self._notices:
            frames.append(wire.Notice(self._notices.popleft(), pid=self.pid).encode())
        return frames + self.board.take_outbox()

    def on_frame(self, raw: dict[str, Any], client: int | None = None) -> None:
        """A command from monitor ``client`` (listener thread), decoded and checked by
        ``wire.decode_frame``, to its handler in ``_COMMANDS``; knob changes are queued for a
        step boundary. ValueError for one that is no command or has a field of the wrong type
        (the listener counts it; a malformed set_knob gets its refusal, any other a notice)."""
        cls = wire.FRAMES.get(raw.get("type"))  # type: ignore[arg-type]
        handler = _COMMANDS.get(cls) if cls is not None else None
        if cls is None or handler is None:
            raise ValueError(f"not a command: {wire.shown(raw.get('type'))}")
        try:
            frame = cls.decode(raw)
        except (TypeError, ValueError) as error:  # a field of the wrong type: said, not dropped
            if cls is wire.SetKnob:
                self.board.refuse_malformed(raw, str(error))
            else:
                self._notices.append(f"hook refused a {cls.TYPE} command: {error}")
            raise ValueError(f"malformed {cls.TYPE}: {error}") from None
        handler(self, frame, client)

    def _on_set_knob(self, frame: wire.SetKnob, client: int | None) -> None:
        self.board.request(frame, client)

    def _on_keep_trials(self, frame: wire.KeepTrials, client: int | None) -> None:
        if client is not None:
            self.board.keep_trials(client, frame.names)

    def _on_where_waiting(self, frame: wire.WhereWaiting, client: int | None) -> None:
        """Answered from this thread: the training thread may be the one that is stuck."""
        clock = self.collectives
        collective, since = clock.waiting_in() if clock is not None else (None, None)
        self._publish(
            wire.Waiting(
                pid=self.pid, at=time.time(), step=self._step, collective=collective, since=since
            )
        )

    def _on_scan_syncs(self, frame: wire.ScanSyncs, client: int | None) -> None:
        self._syncs.requested = True

    def _on_autopilot_done(self, frame: wire.AutopilotDone, client: int | None) -> None:
        self.autopilot_done = True

    def on_client_left(self, client: int) -> None:
        """A monitor hung up (listener thread): its waiting changes and trials go."""
        self.board.client_left(client)

    def revert_last_change(self, error: str) -> bool:
        return self.board.revert_last_change(error, self._step)

    def _latest_taken(self) -> list[dict[str, Any]]:
        with self._facts_lock:
            return list(self._latest.values())

    def hello(self) -> wire.Hello:
        return wire.Hello(
            pid=self.pid,
            ppid=os.getppid(),
            host=socket.gethostname(),
            argv=list(sys.argv),
            python=sys.version.split()[0],
            torch=getattr(self._torch, "__version__", None),
            rank=_env_int("RANK"),
            local_rank=_env_int("LOCAL_RANK"),
            world_size=_env_int("WORLD_SIZE"),
            started_at=self._started_at,
            step_fields=list(wire.STEP_FIELDS),
            knobs=self.board.describe(),
            knob_history=[outcome.fields() for outcome in self.board.history],
            latest=self._latest_taken(),
            step=self._step,
            rows_recorded_for=self._row_log.launcher if self._row_log is not None else None,
            rows_unrecorded_from=self._row_log.unrecorded_from if self._row_log else None,
        )

    # -- lifecycle ------------------------------------------------------------------------

    def forget_model(self) -> None:
        """Remove the model's hooks (uninstall); the next step looks for the model again."""
        self._model.remove()
        self._model = ModelProbe(self._torch, self.fail)
        self._model.active = self.enabled

    def fail(self, error: BaseException) -> None:
        """Disable on any internal error: say so once, keep training."""
        if not self.enabled:
            return
        self.enabled = False
        self._model.active = False  # its hooks return at once
        message = f"gputop-train hook disabled after an internal error: {error!r}; training goes on"
        self._notices.append(message)
        with contextlib.suppress(Exception):
            print(message, file=sys.stderr, flush=True)

    def shutdown(self) -> None:
        """At interpreter exit: hand every finished step to the monitor, then close."""
        if self.listener is None or os.getpid() != self.pid:
            return
        if self._timer is not None:
            self._collect_gpu_times()
            while self._awaiting_gpu:
                self._ring.append(self._take_awaiting(resolved=False))
        alive = self._launcher is not None and wire.process_exists(self._launcher)
        self.listener.finish(wait_for_monitor_s=WAIT_FOR_MONITOR_S if alive else 0.0)


# Each command a monitor sends, to the agent's handler (listener thread): a new command is a
# wire class and a line here (docs/architecture.md, docs/protocol.md).
_COMMANDS: dict[type[wire.Frame], Callable[[Agent, Any, int | None], None]] = {
    wire.SetKnob: Agent._on_set_knob,
    wire.KeepTrials: Agent._on_keep_trials,
    wire.WhereWaiting: Agent._on_where_waiting,
    wire.ScanSyncs: Agent._on_scan_syncs,
    wire.AutopilotDone: Agent._on_autopilot_done,
}


def _fill(row: list[Any], model_columns: list[Any] | ModelColumns) -> None:
    """Hold the model's columns (``MODEL_COLUMNS``, the last of STEP_FIELDS) as one item at
    their place; ``_resolved`` puts them in their columns when the row is read."""
    row.append(model_columns)


def _resolved(row: list[Any]) -> list[Any]:
    """The row with the model's columns in place (the hook's thread, when a monitor reads
    it: the training thread only took the marks). In place, so it is done once a row."""
    if len(row) == _MODEL_AT + 1:
        held = row[_MODEL_AT]
        row[_MODEL_AT:] = held.columns() if isinstance(held, ModelColumns) else held
    return row


# Where the model's columns start: they close STEP_FIELDS, after the columns the agent fills.
_MODEL_AT = wire.COLUMN[MODEL_COLUMNS[0]]
assert wire.STEP_FIELDS[_MODEL_AT:] == MODEL_COLUMNS


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _monitor_alive() -> bool:
    pid = _env_int(wire.MONITOR_PID_ENV)
    return pid is not None and wire.process_exists(pid)


def launcher_pid() -> int | None:
    """The PID in GPUTOP_TRAIN_MONITOR_PID if that process is an ancestor of this one (the
    gputop-train that launched this job, or launched the torchrun that started it); None
    for a value left in the user's shell by another run."""
    claimed = _env_int(wire.MONITOR_PID_ENV)
    if claimed is None or claimed <= 1:
        return None
    pid = os.getppid()
    for _ in range(MAX_ANCESTORS):
        if pid == claimed:
            return claimed
        if pid <= 1:
            return None
        pid = _parent_of(pid)
    return None


# Launchers between the monitor and a rank: gputop-train, torchrun's agent, a shell or two.
MAX_ANCESTORS = 16


def _parent_of(pid: int) -> int:
    """``pid``'s parent (Linux /proc); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[1])
    except (OSError, IndexError, ValueError):
        return 0

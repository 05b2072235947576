"""The per-process agent: turns DataLoader and optimizer events into step rows.

Everything here runs on the training thread, so it does the least it can: a few clock
reads, one CUDA event record, an append to a bounded ring. Anything that goes wrong
disables the agent (said once on stderr) and training carries on untouched.

It keeps the step boundary's orchestration and asks its parts, each testable and measurable
alone (tests/test_agent_parts.py): the loader feeds (feeds.py), which optimizer and thread
count and the one gate on the training thread's events (primary.py), when each probe is due
(probe_schedule.py), the workload probes (workload_probes.py), the step rows (step_ring.py)
and what waits for the listener's thread to send (outbox.py).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from .. import wire
from .builtin_knobs import BuiltinKnobs
from .collectives import CollectiveClock
from .feeds import Feeds
from .knobs import KnobBoard
from .loss_guard import LossGuard
from .memory_audit import MemoryAudit, allocator_now
from .model_probe import ModelProbe
from .outbox import Outbox, to_log
from .primary import NOT_PRIMARY, TOOK_OVER, PrimaryElection, primary_thread_only
from .probe_schedule import ProbeSchedule
from .probes import SyncScanner, model_facts
from .step_parts import OPT_START
from .step_ring import RING_STEPS, StepRing
from .workload_probes import WorkloadProbes

# The allocator's figures cost ~57 µs a read inside a fast loop (memory_audit.allocator_now):
# sample them, not every step.
MEMORY_PERIOD_S = 0.1

# The step after which the built-in knobs are declared: by then the optimizer has stepped
# once and the loader that fed it, the model and the script's own autocast are known.
BUILTIN_KNOBS_STEP = 1

# How long an exiting job waits for the monitor that launched it to connect.
WAIT_FOR_MONITOR_S = 3.0


class Agent:
    """Step detection and bookkeeping for one training process."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self.pid = os.getpid()
        self.enabled = True
        self.active = False
        self.listener: Any = None
        self._ring = StepRing(torch_module)  # the finished rows a monitor reads
        # Facts and notices for the listener's thread to send (the monitors' hellos carry
        # the latest fact of each kind).
        self._outbox = Outbox()
        self._step = 0
        self._last_end: float | None = None
        self._feeds = Feeds()  # DataLoader iterators active since the last optimizer step
        self._counted_samples: int | None = None  # count_samples() for loops without a loader
        self._batches = 0  # batches of any loader since the last step (starts the GPU timer)
        self._autocast_dtype: str | None = None  # the autocast entered during this step
        self.primary = PrimaryElection()  # the optimizer (and thread) whose steps count
        self._rebind_builtins = False  # the loop moved to a new optimizer: knobs built anew
        self._told_handover = False
        self.collectives: CollectiveClock | None = None  # set by patches.install
        self._counted_tokens: int | None = None  # count_tokens() overrides the forward's
        self._model = ModelProbe(torch_module, self.fail)
        self._memory_audit = MemoryAudit(torch_module)
        self._next_memory_sample = 0.0
        self._started_at = time.time()
        self.board = KnobBoard()
        self._syncs = SyncScanner(torch_module)
        self._schedule = ProbeSchedule(self._syncs)  # when each probe is due
        self._publish = self._outbox.publish  # bound once: the training thread's facts
        self._workload = WorkloadProbes(torch_module, self._publish, self._outbox.notice)
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
            self._outbox.say(f"{wire.SCHEDULE_ENV} ignored: {why}")

    # -- events from the patched torch entry points (training thread) ---------------------

    @primary_thread_only
    def on_iterator_created(self, seconds: float, loader: Any, iterator: Any) -> None:
        """Starting an epoch's iterator (forking workers) is time spent waiting for data."""
        self._open_first_step(seconds)
        self._feeds.started(seconds, loader, iterator)

    @primary_thread_only
    def on_batch(self, seconds: float, batch: Any, iterator: Any) -> None:
        self._open_first_step(seconds)
        self._feeds.batch(seconds, batch, iterator)
        self._batches += 1
        if self._batches == 1:
            self._ring.mark_start()
            self._begin_step()

    @primary_thread_only
    def on_iterator_exhausted(self, seconds: float, iterator: Any) -> None:
        """StopIteration: an iterator started in this interval has made a whole pass."""
        self._feeds.exhausted(seconds, iterator)

    @primary_thread_only
    def on_autocast(self, dtype: Any) -> None:
        self._autocast_dtype = str(dtype).removeprefix("torch.")

    @primary_thread_only
    def on_backward(self, tensor: Any) -> None:
        self.guard.on_backward(tensor)
        self._model.on_backward(started=True)
        census = self._workload.census
        if census is not None:
            census.in_backward = True

    def on_backward_end(self) -> None:
        """The backward returned: the backward's end mark (the model's thread only)."""
        self._model.on_backward(started=False)
        census = self._workload.census
        if census is not None:
            census.in_backward = False

    @primary_thread_only
    def on_grad_norm(self, norm: Any) -> None:
        self.guard.on_grad_norm(norm)

    @primary_thread_only
    def count_samples(self, samples: int) -> None:
        """Samples a step consumed, for loops that do not use a DataLoader."""
        self._counted_samples = (self._counted_samples or 0) + int(samples)

    @primary_thread_only
    def count_tokens(self, tokens: int) -> None:
        """Tokens a step consumed, where the model's forward inputs do not say."""
        self._counted_tokens = (self._counted_tokens or 0) + int(tokens)

    def on_optimizer_pre_step(self, optimizer: Any) -> None:
        """The optimizer phase starts (the step breakdown's mark)."""
        counted = self.primary.optimizer  # inline: the training thread's hot path
        if counted is None or counted() is optimizer:
            self._model.timeline.mark(OPT_START)

    def on_optimizer_step(self, optimizer: Any) -> None:
        elected = self.primary.elect(optimizer)
        if elected == TOOK_OVER:
            self._took_over(optimizer)
        elif elected == NOT_PRIMARY:  # a GAN's second optimizer, or another trainer's
            if self.primary.on_primary_thread():
                self._model.on_other_optimizer()
            elif not self.primary.other_trainer:
                self._note_other_trainer()
            return
        self._activate()
        now = time.perf_counter()
        self._step += 1
        data_s, samples, batches = self._feeds.take(self._publish)
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
            *self._memory(now, cuda),
            self._ring.comm_ms(self.collectives, self._step),
        ]
        self._last_end = now
        self._counted_samples = self._counted_tokens = None
        self._batches = 0
        self._ring.finish(row, counts, cuda, self._model)
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
            to_log(f"gputop-train: {self.board.trial_reverts.popleft()}")
        verdict = self.guard.verdict()
        if verdict is not None:
            changes, why, figures = verdict
            names = ", ".join(name for name, _, _ in changes)
            if why is not None:
                self.board.revert_changes(changes, why, self._step)
            else:  # said once per change: what it did to the loss, over 10 steps each side
                self._outbox.notice(f"numerics guard: {names} kept ({figures})")
        if self._step == BUILTIN_KNOBS_STEP or self._rebind_builtins:
            self._rebind_builtins = False
            self._declare_builtins(optimizer)
        if not self._feeds.seen:
            self._begin_step()  # no DataLoader: the next step starts now
        self._model.timeline.mark_hook_end()

    def notice(self, text: str) -> None:
        """A line for the monitor (said once by the caller)."""
        self._outbox.notice(text)

    def _declare_builtins(self, optimizer: Any) -> None:
        """The hook's own knobs (builtin_knobs.py); a failure here leaves them out, said once."""
        try:
            knobs = self.builtins.build(optimizer, self._script_autocast)
        except Exception as error:
            self._outbox.notice(f"gputop-train built-in knobs left out: {error!r}")
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
        counted = upcoming == schedule.count_step and self._workload.start_count(self._step)
        if not counted and upcoming == schedule.profile_step and self._cuda_in_use():
            self._workload.start_profile()

    def _end_probes(self, samples: int | None, optimizer: Any) -> None:
        if self._syncs.active:
            self._publish(self._syncs.stop(self._step))
        autocast, self._autocast_dtype = self._autocast_dtype, None
        if self._step <= BUILTIN_KNOBS_STEP and autocast:
            self._script_autocast = autocast
        self._workload.end(self._step, samples, optimizer, autocast, self._cuda_in_use)
        # The precision facts, on the probe's step and as often as the sync scan.
        if self._schedule.model_due(self._step):
            self._publish(model_facts(self._torch, optimizer, autocast, self._step))

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
            self._outbox.notice(
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
        notice = self.primary.note_other_trainer()
        # What the other thread fetched before its first step is not this step's either.
        self._feeds.keep_thread(self.primary.thread)
        self._outbox.notice(notice)

    def _cuda_in_use(self) -> bool:
        # Never initialise CUDA ourselves: a CPU job must not grow a 500 MB context.
        cuda = getattr(self._torch, "cuda", None)
        return bool(cuda is not None and cuda.is_initialized())

    def _memory(self, now: float, cuda: bool) -> tuple[int | None, int | None, int | None]:
        if now < self._next_memory_sample or not cuda:
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

            row_log = RowLog(recording, self.pid, self._launcher, self._outbox.say)
            self._row_log = row_log if row_log.active else None  # else the monitor records
        self.listener = Listener(
            path,
            hello=self.hello,
            rows_after=self._ring.rows_after,
            take_frames=self.take_frames,
            on_frame=self.on_frame,
            on_leave=self.on_client_left,
            record_rows=self._row_log.append if self._row_log is not None else None,
            backlog_rows=self._ring.rows.maxlen or RING_STEPS,
        )
        self.listener.start()

    # -- called from the listener thread --------------------------------------------------

    def take_frames(self) -> list[bytes]:
        """Facts, notices and knob outcomes waiting to be sent, oldest first. Facts go at once
        (a later monitor gets the latest of each in its hello); notices and knob outcomes
        wait, bounded, for the first monitor to connect."""
        connected = self.listener is not None and self.listener.connected
        frames = self._outbox.take(self.pid, connected)
        return frames + self.board.take_outbox() if connected else frames

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
                self._outbox.notice(f"hook refused a {cls.TYPE} command: {error}")
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
            latest=self._outbox.latest(),
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
        self._outbox.notice(message)
        to_log(message)

    def shutdown(self) -> None:
        """At interpreter exit: hand every finished step to the monitor, then close."""
        if self.listener is None or os.getpid() != self.pid:
            return
        self._ring.flush(self._model)
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

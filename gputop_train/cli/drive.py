"""The job's driving while a front end shows it: the signals, the job's wait, its log copied,
its close and the exit code (docs/exits.md). The front ends only show: headless prints a view
at each tick of the clock kept here (``headless.Printer``), the TUI draws them; neither
handles a signal or a process (issue 47 point 4)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from .. import events
from ..headless import Printer, ReaderGone
from ..job import Job
from ..job.launched import TERMINATE_GRACE_S
from ..job.log import LogTail
from ..monitor.monitor import Monitor
from ..session.model import Session

# The job's last lines, kept with its end: how it ended (torchrun's "got signal: 2") tells a
# stop from a crash (session/job_end.py).
LAST_LINES = 20
PIPE_CLOSED_WAIT_S = 30.0  # a job stopped because the output pipe closed, given this to end


class JobWaiter:
    """The job's ``wait`` on a thread of its own: its exit code and when it came (``ended``),
    then ``then`` (the TUI closes the job there, while its screen shows it). ``wake`` is set on
    any way out of the wait, a waiter that died included: headless's loop never waits on a
    dead one for ever."""

    def __init__(
        self,
        job: Job,
        then: Callable[[int | None, float], None] | None = None,
        wake: threading.Event | None = None,
    ) -> None:
        self.ended: tuple[int | None, float] | None = None
        self._thread = threading.Thread(
            target=self._wait, args=(job, then, wake), name="gputop-train-job", daemon=True
        )
        self._thread.start()

    def _wait(
        self,
        job: Job,
        then: Callable[[int | None, float], None] | None,
        wake: threading.Event | None,
    ) -> None:
        try:
            code = job.wait()
            at = time.time()  # the drain's seconds are not the job's
            self.ended = (code, at)
            if then is not None:
                then(code, at)
        finally:
            if wake is not None:
                wake.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def last_lines(log: LogTail | None) -> tuple[str, ...]:
    """The job's last lines as far as its log was read."""
    return () if log is None else tuple(log.last(LAST_LINES))


class HeadlessDriver:
    """Headless's clock (front_end.Clock) and the job's driving behind it: the job's signals,
    its wait, its log copied to ``err`` (when ``log`` is given: a job we launched), its close.

    Ctrl+C and SIGTERM are passed on to a job we started (``timeout`` and schedulers stop a
    command with SIGTERM); from a monitor attached by PID they detach. SIGHUP (an SSH drop)
    or a terminal that is gone stop the monitor only: the job runs in its own session and
    carries on, ready for a later attach.
    """

    def __init__(self, job: Job, monitor: Monitor, log: LogTail | None, err: TextIO) -> None:
        self.job, self.monitor, self.session = job, monitor, monitor.session
        self.log, self.err = log, err
        self.echo = log is not None
        self.over = threading.Event()
        # A signal handler runs on the main thread between two of its bytecodes, maybe inside
        # session.snapshot() with the session's lock held, or inside a write to ``err``: it
        # only signals the job and leaves the stop's event and line here, for the loop (a
        # handler that applied the event itself deadlocked a monitor on Ctrl+C, the job
        # running on).
        self.from_handlers: queue.SimpleQueue[tuple[events.Event, str]] = queue.SimpleQueue()
        self.waiter: JobWaiter | None = None

    def start(self) -> None:
        """The handlers in place of the held ones (no default one between), then the wait."""
        owned = self.job.owned
        signal.signal(signal.SIGINT, self._forward_interrupt if owned else self._detach)
        signal.signal(signal.SIGTERM, self._forward_terminate if owned else self._detach)
        signal.signal(signal.SIGHUP, self._detach)
        self.waiter = JobWaiter(self.job, wake=self.over)

    def now(self) -> float:
        return self.session.clock()

    def wait(self, seconds: float) -> bool:
        """Until the next line: True once the watch is over; else what the handlers left is
        taken and the job's new output copied, before the line."""
        if self.over.wait(seconds):
            return True
        self.take_handled()
        self.copy_output()
        return False

    def _forward_interrupt(self, signum: int, frame: Any) -> None:
        sent = self.job.interrupt()
        firmer = {"SIGINT": "; Ctrl+C again sends SIGTERM", "SIGTERM": "; again: SIGKILL"}
        line = f"gputop-train: sent {sent} to the job{firmer.get(sent, '')}\n"
        self.from_handlers.put((events.StopAsked("Ctrl+C"), line))

    def _detach(self, signum: int, frame: Any) -> None:
        self.over.set()

    def _forward_terminate(self, signum: int, frame: Any) -> None:
        sent = self.job.terminate()
        again = "; SIGKILL in 30 s, or at once if asked again" if sent == "SIGTERM" else ""
        line = f"gputop-train: got SIGTERM: sent {sent} to the job{again}\n"
        self.from_handlers.put((events.StopAsked("SIGTERM"), line))

    def take_handled(self) -> None:
        """What the signal handlers left: each stop recorded, each line said."""
        while not self.from_handlers.empty():
            event, line = self.from_handlers.get()
            self.session.apply(event)
            with contextlib.suppress(OSError):
                self.err.write(line)
                self.err.flush()

    def copy_output(self) -> None:
        if not self.echo or self.log is None:
            return
        try:
            for line in self.log.read_new():
                self.err.write(line + "\n")
            self.err.flush()
        except OSError:  # the terminal is gone: the log file keeps everything
            self.echo = False

    def pipe_closed(self) -> None:
        """The pipeline is over: so is a job we started, as with Ctrl+C."""
        self.session.apply(events.StopAsked("the output pipe was closed"))
        # What the job says as it stops (its KeyboardInterrupt traceback) stays in its log:
        # the reader that asked for the output is gone.
        self.copy_output()
        self.echo = False
        where = f"; its output is in {self.log.path}" if self.log is not None else ""
        _say(self.err, "the output pipe was closed: stopping the job" + where)
        self.job.stop()
        self.over.wait(PIPE_CLOSED_WAIT_S)

    def close(self) -> tuple[int | None, float] | None:
        """The job's end recorded (when it ended) and the monitor stopped; its end, if any."""
        self.take_handled()  # a stop asked just before the job ended is recorded before its end
        ended = self.waiter.ended if self.waiter is not None else None
        if ended is not None:
            self.monitor.close_job(ended[0], ended[1], self._last_output)
        self.monitor.stop()
        return ended

    def _last_output(self) -> tuple[str, ...]:
        self.copy_output()  # to the terminal, as every line before it
        if self.log is not None and not self.echo:
            self.log.read_new()
        return last_lines(self.log)


def drive_headless(
    job: Job,
    monitor: Monitor,
    interval_s: float,
    window_s: float,
    as_json: bool,
    log: LogTail | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Print a status per interval until the job ends, and the job's output (its log, when
    we launched it) on ``err``. Returns the job's exit code (0 when it keeps running).

    A closed pipe (``| head``) ends the pipeline: a job we started is stopped as Ctrl+C
    would, and the summaries are still written (docs/exits.md).
    """
    driver = HeadlessDriver(job, monitor, log, err)
    printer = Printer(monitor.session.snapshot, driver, window_s, as_json, out)
    driver.start()
    try:
        printer.statuses(interval_s)
    except ReaderGone as gone:
        _silence(out)
        if gone.pipe and job.owned:
            driver.pipe_closed()
    ended = driver.close()
    try:
        printer.summary(monitor.session.started_at)
    except ReaderGone:
        _silence(out)
    if ended is None or ended[0] is None:
        return 0
    return ended[0]


def watch_job_end(job: Job, monitor: Monitor, log: LogTail | None) -> JobWaiter:
    """The TUI's: when the job exits, its last frames collected and the session marked at
    once, while the screen shows the job."""

    def last_output() -> tuple[str, ...]:
        if log is not None:
            log.read_new()
        return last_lines(log)

    def close(code: int | None, at: float) -> None:
        monitor.close_job(code, at, last_output)

    return JobWaiter(job, then=close)


def exit_on_signals(exit_app: Callable[[str], Any], owned: bool) -> None:
    """The TUI's: an SSH drop (SIGHUP) ends the monitor, never the job (its own session); a
    SIGTERM (``timeout``, a scheduler) is passed on to a job we started, as torchrun does."""
    signal.signal(signal.SIGHUP, lambda signum, frame: exit_app("leave"))
    on_term = "terminate" if owned else "leave"
    signal.signal(signal.SIGTERM, lambda signum, frame: exit_app(on_term))


def end_after_tui(choice: str | None, job: Job, session: Session, waiter: JobWaiter) -> int:
    """The TUI closed with ``choice`` other than leaving a running job: a SIGTERM passed on,
    or a stop; the job's end awaited, read by the waiter; its exit code (0 if none)."""
    if choice == "terminate" and job.running():
        session.apply(events.StopAsked("SIGTERM"))
        _say(sys.stderr, f"got SIGTERM: sent {job.terminate()} to the job")
        signal.signal(signal.SIGTERM, lambda signum, frame: job.terminate())
        waiter.join(timeout=TERMINATE_GRACE_S + 10.0)
    if job.running():  # "stop", or the app ended some other way (a crash)
        session.apply(events.StopAsked("stopped from the monitor"))
        job.stop()
    # The waiter reads the job's last frames and records its end, while the monitor still
    # runs: only then is the session complete enough to summarise.
    waiter.join(timeout=20.0)
    return session.snapshot().job.exit_code or 0


def _say(err: TextIO, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # after an SSH drop there is no terminal
        err.write(f"gputop-train: {text}\n")
        err.flush()


def _silence(out: TextIO) -> None:
    """Point a dead stdout at /dev/null: no BrokenPipeError at interpreter exit."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())

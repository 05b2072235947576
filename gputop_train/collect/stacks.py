"""Where a job's training thread spends its time, from py-spy stack samples.

For a job running without the hook: step timings need the hook, stack samples need only the
permission to read the process's memory. py-spy runs once per window (``record --format
raw --idle --nonblocking``: the target is never paused, and a thread waiting on the
DataLoader's queue still counts); the thread that runs the training loop is the one whose
samples show most torch work, and each of its samples counts for one category.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

from .. import events, wire
from ..samples import CATEGORIES, DATA_WAIT, STACK_WINDOW_S, StackShares
from .base import COSTLY, SamplerUnavailable, Sink

# One py-spy run per window: its start-up (about 0.1 s of CPU) is most of its cost.
WINDOW_S = STACK_WINDOW_S
RATE_HZ = 50


class StacksUnavailable(RuntimeError):
    """py-spy cannot sample this process; the message says why and what to do."""


def category(stack: str) -> str:
    """The category of one collapsed stack (frames outermost first, ``name (file:line)``)."""
    if "_BaseDataLoaderIter.__next__ (" in stack:
        return DATA_WAIT
    if "(torch/optim/" in stack:
        return "optimizer"
    if "(torch/autograd/" in stack or "Tensor.backward (" in stack:
        return "backward"
    if "Module._call_impl (" in stack:
        return "forward"
    return "other"


def classify(raw: str) -> StackShares | None:
    """Shares per category of the training thread, from py-spy's raw output (``thread (TID):
    NAME;frame;frame COUNT`` per line); None when no thread was sampled."""
    per_thread: dict[str, Counter[str]] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        thread, _, frames = stack.partition(";")
        if not count.isdigit() or not thread.startswith("thread ("):
            continue
        per_thread.setdefault(thread, Counter())[category(frames)] += int(count)
    if not per_thread:
        return None

    def torch_work(item: tuple[str, Counter[str]]) -> tuple[int, bool]:
        name, counts = item
        return sum(counts.values()) - counts["other"], name.endswith("MainThread")

    thread, counts = max(per_thread.items(), key=torch_work)
    total = sum(counts.values())
    tid, _, name = thread.removeprefix("thread (").partition("): ")
    return StackShares(
        thread=f"{name or 'thread'} ({tid})",
        samples=total,
        shares={c: 100.0 * counts[c] / total for c in CATEGORIES},
    )


def find_py_spy() -> str | None:
    """py-spy next to this interpreter (a pip install), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class StackSampler:
    """Samples one PID with py-spy; construct with a fake executable in tests."""

    def __init__(
        self,
        pid: int,
        executable: str | None = None,
        window_s: float = WINDOW_S,
        rate_hz: int = RATE_HZ,
    ) -> None:
        self.pid = pid
        self.window_s = float(max(1, round(window_s)))  # py-spy's --duration: whole seconds
        self.rate_hz = rate_hz
        self._executable = executable or find_py_spy()

    def check(self) -> None:
        """One quick ``py-spy dump``: raises StacksUnavailable with the fix, before any UI."""
        result = self._run(["dump", "--pid", str(self.pid), "--nonblocking"], None)
        if result[0] != 0:
            raise StacksUnavailable(self._explain(result[1]))

    def sample(self, stop: threading.Event | None = None) -> StackShares | None:
        """One window of samples (blocks for ``window_s``; ``stop`` ends it early, with None).
        None also when the process ended or nothing was sampled."""
        with tempfile.TemporaryDirectory(prefix="gputop-train-stacks-") as directory:
            output = Path(directory) / "raw.txt"
            args = [
                "record",
                "--pid",
                str(self.pid),
                "--duration",
                str(int(self.window_s)),
                "--rate",
                str(self.rate_hz),
                "--format",
                "raw",
                "--idle",
                "--threads",
                "--nonblocking",
                "--output",
                str(output),
            ]
            code, error = self._run(args, stop)
            if stop is not None and stop.is_set():
                return None
            if code != 0 and not output.exists():
                if not wire.process_exists(self.pid):
                    return None  # the job ended during the window
                raise StacksUnavailable(self._explain(error))
            shares = classify(output.read_text()) if output.exists() else None
            return replace(shares, window_s=self.window_s) if shares else None

    def _run(self, args: list[str], stop: threading.Event | None) -> tuple[int, str]:
        if self._executable is None:
            raise StacksUnavailable(
                "py-spy is not installed: pip install py-spy (it samples a job without the hook)"
            )
        with tempfile.TemporaryFile() as stderr:
            process = subprocess.Popen(
                [self._executable, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            while True:
                try:
                    code = process.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if stop is not None and stop.is_set():
                        process.kill()
                        process.wait()
                        return -1, ""
            stderr.seek(0)
            return code, stderr.read().decode(errors="replace")

    def _explain(self, error: str) -> str:
        """py-spy's failure, said with what to do about it."""
        pid = self.pid
        if "Permission denied" in error or "Operation not permitted" in error:
            if os.geteuid() == 0 and may_trace_others():
                # Root with the capability: ptrace works here, this process is out of reach.
                return (
                    f"py-spy may not read the memory of PID {pid}, though this monitor may "
                    "trace processes (root, CAP_SYS_PTRACE): that process itself is "
                    "protected (PID 1 is a container's or machine's init; a process of "
                    "another PID namespace is out of reach too); attach to the training "
                    "process's own PID (ps -ef lists it)"
                )
            if os.geteuid() == 0:  # root already: what is missing is the capability
                return (
                    f"py-spy may not read the memory of PID {pid}, even as root: this "
                    "container or sandbox withholds ptrace (run it with --cap-add SYS_PTRACE, "
                    "or attach from the host)"
                )
            return (
                f"py-spy may not read the memory of PID {pid}: run gputop-train as the job's "
                f"user with ptrace allowed (sudo -E gputop-train attach {pid}, or "
                f"sudo sysctl kernel.yama.ptrace_scope=0; in a container, --cap-add SYS_PTRACE)"
            )
        if "python version" in error or "python interpreter" in error.lower():
            return f"PID {pid} is not a Python process that py-spy can read"
        if not wire.process_exists(pid):
            return f"PID {pid} ended"
        first = next((line for line in error.splitlines() if line.strip()), "no output")
        return f"py-spy failed on PID {pid}: {first.strip()}"


# CAP_SYS_PTRACE's bit in a capability set (linux/capability.h).
CAP_SYS_PTRACE = 19


def may_trace_others(status: str = "/proc/self/status") -> bool:
    """Whether this process holds CAP_SYS_PTRACE (a container started without it does not,
    even as root); False where /proc cannot tell."""
    try:
        with open(status) as lines:
            for line in lines:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


class StackSampling:
    """py-spy windows back to back, for a job without the hook; a window blocks for its
    length (period 0). When py-spy cannot go on, it says why and stops."""

    name = "stacks"
    period_s = 0.0
    cost = COSTLY

    def __init__(self, sampler: StackSampler) -> None:
        self.sampler = sampler

    def open(self, sink: Sink) -> None:
        pass  # checked before the monitor started (cli: attach), with its fix

    def sample(self, sink: Sink, stop: threading.Event) -> None:
        try:
            shares = self.sampler.sample(stop)
        except StacksUnavailable as error:
            raise SamplerUnavailable(f"stack sampling stopped: {error}") from error
        if shares is not None:
            sink.apply(events.StacksSampled(shares))
        else:
            stop.wait(1.0)  # nothing sampled (the job ended?): do not spin

    def close(self) -> None:
        pass

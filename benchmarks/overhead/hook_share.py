"""Where the hook's cost goes in busy_box's job: py-spy's samples of it, by the hook's part.

busy_box.py's JOB (``--reps`` forward+backward passes of a Linear layer and an SGD step, one
torch thread) under the hook, alone or with its monitor (``--monitored``), sampled by
``py-spy record --nonblocking --threads`` for ``--seconds`` after ``--warmup``. Of the
training thread's samples, the share whose innermost frame is the hook's, by the hook's
entry point on that thread (the model's call wrapper, the backward wrapper, the optimizer
hooks), and the hook's own thread's samples as a share of the training thread's. Shares of
the job's own samples: other processes' load changes how fast the samples come, little how
they divide, which a block-timing figure on the shared dev box could not hold still
(docs/benchmarks.md section 16). Python frames only: a C call's time (a clock read, a torch
op) goes to the Python line that made it.

    heavy -x .venv/bin/python -m benchmarks.overhead.hook_share --reps 6 --seconds 12
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.common.paths import REPO
from benchmarks.common.steps import step_ends
from benchmarks.overhead.busy_box import JOB
from gputop_train.job.launched import hook_environment

HOOK = "gputop_train/"


def job_pid(launched: subprocess.Popen[bytes], monitored: bool) -> int:
    """The job's PID: the launched process, or the monitor's child running JOB."""
    deadline = time.monotonic() + 30
    while monitored and time.monotonic() < deadline:
        for child in psutil.Process(launched.pid).children(recursive=True):
            if "-c" in child.cmdline():
                return child.pid
        time.sleep(0.2)
    return launched.pid


def shares(raw: Path) -> tuple[int, collections.Counter[str], int]:
    """The training thread's samples, its hook-innermost samples by entry point (the first
    frame of the hook's: a sample caught mid-call may lack the frames above it), and the
    hook's own thread's samples."""
    main, by_entry, listener = 0, collections.Counter[str](), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread, *frames = stack.split(";")
        if thread.endswith(" gputop-train-hook"):
            listener += int(count)
        elif thread.endswith(" MainThread"):
            main += int(count)
            if frames and HOOK in frames[-1]:
                entry = next(f for f in frames if HOOK in f).split(" (")[0]
                by_entry[entry] += int(count)
    return main, by_entry, listener


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6, help="forward+backward a step")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds left out")
    parser.add_argument("--seconds", type=int, default=12, help="seconds sampled")
    parser.add_argument("--monitored", action="store_true", help="under gputop-train --headless")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_TRAIN_")}
        env |= {"STEP_TIMES": f"{scratch}/times.bin", "GPUTOP_TRAIN_RUNTIME_DIR": scratch}
        seconds = str(args.warmup + args.seconds + 8)
        job = [sys.executable, "-c", JOB, str(args.reps), seconds]
        if args.monitored:
            job = [sys.executable, "-m", "gputop_train", "--headless", "--no-record", "--", *job]
        else:
            env = hook_environment(env)
        launched = subprocess.Popen(job, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
        pid = job_pid(launched, args.monitored)
        times = Path(env["STEP_TIMES"])
        while not times.exists() or not times.stat().st_size:  # its first step: torch imported
            time.sleep(0.1)
        time.sleep(args.warmup)  # the first steps' one-off work (the model's search) left out
        begun = time.perf_counter()
        raw = Path(scratch) / "raw.txt"
        subprocess.run(
            ["py-spy", "record", "--pid", str(pid), "--nonblocking", "--threads", "-r", "250",
             "-d", str(args.seconds), "--format", "raw", "-o", str(raw)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        ended = time.perf_counter()
        launched.wait()
        sampled = [t for t in step_ends(times) if begun <= t <= ended]
        main_samples, by_entry, listener = shares(raw)
    step_ms = (sampled[-1] - sampled[0]) / (len(sampled) - 1) * 1000.0
    hook = sum(by_entry.values())
    print(f"training thread {main_samples} samples, step {step_ms:.2f} ms ({args.reps} reps), "
          f"{'monitored' if args.monitored else 'hook alone'}")  # fmt: skip
    per_step = hook / main_samples * step_ms * 1e3
    print(f"  hook innermost {hook / main_samples:6.2%}  ~{per_step:4.0f} us a step")
    for entry, count in by_entry.most_common():
        share = count / main_samples
        print(f"    {share:6.2%}  ~{share * step_ms * 1e3:4.0f} us  {entry}")
    print(f"  the hook's thread {listener / main_samples:6.2%} of the training thread's samples")


if __name__ == "__main__":
    main()

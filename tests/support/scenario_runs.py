"""A corpus scenario (benchmarks/scenarios, CPU-sized) running under the hook, watched by a
monitor whose NVML is an idle H100 beside the job: the tests that judge scenarios share it."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.job.launched import hook_environment
from gputop_train.monitor.monitor import Monitor
from gputop_train.session.model import Session

from . import torch_jobs
from .paths import BENCHMARK_SCENARIOS
from .torch_jobs import ForkedJob


@dataclass
class ScenarioRun:
    job: ForkedJob
    session: Session
    _stderr: Path

    def stderr_tail(self, chars: int = 2000) -> str:
        """The job's last error output, for a failing assertion's message."""
        return self._stderr.read_text(errors="replace")[-chars:]


@contextmanager
def hooked_scenario(script: str, *args: str) -> Iterator[ScenarioRun]:
    """``script`` (a file name in benchmarks/scenarios) with ``args``; on the way out the
    monitor stops and the job gets SIGTERM (a scenario's own children, the hog's spinners,
    go with it), then SIGKILL if it has not ended in 30 s."""
    with tempfile.TemporaryDirectory() as folder:
        stderr = Path(folder) / "stderr"
        job = torch_jobs.spawn(
            [str(BENCHMARK_SCENARIOS / script), *args],
            env=hook_environment(os.environ),
            stderr=stderr,
        )
        session = Session(command=(script,))
        monitor = Monitor(session, job.pid, nvml=FakeNvml([FakeGpu(util=3, mem_used=2**30)]))
        monitor.start()
        try:
            yield ScenarioRun(job, session, stderr)
        finally:
            monitor.stop()
            job.terminate()
            try:
                job.wait(timeout=30)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()

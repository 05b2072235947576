"""The data types the samplers produce, and nothing else: the session, the recorder and the
front ends read these without importing a sampler (docs/architecture.md, layers)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuProcess:
    """A compute process NVML lists on a GPU: its memory, SM share, and whose it is."""

    pid: int
    mem_bytes: int | None
    sm_pct: float | None
    user: str | None = None  # None: N/A (another container's PID, a process that ended)
    command: str | None = None


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one instant. None means N/A (unsupported or failed), never zero."""

    index: int
    t: float
    name: str | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    # NVML's clock-event (throttle) reasons in force, by name (gpu_idle left out); () none.
    throttle: tuple[str, ...] | None = None
    sm_clock_max_mhz: float | None = None  # the SM clock's ceiling (nvmlDeviceGetMaxClockInfo)
    pcie_rx_mibps: float | None = None
    pcie_tx_mibps: float | None = None
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None
    processes: tuple[GpuProcess, ...] = field(default_factory=tuple)
    # False where NVML gave no process list (its function N/A): () is then unknown, not none.
    processes_listed: bool = True
    # Why NVML reads nothing of this GPU ("GPU is lost": fallen off the bus); None: read.
    error: str | None = None


@dataclass(frozen=True)
class ProcSample:
    """One process of the job at one instant; None means N/A."""

    pid: int
    ppid: int | None
    name: str
    role: str  # "main" (a hooked training process), "worker", "launcher" or "child"
    cpu_pct: float | None
    rss_bytes: int | None
    io_read_bps: float | None
    io_write_bps: float | None
    status: str | None
    # % of one core the process was ready to run but waited for a CPU (run-queue wait,
    # collect/run_wait.py); measured for DataLoader workers and training processes (a loader
    # with no workers loads in the training process); None: not measured.
    run_wait_pct: float | None = None


# What the training thread was doing in a py-spy sample (collect/stacks.py classifies them).
DATA_WAIT = "data wait"
# One py-spy run per window (collect/stacks.py): its start-up is most of its cost.
STACK_WINDOW_S = 10.0
CATEGORIES = (DATA_WAIT, "forward", "backward", "optimizer", "other")


@dataclass(frozen=True)
class StackShares:
    """One window of the training thread's samples: % of them per category."""

    thread: str
    samples: int
    shares: dict[str, float]
    window_s: float = STACK_WINDOW_S  # how long the window was (how long the figure is current)

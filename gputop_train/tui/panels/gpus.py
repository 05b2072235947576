"""The GPU panel on a node of several GPUs: a row per job GPU (8 fit at 80x24), the GPUs
that are not the job's apart, each with who uses it (issue 37); a wider panel shows more
columns. A one-GPU machine keeps a detailed panel (``one_gpu``) of the same figures over the
same window (session/gpu_table.py)."""

from __future__ import annotations

from rich.text import Text

from ... import format as fmt
from ...session.job_gpus import GpuFigures, GpuUser, JobGpus
from ...session.model import Snapshot

# The panel's width from which a row shows every column (the Overview's GPU panel is half
# the terminal: 98 columns at 200x60, 38 at 80x24).
WIDE_COLUMNS = 70
# The width assumed before the panel is laid out (0 columns): 80x24's.
COMPACT_COLUMNS = 38
# Other GPUs listed one to a line before the rest are counted in one line (80x24 has room
# for the job's 8 GPUs and about this many lines more).
OTHER_LINES = 3


def node_panel(snap: Snapshot, width: int) -> Text:
    """Every GPU of the node: the job's first, a row each; then the others, apart."""
    width = width or COMPACT_COLUMNS
    wide = width >= WIDE_COLUMNS
    job = snap.job_gpus
    mine = [g for g in snap.gpus if g.job]
    others = [g for g in snap.gpus if not g.job]
    text = Text()
    text.append_text(_heading(job, len(snap.gpus), width))
    text.append(_columns(wide) + "\n", style="dim")
    for gpu in mine:
        text.append_text(_row(gpu, wide))
        for user in gpu.others:
            text.append(f"   + {_user(user, wide)}\n", style="yellow")
    text.append_text(_others(others, wide))
    return text


def one_gpu(gpu: GpuFigures) -> Text:
    """A one-GPU machine's GPU in detail."""
    text = Text()
    text.append(f"GPU{gpu.index} {gpu.name or ''}\n", style="bold")
    if gpu.error is not None:  # NVML reads nothing of it (fallen off the bus)
        text.append_text(_lost(gpu, WIDE_COLUMNS))
        return text
    text.append(" util ", style="dim")
    text.append_text(_bar(gpu.util_pct))
    text.append(f" {fmt.pct(gpu.util_pct):>4}\n")
    text.append(" GPM  SM ", style="dim")
    text.append(fmt.pct(gpu.sm_active_pct))
    text.append("  tensor ", style="dim")
    text.append(fmt.pct(gpu.tensor_active_pct) + "\n")
    used, total = gpu.mem_used_bytes, gpu.mem_total_bytes
    text.append(" mem  ", style="dim")
    text.append_text(_bar(100.0 * used / total if used is not None and total else None))
    text.append(f" {fmt.mem_pair(used, total)}\n")
    text.append(" pwr  ", style="dim")
    text.append(f"{_power(gpu)}  {_temp(gpu)}  SM {_clock_mhz(gpu)}")
    if gpu.throttle:
        text.append(f"  throttled: {','.join(gpu.throttle)}", style="yellow")
    text.append("\n")
    return text


def _heading(job: JobGpus | None, count: int, width: int) -> Text:
    """Which GPUs are the job's; why, where it fits (always where they are only assumed)."""
    if job is None:
        return Text(f"GPUs ({count})\n", style="bold")
    text = Text(f"GPU {fmt.spans(job.indices) or 'none'} of {count}: the job's", style="bold")
    reason = f" ({job.reason})"
    style = "yellow" if job.assumed else "dim"
    if len(text.plain) + len(reason) <= width:
        text.append(reason, style=style)
    elif job.assumed:
        text.append("\n " + job.reason[: max(10, width - 2)], style=style)
    text.append("\n")
    return text


def _columns(wide: bool) -> str:
    if wide:
        return (
            f" {'#':>2} {'ranks':<6}{'util':<15}{'SM':>5}{'tensor':>7}  {'memory':<15}"
            f"{'power':<11}{'SM clock':<11}{'temp':>5}"
        )
    return f" {'#':>2} {'rank':<5}{'util':>5}{'SM':>5}  {'memory':<8}{'W':>5}"


def _lost(gpu: GpuFigures, width: int) -> Text:
    """A GPU NVML reads nothing of: its row says why ("GPU is lost", as nvitop shows it)."""
    return Text(f" {gpu.index:>2} {gpu.error}"[:width] + "\n", style="bold red")


def _row(gpu: GpuFigures, wide: bool) -> Text:
    if gpu.error is not None:
        return _lost(gpu, WIDE_COLUMNS if wide else COMPACT_COLUMNS)
    ranks = fmt.spans(gpu.ranks) or ("job" if gpu.pids else "-")
    throttled = bool(gpu.throttle)
    style = "bold red" if throttled else ""
    text = Text()
    if wide:
        text.append(f" {gpu.index:>2} {ranks:<6}")
        util = gpu.util_pct
        text.append_text(_bar(util))
        text.append(f" {fmt.pct(util):>4}", style=style)
        text.append(f"{fmt.pct(gpu.sm_active_pct):>5}{fmt.pct(gpu.tensor_active_pct):>7}  ")
        text.append(f"{fmt.mem_pair(gpu.mem_used_bytes, gpu.mem_total_bytes):<15}")
        text.append(f"{_power(gpu):<11}")
        text.append(f"{_clock(gpu):<11}", style=style)
        text.append(f"{_temp(gpu):>5}")
        if throttled:
            text.append(f" {','.join(gpu.throttle or ())}", style="yellow")
        text.append("\n")
        return text
    power = fmt.NA if gpu.power_w is None else f"{gpu.power_w:.0f}"
    text.append(f" {gpu.index:>2} {ranks:<5}{fmt.pct(gpu.util_pct):>5}")
    text.append(f"{fmt.pct(gpu.sm_active_pct):>5}  {_short_mem(gpu):<8}{power:>5}")
    if throttled:
        text.append(" thr", style="yellow")  # throttled: the reasons in the wide panel, JSON
    text.append("\n", style=style)
    return text


def _others(others: list[GpuFigures], wide: bool) -> Text:
    """The GPUs that are not the job's: those in use with who uses them, the idle in one
    line."""
    text = Text()
    for gpu in others:
        if gpu.error is not None:
            text.append_text(_lost(gpu, WIDE_COLUMNS if wide else COMPACT_COLUMNS))
    others = [g for g in others if g.error is None]
    used = [g for g in others if g.others]
    idle = [g for g in others if not g.others]
    for gpu in used[:OTHER_LINES]:
        first, *rest = gpu.others
        more = f" +{len(rest)} more" if rest else ""
        label = "not the job's" if wide else "other"
        text.append(f" {gpu.index:>2} {label}: {_user(first, wide)}{more}\n", style="dim")
    if len(used) > OTHER_LINES:
        rest_used = fmt.spans([g.index for g in used[OTHER_LINES:]])
        text.append(f" GPU {rest_used}: others' (JSON: gpus)\n", style="dim")
    if idle:
        text.append(
            f" GPU {fmt.spans([g.index for g in idle])}: idle, not the job's\n", style="dim"
        )
    return text


def _user(user: GpuUser, wide: bool) -> str:
    who = user.user or fmt.NA
    memory = fmt.NA if user.mem_bytes is None else f"{user.mem_bytes / 2**30:.0f}G"
    if wide and user.command:
        who = f"{who} {user.command}"
    return f"PID {user.pid} {who} {memory} SM {fmt.pct(user.sm_pct)}"


def _bar(pct: float | None, width: int = 10) -> Text:
    if pct is None:
        return Text("·" * width, style="dim")
    fraction = max(0.0, min(1.0, pct / 100.0))
    filled = round(fraction * width)
    style = "red" if fraction >= 0.9 else "yellow" if fraction >= 0.6 else "green"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def _short_mem(gpu: GpuFigures) -> str:
    used, total = gpu.mem_used_bytes, gpu.mem_total_bytes
    if used is None:
        return fmt.NA
    return f"{used / 2**30:.0f}/{total / 2**30:.0f}G" if total else f"{used / 2**30:.0f}G"


def _power(gpu: GpuFigures) -> str:
    power = fmt.NA if gpu.power_w is None else f"{gpu.power_w:.0f}"
    limit = fmt.NA if gpu.power_limit_w is None else f"{gpu.power_limit_w:.0f}"
    return f"{power}/{limit} W"


def _clock(gpu: GpuFigures) -> str:
    if gpu.sm_clock_mhz is None:
        return fmt.NA
    ceiling = f"/{gpu.sm_clock_max_mhz:.0f}" if gpu.sm_clock_max_mhz else ""
    return f"{gpu.sm_clock_mhz:.0f}{ceiling}"


def _clock_mhz(gpu: GpuFigures) -> str:
    return fmt.NA if gpu.sm_clock_mhz is None else f"{gpu.sm_clock_mhz:.0f} MHz"


def _temp(gpu: GpuFigures) -> str:
    return fmt.NA if gpu.temp_c is None else f"{gpu.temp_c:.0f}°C"

"""Text for figures: units attached, N/A for what was not measured (never a silent 0)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

NA = "N/A"


def pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def ms(value: float | None) -> str:
    if value is None:
        return NA
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms"


def rate(value: float | None, unit: str) -> str:
    if value is None:
        return NA
    if value >= 10_000:
        return f"{value / 1000:.1f}k {unit}"
    return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"


def gib(value: float | None) -> str:
    return NA if value is None else f"{value / 2**30:.1f}"


def size(value: float | None) -> str:
    """Bytes in the largest binary unit that keeps a digit before the point."""
    if value is None:
        return NA
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def mem_pair(used: float | None, total: float | None) -> str:
    if used is None:
        return NA
    return f"{gib(used)}/{gib(total)} GiB" if total else f"{gib(used)} GiB"


def bytes_rate(value: float | None) -> str:
    if value is None:
        return NA
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B/s"


def duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def gpus(indices: Iterable[int]) -> str:
    """GPUs by NVML's index, "0" or "0,1"; empty where there are none (the caller says why)."""
    return ",".join(map(str, indices))


def spans(indices: Sequence[int]) -> str:
    """GPU or rank numbers as ranges: 0,1,2,3,5 -> "0-3,5"."""
    parts: list[str] = []
    ordered = sorted(set(indices))
    start = 0
    for position, index in enumerate(ordered):
        if position == 0 or index != ordered[position - 1] + 1:
            start = index
        if position + 1 == len(ordered) or ordered[position + 1] != index + 1:
            parts.append(str(index) if start == index else f"{start}-{index}")
    return ",".join(parts)


def code_line(file: str, line: int) -> str:
    """A line of the script as a finding names it, "train.py:212": the file's name, which the
    user finds in their editor (the hook sends the path Python knows, often absolute)."""
    return f"{file.rsplit('/', 1)[-1]}:{line}"

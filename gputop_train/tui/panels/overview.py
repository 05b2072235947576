"""The Overview tab's panels: the header, steps, GPUs, the headline finding, the charts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple

from textual.app import ComposeResult
from textual.containers import Grid

from ... import format as fmt
from ...samples import GpuSample
from ...session.series import ChartSeries
from ...views import View
from ..widgets.chart import BrailleChart, ChartLabel
from ..widgets.live_text import LiveText
from . import text
from .base import SLOW, Panel, UiState


class HeaderPanel(LiveText, Panel):
    """The job's state, clock, phase, GPUs and command; on every tab."""

    TIER = SLOW

    def show_view(self, view: View, ui: UiState) -> None:
        self.show(
            text.header(view.snap, ui.job_pid, ui.paused, ui.replay_status, width=self.size.width)
        )


class StepsPanel(LiveText, Panel):
    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.steps_panel(view, width=self.size.width))


class GpuPanel(LiveText, Panel):
    """Every GPU's figures over the window; most ticks leave them as they were (a sample
    every second, figures rounded as shown), and then the panel is not built again."""

    def key(self, view: View, ui: UiState) -> object:
        snap = view.snap
        return (snap.nvml_error, snap.gpus, snap.job_gpus, snap.memory, self._width())

    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.gpu_panel(view.snap, self._width()))

    def _width(self) -> int:
        # Before its first layout the panel has no width: half the terminal's, as #top
        # splits it (app.tcss), less the padding.
        return self.content_region.width or max(0, self.app.size.width // 2 - 2)


class FindingsPanel(LiveText, Panel):
    TIER = SLOW

    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.findings_panel(view))


# The chart areas scroll every 2 s, as btop's and nvitop's graphs do at their default
# refresh; their titles, with the latest value, change at every tick. A scrolling area
# rewrites nearly all of its cells: at one scroll a second the four charts were most of the
# TUI's terminal bytes once the other panels wrote only their changed cells; scrolling every
# 2 s took the replay from 4.7 to 3.1 KB/s (docs/benchmarks.md §5).
CHART_SCROLL_S = 2.0


class _Scales(NamedTuple):
    """Each chart's top, set when the areas scroll (a title shows the scale its area has)."""

    throughput: float
    step_ms: float
    memory_bytes: float
    memory_total_known: bool


def _scales(charts: ChartSeries, gpus: Sequence[GpuSample]) -> _Scales:
    steps = sorted(v for v in charts.step_ms if v is not None)
    total_mem = max((g.mem_total_bytes or 0 for g in gpus), default=0) or None  # one GPU's
    memory = charts.gpu_mem_used_bytes
    return _Scales(
        throughput=max((v for v in charts.samples_per_s if v is not None), default=1.0) * 1.2,
        # The 95th percentile sets the scale: one start-up or compile step must not flatten it.
        step_ms=steps[int(0.95 * (len(steps) - 1))] * 1.3 if steps else 1.0,
        memory_bytes=float(total_mem or max((v or 0 for v in memory), default=1) or 1),
        memory_total_known=total_mem is not None,
    )


class ChartsPanel(Grid, Panel):
    """Four braille charts of the chart window; redrawn only when a bucket closes, their
    areas at most every ``CHART_SCROLL_S``."""

    TIER = SLOW
    NEEDS_CHARTS: ClassVar[bool] = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._scrolled: tuple[float, str] | None = None  # when, and at which window
        self._scales: _Scales | None = None

    def compose(self) -> ComposeResult:
        yield BrailleChart("samples/s", "cyan", id="chart-throughput")
        yield BrailleChart("step ms", "blue", under_color="red", id="chart-step")
        yield BrailleChart("GPU %", "green", under_color="magenta", id="chart-util")
        yield BrailleChart("GPU mem", "yellow", id="chart-mem")

    def show_view(self, view: View, ui: UiState) -> None:
        """Each chart's title carries its latest value and the top of its scale (as nvitop's
        and btop's do) and the window, so `w` shows at once."""
        charts = view.snap.charts
        if charts is None:
            return
        window, now = ui.chart_window, view.snap.t
        last = self._scrolled
        # A new window, or a replay that jumped back, scrolls at once.
        scroll = last is None or last[1] != window or not 0 <= now - last[0] < CHART_SCROLL_S
        if scroll:
            self._scrolled = (now, window)
            job = view.snap.job_gpus
            gpus = [g for g in view.snap.latest_gpus if job is None or job.holds(g.index)]
            self._scales = _scales(charts, gpus)
        scales = self._scales
        assert scales is not None  # set by the first draw, which always scrolls
        top, step_top, mem_top = scales.throughput, scales.step_ms, scales.memory_bytes
        self.query_one("#chart-throughput", BrailleChart).update_series(
            charts.samples_per_s,
            top,
            _label(charts.samples_per_s, f"{top:,.0f}", window, source="hook"),
            scroll=scroll,
        )
        self.query_one("#chart-step", BrailleChart).update_series(
            charts.step_ms,
            step_top,
            _label(charts.step_ms, f"{step_top:,.0f}", window, legend="red=data-wait"),
            under=charts.data_wait_ms,
            scroll=scroll,
        )
        self.query_one("#chart-util", BrailleChart).update_series(
            charts.gpu_util_pct,
            100.0,
            _label(charts.gpu_util_pct, "100", window, legend="magenta=tensor"),
            under=charts.tensor_active_pct,
            scroll=scroll,
        )
        memory = charts.gpu_mem_used_bytes
        gib = tuple(None if v is None else v / 2**30 for v in memory)
        mem_label = f"{mem_top / 2**30:.1f} GiB" if scales.memory_total_known else fmt.NA
        self.query_one("#chart-mem", BrailleChart).update_series(
            memory, mem_top, _label(gib, mem_label, window, source="NVML"), scroll=scroll
        )


def _label(
    values: tuple[float | None, ...], top: str, window: str, legend: str = "", source: str = ""
) -> ChartLabel:
    """ "3,508 · axis 4,210 · 1 min · hook": the last bucket's value, the axis, the window."""
    latest = next((v for v in reversed(values) if v is not None), None)
    now = fmt.NA if latest is None else f"{latest:,.1f}" if latest < 10 else f"{latest:,.0f}"
    return ChartLabel(now, top, window, legend, source)

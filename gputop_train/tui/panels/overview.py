"""The Overview tab's panels: the header, steps, GPUs, the headline finding, the charts."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.containers import Grid

from ... import format as fmt
from ...views import View
from ..widgets.chart import BrailleChart
from ..widgets.live_text import LiveText
from . import text
from .base import SLOW, Panel, UiState


class HeaderPanel(LiveText, Panel):
    """The job's state, clock, phase, GPUs and command; on every tab."""

    TIER = SLOW

    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.header(view.snap, ui.job_pid, ui.paused, ui.chart_window, ui.replay_status))


class StepsPanel(LiveText, Panel):
    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.steps_panel(view))


class GpuPanel(LiveText, Panel):
    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.gpu_panel(view.snap))


class FindingsPanel(LiveText, Panel):
    TIER = SLOW

    def show_view(self, view: View, ui: UiState) -> None:
        self.show(text.findings_panel(view))


class ChartsPanel(Grid, Panel):
    """Four braille charts of the chart window; redrawn only when a bucket closes."""

    TIER = SLOW
    NEEDS_CHARTS: ClassVar[bool] = True

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
        window = ui.chart_window
        throughput = [v for v in charts.samples_per_s if v is not None]
        steps = sorted(v for v in charts.step_ms if v is not None)
        # The 95th percentile sets the scale: one start-up or compile step must not flatten it.
        step_top = steps[int(0.95 * (len(steps) - 1))] * 1.3 if steps else 1.0
        total_mem = sum(g.mem_total_bytes or 0 for g in view.snap.latest_gpus) or None
        top = max(throughput, default=1.0) * 1.2
        self.query_one("#chart-throughput", BrailleChart).update_series(
            charts.samples_per_s, top, _label(charts.samples_per_s, f"{top:,.0f}", window, "hook")
        )
        self.query_one("#chart-step", BrailleChart).update_series(
            charts.step_ms,
            step_top,
            _label(charts.step_ms, f"{step_top:,.0f}", window, "red=data-wait"),
            under=charts.data_wait_ms,
        )
        self.query_one("#chart-util", BrailleChart).update_series(
            charts.gpu_util_pct,
            100.0,
            _label(charts.gpu_util_pct, "100", window, "magenta=tensor"),
            under=charts.tensor_active_pct,
        )
        memory = charts.gpu_mem_used_bytes
        mem_top = float(total_mem or max((v or 0 for v in memory), default=1) or 1)
        gib = tuple(None if v is None else v / 2**30 for v in memory)
        self.query_one("#chart-mem", BrailleChart).update_series(
            memory,
            mem_top,
            _label(gib, f"{mem_top / 2**30:.1f} GiB" if total_mem else fmt.NA, window, "NVML"),
        )


def _label(values: tuple[float | None, ...], top: str, window: str, note: str) -> str:
    """ "3,508 /4,210 · 1 min · hook": the last bucket's value, the scale, the window."""
    latest = next((v for v in reversed(values) if v is not None), None)
    now = fmt.NA if latest is None else f"{latest:,.1f}" if latest < 10 else f"{latest:,.0f}"
    return f"{now} /{top} · {window} · {note}"

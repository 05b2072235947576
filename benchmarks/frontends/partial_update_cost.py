"""What a frame's partial update costs: Textual's ``Compositor.render_partial_update`` against
ours (``tui/partial_updates.py``), side by side in one run.

Plays a recording (default: the H100 ladder in docs/examples) into the TUI under Textual's
Pilot at 160x48, half a second of the recording per tick, as the live TUI refreshes; each frame
is rendered by one of the two, drawn at random, and reports the CPU time of the update and how
many widgets it rendered. No GPU needed; the figures are in docs/benchmarks.md §5.

    python -m benchmarks.frontends.partial_update_cost --ticks 300
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import Any

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gputop_train.record.reader import read
from gputop_train.record.replay import ReplayController
from gputop_train.tui import partial_updates, renderer_guard
from gputop_train.tui.app import create_app
from gputop_train.tui.boundary import AppOptions

REPO = Path(__file__).resolve().parents[2]
VARIANTS = {
    "textual": partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE,
    "ours": partial_updates.render_partial_update,
}


async def measure(recording: Path, ticks: int, seek_s: float, seed: int) -> dict[str, Any]:
    """Per variant: frames, CPU ms per update (median, mean) and widgets rendered per frame."""
    clock = {"t": 0.0}
    controller = ReplayController(read(recording), clock=lambda: clock["t"])
    controller.seek(controller.recording.started_at + seek_s)
    draw = random.Random(seed)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    renders = dict.fromkeys(VARIANTS, 0)
    current = {"name": "ours"}
    render_lines = Widget.render_lines

    def counted(widget: Widget, crop: Region) -> list[Strip]:
        renders[current["name"]] += 1
        return render_lines(widget, crop)

    def either(compositor: Compositor) -> ChopsUpdate | None:
        current["name"] = name = draw.choice(list(VARIANTS))
        start = time.thread_time()
        update = VARIANTS[name](compositor)
        times[name].append(time.thread_time() - start)
        return update

    app = create_app(controller.snapshot, AppOptions(auto_refresh=False), timeline=controller)
    async with app.run_test(size=(160, 48)) as pilot:
        Widget.render_lines = counted  # type: ignore[method-assign,assignment]
        Compositor.render_partial_update = either  # type: ignore[method-assign,assignment]
        try:
            for _ in range(ticks):
                clock["t"] += 0.5
                app.post_message(app.take_snapshot())
                await pilot.pause(0.02)
        finally:
            Widget.render_lines = render_lines  # type: ignore[method-assign]
            renderer_guard.install_partial_updates()
    return {
        name: {
            "frames": len(spent),
            "median_ms": round(1000 * statistics.median(spent), 3),
            "mean_ms": round(1000 * statistics.mean(spent), 3),
            "widgets_per_frame": round(renders[name] / len(spent), 1),
        }
        for name, spent in times.items()
        if spent
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--recording", type=Path, default=REPO / "docs" / "examples" / "h100-ladder.jsonl"
    )
    parser.add_argument("--ticks", type=int, default=300, help="refreshes, 0.5 s of recording each")
    parser.add_argument("--seek", type=float, default=80.0, help="start this far in, s")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(measure(args.recording, args.ticks, args.seek, args.seed))
    for name, figures in result.items():
        print(name, figures)


if __name__ == "__main__":
    main()

"""What the Log tab costs the UI on a chatty job: 200 lines of 150 characters a step (issue 46).

This tree against an earlier one (``--baseline DIR``, a ``git archive REV | tar -x -C DIR``),
arms alternated ABBA, the first refresh of each arm a warm-up left out:

- ``refresh``: the Log panel alone in a Textual app of 160x48, fed ``--steps-per-refresh``
  steps of output between refreshes; per refresh, the CPU the process spent (the panel's
  update, the frame painted after it and any worker thread) and the wall time it held the
  UI, in a child process per arm (the tree's own package).
- ``keys``: the whole TUI on a chatty job (``--step-ms`` a step) in tmux: seconds from the
  key ``3`` to the log on screen, and from ``1`` back to the Overview, ``--presses`` times per
  arm, and the monitor's main thread's CPU while the Log tab is up.

``--hogs N`` runs N busy loops beside (the issue's box was at load 22); run it under
``heavy -x`` and read the load it prints.

    python -m benchmarks.frontends.log_tab_cost --baseline /tmp/base --hogs 6 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
LINES_PER_STEP = 200
LINE_CHARS = 150

CHATTY_JOB = f"""
import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
step_s, seconds = float(sys.argv[1]) / 1000, float(sys.argv[2])
model = torch.nn.Linear(16, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = DataLoader(TensorDataset(torch.randn(64, 16)), batch_size=8)
end, step = time.monotonic() + seconds, 0
while time.monotonic() < end:
    for (x,) in data:
        model(x).sum().backward(); optimizer.step(); optimizer.zero_grad()
        time.sleep(step_s)
        sys.stdout.write("".join(
            f"step {{step:07d}} line {{i:03d}} loss 0.1234 ".ljust({LINE_CHARS - 1}, "x") + "\\n"
            for i in range({LINES_PER_STEP})))
        sys.stdout.flush()
        step += 1
"""


def step_lines(step: int) -> str:
    return "".join(
        f"step {step:07d} line {i:03d} loss 0.1234 ".ljust(LINE_CHARS - 1, "x") + "\n"
        for i in range(LINES_PER_STEP)
    )


async def refresh_costs(refreshes: int, steps: int, folder: Path) -> list[tuple[float, float]]:
    """In the child: (CPU s, wall s) of each refresh of the tree's Log panel."""
    from textual.app import App, ComposeResult

    from gputop_train.job.log import LogTail
    from gputop_train.session.model import Session
    from gputop_train.tui.panels.base import UiState
    from gputop_train.tui.panels.log import LogPanel
    from gputop_train.views import view_of

    path = folder / "job.log"
    path.write_text("")
    panel = LogPanel(LogTail(path))

    class OneLog(App[None]):
        def compose(self) -> ComposeResult:
            yield panel

    view = view_of(Session(command=("job",)).snapshot())
    ui = UiState(job_pid=None, paused=False, chart_window="1 min", replay_status=None)
    costs = []
    async with OneLog().run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for index in range(refreshes + 1):
            with path.open("a") as handle:
                handle.writelines(step_lines(index * steps + n) for n in range(steps))
            cpu, wall = time.process_time(), time.perf_counter()
            panel.show_view(view, ui)
            await pilot.pause()  # the frame it asked for, painted
            costs.append((time.process_time() - cpu, time.perf_counter() - wall))
    return costs[1:]  # the first is a warm-up


def run_refresh_arm(tree: Path, refreshes: int, steps: int) -> list[tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", str(refreshes), str(steps)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [tuple(pair) for pair in json.loads(out.stdout.splitlines()[-1])]


def _screen(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
    ).stdout


def _wait_for(session: str, shown: bool, text: str, limit_s: float) -> float:
    """Seconds until ``text`` is (or, ``shown`` False, is no longer) on the screen."""
    started = time.monotonic()
    while (time.monotonic() - started) < limit_s:
        if (text in _screen(session)) == shown:
            return time.monotonic() - started
        time.sleep(0.05)
    return float("inf")


def _main_thread_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def run_keys_arm(tree: Path, presses: int, step_ms: float, folder: Path) -> dict[str, object]:
    """The whole TUI on the chatty job in tmux: the key ``3``'s and ``1``'s latencies."""
    job = folder / "chatty.py"
    job.write_text(CHATTY_JOB)
    session = f"logtab{os.getpid()}"
    command = (
        f"cd {tree} && PYTHONPATH={tree} XDG_DATA_HOME={folder} timeout --foreground 600 "
        f"{sys.executable} -m gputop_train {job} {step_ms} 590"
    )
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command])
    shows, backs, cpu_pct = [], [], []
    try:
        first = _wait_for(session, True, "1 Overview", 120)
        _wait_for(session, False, "waiting for the first training step", 120)
        pane = int(
            subprocess.run(
                ["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"],
                capture_output=True,
                text=True,
            ).stdout.split()[0]
        )
        monitor = next(
            p.pid
            for p in [psutil.Process(pane), *psutil.Process(pane).children(recursive=True)]
            if p.name().startswith("python") and "gputop_train" in p.cmdline()
        )
        time.sleep(10)  # warm-up: the job's output piles up while the Overview is up
        hertz = os.sysconf("SC_CLK_TCK")
        for _ in range(presses):
            subprocess.run(["tmux", "send-keys", "-t", session, "3"])
            shows.append(_wait_for(session, True, " loss 0.1234 ", 120))
            before, started = _main_thread_ticks(monitor), time.monotonic()
            time.sleep(8)  # on the Log tab, the job printing on
            cpu_pct.append(
                100 * (_main_thread_ticks(monitor) - before) / hertz / (time.monotonic() - started)
            )
            subprocess.run(["tmux", "send-keys", "-t", session, "1"])
            backs.append(_wait_for(session, False, " loss 0.1234 ", 120))
            time.sleep(8)  # the Overview again while the job prints
        subprocess.run(["tmux", "send-keys", "-t", session, "q"])
        time.sleep(1)
        subprocess.run(["tmux", "send-keys", "-t", session, "s"])
        _wait_for(session, False, "1 Overview", 30)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return {"first_frame_s": first, "show_s": shows, "back_s": backs, "log_tab_cpu_pct": cpu_pct}


@contextmanager
def hogs(count: int, seconds: float) -> Iterator[None]:
    """``count`` busy loops beside the measurement, ended with it (at most ``seconds``)."""
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    started = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in started:
            hog.kill()
            hog.wait()


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        refreshes, steps = int(sys.argv[2]), int(sys.argv[3])
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(asyncio.run(refresh_costs(refreshes, steps, Path(folder)))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="an earlier tree, run beside this one")
    parser.add_argument("--parts", default="refresh,keys", help="refresh, keys or both")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds")
    parser.add_argument("--refreshes", type=int, default=10, help="refreshes per arm and round")
    parser.add_argument("--steps-per-refresh", type=int, default=10, help="20 steps/s at 2 Hz")
    parser.add_argument("--presses", type=int, default=2, help="keys: 3 then 1, per arm/round")
    parser.add_argument("--step-ms", type=float, default=50.0, help="keys: the job's step")
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside")
    args = parser.parse_args()
    if "keys" in args.parts and shutil.which("tmux") is None:
        parser.error("the keys part needs tmux")
    trees = {"now": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    refresh: dict[str, list[tuple[float, float]]] = {arm: [] for arm in trees}
    keys: dict[str, list[dict[str, object]]] = {arm: [] for arm in trees}
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
    with hogs(args.hogs, 3600), tempfile.TemporaryDirectory() as folder:
        for index in range(args.rounds):
            order = list(trees) if index % 2 == 0 else list(reversed(trees))
            for arm in order:
                if "refresh" in args.parts:
                    costs = run_refresh_arm(trees[arm], args.refreshes, args.steps_per_refresh)
                    refresh[arm] += costs
                    print(arm, "refresh", json.dumps(costs), flush=True)
                if "keys" in args.parts:
                    found = run_keys_arm(trees[arm], args.presses, args.step_ms, Path(folder))
                    keys[arm].append(found)
                    print(arm, "keys", json.dumps(found), flush=True)
                print(f"  load {os.getloadavg()[0]:.1f}", flush=True)
    for arm in trees:
        if refresh[arm]:
            cpu = [c for c, _ in refresh[arm]]
            wall = [w for _, w in refresh[arm]]
            print(
                f"{arm:<8} refresh: CPU median {statistics.median(cpu) * 1000:.1f} ms "
                f"(range {min(cpu) * 1000:.1f}-{max(cpu) * 1000:.1f}), wall median "
                f"{statistics.median(wall) * 1000:.1f} ms (max {max(wall) * 1000:.1f})"
            )
        if keys[arm]:
            shows = [s for run in keys[arm] for s in run["show_s"]]  # type: ignore[attr-defined]
            backs = [s for run in keys[arm] for s in run["back_s"]]  # type: ignore[attr-defined]
            cpu_pct = [c for run in keys[arm] for c in run["log_tab_cpu_pct"]]  # type: ignore[attr-defined]
            print(
                f"{arm:<8} keys: '3' to the log {statistics.median(shows):.2f} s (max "
                f"{max(shows):.2f}), '1' back {statistics.median(backs):.2f} s (max "
                f"{max(backs):.2f}), UI thread on the Log tab {statistics.median(cpu_pct):.0f}% "
                "of a core"
            )
    print(f"load after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

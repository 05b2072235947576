"""The report of a long multi-rank session: its size, and its time beside ``summary``'s on the
same recording (the replay both make), in one process, rounds alternated.

    python -m benchmarks.scale.report_size [--ranks 8] [--hours 1] [--rounds 3] [--workers 0]

Issue 46's case, 256 ranks of 2 minutes with their process samples:
``--ranks 256 --hours 0.0333 --workers 2 --rounds 1``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gputop_train.record.reader import read, replay_all
from gputop_train.record.summary import markdown, summarize
from gputop_train.reports.report import write_report
from tests.support.synthetic_recording import write_synthetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers a rank")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        recording = Path(folder) / "long.jsonl"
        lines = write_synthetic(recording, ranks=args.ranks, seconds=3600.0 * args.hours,
                                workers=args.workers)  # fmt: skip
        print(f"recording: {args.ranks} ranks, {args.hours:g} h, {lines} lines, "
              f"{recording.stat().st_size / 2**20:.1f} MiB")  # fmt: skip
        summary_s, report_s, summary_cpu, report_cpu = [], [], [], []
        page = Path(folder) / "long.html"
        for _ in range(args.rounds):
            started, cpu = time.perf_counter(), time.process_time()
            loaded = read(recording)
            markdown(summarize(replay_all(loaded), loaded.meta))
            summary_s.append(round(time.perf_counter() - started, 2))
            summary_cpu.append(round(time.process_time() - cpu, 2))
            started, cpu = time.perf_counter(), time.process_time()
            write_report(recording, page)
            report_s.append(round(time.perf_counter() - started, 2))
            report_cpu.append(round(time.process_time() - cpu, 2))
        # CPU seconds beside wall: on a shared box the wall time is mostly other work's.
        summary, report = statistics.median(summary_s), statistics.median(report_s)
        print(f"summary (read + replay + summarize): wall {summary_s} s, CPU {summary_cpu} s")
        print(f"report (the same + series + 4 plots + page): wall {report_s} s, "
              f"CPU {report_cpu} s")  # fmt: skip
        print(f"report / summary (median wall): {report / summary:.2f}x; median CPU "
              f"{statistics.median(report_cpu):.2f} s")  # fmt: skip
        print(f"report size: {page.stat().st_size / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()

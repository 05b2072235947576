"""A synthetic job of many nodes x 8 ranks against a real Prometheus (issue 45): stand-in
node exporters (standin.py, the real exporter's families and labels) serve real scrapes,
each node under its own host name; Prometheus (Debian's) scrapes them all with the shipped
rules loaded; then:

- series per node and bytes per scrape (a node's page);
- the job view's PromQL time per refresh (its queries, in parallel);
- the alert rules' evaluation time (Prometheus's own ``evaluationTime`` per group);
- the alert rules' costliest rules (each rule's ``evaluationTime``);
- the job view's refresh, as ``JobWatch.refresh`` runs it, in its parts: the PromQL (its
  queries in parallel, their answers parsed into a sample), the verdict's windows, the
  verdict (advise/rank_verdict.judge), the rows, the JSON line; each refresh reading every
  node or only those scraped since (ARMS, ABBA in one run); and its memory (tracemalloc's
  peak, over one more refresh than those timed);
- the scrapes that failed (a failed scrape's node is missing from a reading), those whose
  step counter stood still, and, for each verdict window, whether the slowed rank is judged.

One rank (node 7, rank 61) is slowed in its input; the view must name it with its node.

    python -m benchmarks.scale.job_scale --nodes 1000 --out docs/results/job-scale.json

``--no-verdict`` leaves the verdict out (before 2026-12-05 it grew with the square of the
ranks: minutes at 8,000).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.common.provenance import write_result
from benchmarks.scale.standin import Node, Rank, StandinNodes, node_page
from gputop_train.advise.rank_verdict import MIN_STEPS, RankWindow, judge
from gputop_train.jobview.judge import JobHistory, build_view
from gputop_train.jobview.prometheus import PrometheusSource
from gputop_train.jobview.view import headline_line, to_json
from tests.support.prometheus_server import (
    SCRAPE_TIMEOUT_S,
    free_port,
    running_prometheus,
    static_job,
)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "docs" / "prometheus" / "rules.yml"
JOB = "train-4711"
SLOW = (7, 61)  # node 7's rank 61, slowed in its input


def build_job(nodes: int, per_node: int = 8) -> list[Node]:
    built = []
    for n in range(nodes):
        ranks = []
        for local in range(per_node):
            rank = n * per_node + local
            slow = (n, rank) == SLOW
            jitter = (rank * 37 % 11) / 10.0  # unslowed ranks differ a little, as real ones
            input_ms = 31.0 if slow else 1.0 + jitter / 5
            comm_ms = 1.0 if slow else 30.0 + jitter
            ranks.append(Rank(rank, local, 10_000 + rank, 60.0 + jitter, input_ms, comm_ms))
        built.append(Node(JOB, str(n), f"node-{n:04d}", ranks))
    return built


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.load(response)


def _rules_time(url: str) -> dict[str, float]:
    groups = _get(f"{url}/api/v1/rules")["data"]["groups"]
    return {g["name"]: float(g.get("evaluationTime", 0.0)) for g in groups}


def _costliest_rules(url: str, top: int = 8) -> dict[str, float]:
    """The rules that took longest at their last evaluation, by name (s)."""
    groups = _get(f"{url}/api/v1/rules")["data"]["groups"]
    times = {
        rule.get("name", "?"): float(rule.get("evaluationTime", 0.0))
        for group in groups
        for rule in group["rules"]
    }
    return dict(sorted(times.items(), key=lambda kv: -kv[1])[:top])


def _scalar(url: str, promql: str) -> float:
    result = _get(f"{url}/api/v1/query?query={urllib.parse.quote(promql)}")["data"]["result"]
    return float(result[0]["value"][1]) if result else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=15.0, help="scrape interval (s)")
    parser.add_argument(
        "--eval-interval",
        type=float,
        default=1.0,
        help="rule evaluation interval (s): 1 as the tests' Prometheus, the scrape's for a site's",
    )
    parser.add_argument("--refreshes", type=int, default=8, help="ABBA: a multiple of 4")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--no-verdict", action="store_true", help="leave out the verdict's time (minutes at 8,000)"
    )
    parser.add_argument("--serve-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    job = build_job(args.nodes)
    if args.serve_port is not None:  # the child: the stand-in nodes, apart from the job view
        StandinNodes(job, port=args.serve_port, refresh_s=args.interval / 2)
        time.sleep(3600)
        return 0
    page = node_page(job[0])
    per_node = sum(1 for line in page.decode().splitlines() if line and line[0] != "#")
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "ranks": args.nodes * 8,
        "series_per_node": per_node,
        "scrape_bytes_per_node": len(page),
        "scrape_interval_s": args.interval,
        "evaluation_interval_s": args.eval_interval,
    }
    print(json.dumps(result), flush=True)
    port = free_port()
    nodes = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.scale.job_scale", "--nodes", str(args.nodes),
         "--interval", str(args.interval), "--serve-port", str(port)],
        cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # its pages are rendered before it serves
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/0/metrics", timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        targets = [(f"127.0.0.1:{port}", f"/{n.node}/metrics") for n in job]
        config = static_job("gputop-train", targets, args.interval)
        with (
            tempfile.TemporaryDirectory() as folder,
            running_prometheus(
                Path(folder), config, RULES, scrape_self=True, evaluation_s=args.eval_interval
            ) as url,
        ):
            ready = time.monotonic()
            # Six scrapes of every target, so rates, the rules' windows and the verdict's three
            # windows (and the step counts before them) have data.
            while time.monotonic() - ready < 6 * args.interval:
                time.sleep(args.interval / 2)
                head = _scalar(url, "prometheus_tsdb_head_series")
                print(f"  {time.monotonic() - ready:5.0f} s: head series {head:.0f}", flush=True)
            result["prometheus_head_series"] = _scalar(url, "prometheus_tsdb_head_series")
            result["prometheus_rss_bytes"] = _scalar(url, "process_resident_memory_bytes")
            result["scrape_duration_s_max"] = _scalar(
                url, 'max(scrape_duration_seconds{job="gputop-train"})'
            )
            result["scrape_timeout_s"] = min(args.interval, SCRAPE_TIMEOUT_S)
            result.update(_failed_scrapes(url, time.monotonic() - ready))
            evaluations = []
            for _ in range(5):  # five evaluations' figures
                evaluations.append(_rules_time(url))
                time.sleep(args.eval_interval)
            result["rule_group_evaluation_s"] = {
                name: statistics.median(e[name] for e in evaluations) for name in evaluations[0]
            }
            result["rule_group_evaluation_s_each"] = evaluations
            result["costliest_rules_s"] = _costliest_rules(url)
            print(json.dumps(result), flush=True)
            result.update(_job_view(url, args))
            result.update(_failed_scrapes(url, time.monotonic() - ready, "_at_end"))
    finally:
        nodes.kill()
        nodes.wait(timeout=30)
    print(json.dumps(result, indent=2))
    if args.out:
        write_result(args.out, json.dumps(result, indent=2) + "\n")
    return 0


def _failed_scrapes(url: str, since_s: float, suffix: str = "") -> dict[str, float]:
    """The stand-ins' scrapes since Prometheus started, those that failed (a failed scrape's
    node reads as absent, its ranks missing from the view until the next), and those whose
    step counter had not moved since the node's scrape before (its ranks count no steps)."""
    span = f"{max(1, int(since_s))}s"
    up, steps = 'up{job="gputop-train"}', 'gputop_train_steps_total{local_rank="0"}'
    scrapes = _scalar(url, f"sum(count_over_time({up}[{span}]))")
    still = f"count_over_time({steps}[{span}]) - 1 - changes({steps}[{span}])"
    return {
        "scrapes" + suffix: scrapes,
        "scrapes_failed" + suffix: scrapes - _scalar(url, f"sum(sum_over_time({up}[{span}]))"),
        "scrapes_counter_still" + suffix: _scalar(url, f"sum({still})"),
    }


def _slowed_in(windows: list[list[RankWindow]]) -> list[dict[str, Any]]:
    """For each of the verdict's windows: the ranks it judges (MIN_STEPS steps or more), and
    whether the slowed rank is among them (a rank is named only where it is in all three)."""
    judged = [[r for r in window if r.steps >= MIN_STEPS] for window in windows]
    return [
        {"ranks_judged": len(ranks), "slowed_rank_judged": any(r.rank == SLOW[1] for r in ranks)}
        for ranks in judged
    ]


# The two ways of reading, side by side in one run (ABBA: every, kept, kept, every, ...):
# "every": a source made afresh each refresh, whose one read is of every node (the view's
# every refresh before 2026-12-06); "kept": the view's one source, which reads again only the
# nodes scraped since its last read and keeps the others' answers.
ARMS = ("every", "kept", "kept", "every")


def _job_view(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """The job view's refreshes, as JobWatch.refresh runs them, each part timed, in both ways
    of reading (ARMS); its memory, over one more refresh of the view's own source."""
    source = PrometheusSource(url, JOB)
    history = JobHistory(args.interval)  # windows one scrape apart
    names = ("query", "query_cpu", "windows", "verdict", "rows", "json", "refresh")
    parts: dict[str, dict[str, list[float]]] = {arm: {n: [] for n in names} for arm in ARMS[:2]}
    read: list[int] = []  # ranks in each reading, the backfill's first
    nodes_read: list[int | None] = []  # nodes the kept source read again, each of its reads
    for sample in source.past(args.interval):
        history.add(sample)
        read.append(len(sample.ranks))
    source.sample()  # its first read, of every node, before the arms
    view, text, windows = None, "", []
    named: list[str | None] = []  # each judged refresh's headline (None: nothing named)
    for refresh in range(args.refreshes + 1):
        arm = "kept" if refresh == args.refreshes else ARMS[refresh % len(ARMS)]
        if refresh == args.refreshes:  # one more, for its memory: tracemalloc slows it 2-5x
            tracemalloc.start()
        started, cpu = time.perf_counter(), time.process_time()
        reader = source if arm == "kept" else PrometheusSource(url, JOB)
        sample = reader.sample()
        if reader is source:
            nodes_read.append(source.last_read)
        else:
            reader.close()
        history.add(sample)
        read.append(len(sample.ranks))
        # query_cpu: this process's own (parsing the answers, building the sample); the rest
        # of "query" is Prometheus's and the wait for a core.
        took = {"query": time.perf_counter() - started, "query_cpu": time.process_time() - cpu}
        mark = time.perf_counter()
        windows = history.windows()
        took["windows"] = time.perf_counter() - mark
        verdict = None
        if len(windows) >= 3 and not args.no_verdict:
            mark = time.perf_counter()
            verdict = judge(windows)
            took["verdict"] = time.perf_counter() - mark
        mark = time.perf_counter()
        view = build_view(sample, source.describe(), verdict, len(windows))
        took["rows"] = time.perf_counter() - mark
        if len(windows) >= 3 and not args.no_verdict:
            named.append(view.headline.text if view.headline else None)
        mark = time.perf_counter()
        text = json.dumps(to_json(view)) + headline_line(view)
        took["json"] = time.perf_counter() - mark
        took["refresh"] = time.perf_counter() - started
        line = ", ".join(f"{k} {v:.2f} s" for k, v in took.items())
        print(f"  refresh ({arm}): {line}", flush=True)
        if refresh == args.refreshes:
            break
        for name, seconds in took.items():
            parts[arm][name].append(seconds)
        time.sleep(1.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    source.close()
    assert view is not None
    return {
        "job_view_order": [ARMS[k % len(ARMS)] for k in range(args.refreshes)],
        "job_view_s": parts,
        "job_view_s_median": {
            arm: {k: statistics.median(v) for k, v in took.items() if v}
            for arm, took in parts.items()
        },
        "job_view_kept_nodes_read": nodes_read,
        "job_view_peak_python_bytes": peak,
        "job_view_json_bytes": len(text),
        "job_view_ranks_read": len(view.ranks),
        "job_view_ranks_read_each": read,
        "job_view_windows": len(windows),
        "job_view_windows_judged": _slowed_in(windows),
        "job_view_headline": view.headline.text if view.headline else None,
        "job_view_named_each_judged": named,
        "job_view_first_node": view.nodes[0].node if view.nodes else None,
    }


if __name__ == "__main__":
    sys.exit(main())

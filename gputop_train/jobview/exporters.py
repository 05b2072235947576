"""The job read from the nodes' exporters directly (``--from URL,URL,...``): the embedded way
for a few nodes with no Prometheus. Each page is parsed with prometheus-client's own parser;
the nodes are read in parallel, and a node that does not answer is said, not fatal."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from statistics import mean
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

from .figures import RANK_FIELDS, JobSample, NodeFigures, RankFigures, SourceError

T = TypeVar("T")
Series = dict[str, list[tuple[dict[str, str], float]]]  # family -> (labels, value) of each sample

PREFIX = "gputop_train_"
# A node's exporter answers from a pre-rendered page in milliseconds (export/page.py); one
# that takes longer than this is said as not answering, and the rest of the job is shown.
SCRAPE_TIMEOUT_S = 5.0
MAX_PARALLEL = 32


def parse_urls(text: str) -> list[str]:
    """``host:9455,http://host2:9455/metrics`` -> full URLs (http, /metrics where no path)."""
    urls = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        url = part if "://" in part else f"http://{part}"
        if url.count("/") == 2:  # scheme://host:port, no path
            url += "/metrics"
        urls.append(url)
    if not urls:
        raise SourceError("--from: give the nodes' exporters, as node1:9455,node2:9455")
    return urls


class ExporterSource:
    """Reads every node's page at each ``sample()``; ``job``: the job to show where a node's
    exporter serves another (None: the one they serve)."""

    def __init__(self, urls: Sequence[str], job: str | None = None) -> None:
        self.urls = list(urls)
        self.job = job
        self._pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(self.urls)))
        # Each exporter's node as last read, and when it last answered (or first failed): a
        # node that stops answering keeps its row, said "not answering since".
        self._last: dict[str, tuple[NodeFigures | None, float]] = {}

    def describe(self) -> str:
        return f"{len(self.urls)} exporters"

    def sample(self) -> JobSample:
        at = time.time()
        pages = list(self._pool.map(_fetch, self.urls))
        nodes, ranks, problems, jobs = [], [], [], set()
        down = []
        for url, (text, problem) in zip(self.urls, pages, strict=True):
            if problem is not None:
                down.append(self._down(url, problem, at))
                continue
            job, node, node_ranks = parse_page(text, url)
            if self.job is not None and job != self.job:
                problems.append(f"{url}: serves job {job!r}, not {self.job!r}")
                continue
            self._last[url] = (node, at)
            jobs.add(job)
            nodes.append(node)
            ranks.extend(node_ranks)
        if not nodes:
            failed = [f"{n.source}: {n.down_reason}" for n in down]
            raise SourceError("no exporter answered: " + "; ".join(problems + failed))
        nodes += down
        if len(jobs) > 1:
            problems.append(f"the exporters serve several jobs ({', '.join(sorted(jobs))})")
        return JobSample(self.job or min(jobs), at, tuple(nodes), tuple(ranks), tuple(problems))

    def _down(self, url: str, reason: str, at: float) -> NodeFigures:
        """The node of ``url`` not answering: as last read, since its last answer (a node
        never read: its address, since this first failed read)."""
        node, since = self._last.setdefault(url, (None, at))
        name = urllib.parse.urlsplit(url).netloc
        if node is None:
            return NodeFigures(name, name, url, down_reason=reason, down_since=since)
        return replace(node, gpu_util_pct=None, down_reason=reason, down_since=since)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _fetch(url: str) -> tuple[str, str | None]:
    """The page's text, or a one-line reason it could not be read."""
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            return response.read().decode("utf-8", "replace"), None
    except urllib.error.HTTPError as error:
        return "", f"HTTP {error.code}"
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        return "", str(reason)


def parse_page(text: str, source: str) -> tuple[str, NodeFigures, list[RankFigures]]:
    """One exporter's page -> its job's name, its node, its ranks (by prometheus-client's
    parser). An exporter from before the info series: the node is its ``host``."""
    series: Series = defaultdict(list)
    for family in text_string_to_metric_families(_read_lines(text)):
        for sample in family.samples:
            if sample.name.startswith(PREFIX):
                series[sample.name[len(PREFIX) :]].append((sample.labels, sample.value))
    info = next(iter(series.get("job_info", ())), None)
    any_labels = next((labels for rows in series.values() for labels, _ in rows), {})
    host = info[0]["host"] if info else any_labels.get("host", source)
    job = info[0]["job"] if info else any_labels.get("train_job", "")
    node = info[0]["node"] if info else host
    ranks = _ranks(series, node, host)
    world = int(info[0]["world_size"]) if info and info[0].get("world_size") else None
    figures = NodeFigures(
        node=node,
        host=host,
        source=source,
        running=_first(series, "job_running", lambda v: v == 1.0),
        exit_code=_first(series, "job_exit_code", float),
        gpu_util_pct=_job_gpu_util(series),
        world_size=world,
    )
    return job, figures, ranks


# The series the view reads (after the prefix): a node's page has ~270, the view ~80.
READ = frozenset(
    [
        *RANK_FIELDS,
        *("rank_info", "job_info", "job_running", "job_exit_code"),
        *("gpu_job", "gpu_utilization_ratio"),
    ]
)


def _read_lines(text: str) -> str:
    """The page's lines of the series the view reads (their samples and their HELP and TYPE
    lines), for the parser: it takes 13 ms a whole page of 8 ranks on the dev box, 13 s a
    refresh of 1,000 nodes, a third of it for these (docs/jobs.md "Scale")."""
    kept = []
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            name = line.split(" ", 3)[2]
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        short = name[len(PREFIX) :] if name.startswith(PREFIX) else ""
        if short in READ or short + "_total" in READ:  # a counter's TYPE line lacks _total
            kept.append(line)
    return "\n".join(kept) + "\n"


def _ranks(series: Series, node: str, host: str) -> list[RankFigures]:
    """A RankFigures per PID, from every rank series of the page."""
    fields: dict[int, dict[str, object]] = defaultdict(dict)
    for labels, _ in series.get("rank_info", ()):
        fields[int(labels["pid"])].update(
            rank=_int(labels.get("rank")),
            local_rank=_int(labels.get("local_rank")),
            gpu=labels.get("gpu", ""),
            uuid=labels.get("UUID", ""),
        )
    for family, (name, scale) in RANK_FIELDS.items():
        for labels, value in series.get(family, ()):
            pid = int(labels["pid"])
            fields[pid].setdefault("rank", _int(labels.get("rank")))
            fields[pid].setdefault("local_rank", _int(labels.get("local_rank")))
            fields[pid][name] = value == 1.0 if name == "connected" else value * scale
    return [
        RankFigures(node=node, host=host, pid=pid, **values)  # type: ignore[arg-type]
        for pid, values in sorted(fields.items())
    ]


def _job_gpu_util(series: Series) -> float | None:
    """The mean utilization of the job's GPUs (``gpu_job`` 1), in %."""
    ours = {labels.get("gpu") for labels, value in series.get("gpu_job", ()) if value == 1.0}
    utils = [
        value * 100.0
        for labels, value in series.get("gpu_utilization_ratio", ())
        if labels.get("gpu") in ours
    ]
    return mean(utils) if utils else None


def _first(series: Series, name: str, read: Callable[[float], T]) -> T | None:
    """The first sample of ``name``, read; None where the page has none."""
    return next((read(value) for _, value in series.get(name, ())), None)


def _int(text: str | None) -> int | None:
    return int(text) if text else None

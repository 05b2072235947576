"""The job read from a Prometheus server (``--prometheus URL [--job NAME]``): PromQL instant
queries over its HTTP API (``/api/v1/query``), one per figure, run in parallel; each query
keeps only the labels the view needs (``max by (host, pid)``), so a 1,000-node job's answer
stays a few megabytes (benchmarks/scale/).

A node's series change only when Prometheus scrapes it (every 15 s at a site), while the view
refreshes every 2 s: each refresh asks first when each node was last scraped, then reads the
ranks of the nodes scraped since its last read only, and keeps the others' answers. The
sample is the one a read of every node gives; a 1,000-node refresh reads a seventh of them
(docs/jobs.md "Scale")."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .figures import RANK_FIELDS, JobSample, NodeFigures, RankFigures, SourceError
from .scrapes import sample_times, spacing_s, target_errors

QUERY_TIMEOUT_S = 10.0  # Prometheus's own default query timeout is 2 minutes; a view can't wait
# A job that ended within this long is still shown (its last figures and its exit status).
ENDED_LOOKBACK = "10m"


def _info(name: str, job: str, by: str, hosts: str = "", lookback: str = "") -> str:
    """An info series of ``job``, as stored with the default honor_labels: false (our ``job``
    as ``exported_job``) or with honor_labels: true (``job``): docs/prometheus.md. ``hosts``:
    a matcher of the nodes to read (``, host=~"…"``); ``lookback``: its last value over it
    (a node no longer scraped)."""
    either = [f'gputop_train_{name}{{{label}="{job}"{hosts}}}' for label in ("exported_job", "job")]
    if lookback:
        either = [f"last_over_time({series}[{lookback}])" for series in either]
    return f"max by ({by}) ({either[0]} or {either[1]})"


def queries(job: str, hosts: list[str] | None = None) -> dict[str, str]:
    """Every query of one refresh, by what it reads; ``hosts``: the per-node and per-rank
    series of those nodes only (None: of every node). The job's state reads every node."""
    sel = f'{{train_job="{job}"}}'
    of = "" if hosts is None else f", host=~{_any_of(hosts)}"
    some = f'{{train_job="{job}"{of}}}'
    found = {
        family: f"max by (host, pid, rank, local_rank) (gputop_train_{family}{some})"
        for family in RANK_FIELDS
    }
    found["rank_info"] = _info("rank_info", job, "host, pid, rank, local_rank, node, gpu, UUID", of)
    found["job_info"] = _info("job_info", job, "host, node, world_size", of)
    found["job_running"] = (
        f"max by (host) (last_over_time(gputop_train_job_running{sel}[{ENDED_LOOKBACK}]))"
    )
    found["job_exit_code"] = (
        f"max by (host) (last_over_time(gputop_train_job_exit_code{sel}[{ENDED_LOOKBACK}]))"
    )
    found["gpu_util"] = (
        f"avg by (host) (gputop_train_gpu_utilization_ratio{some} "
        f"and on (host, gpu) (gputop_train_gpu_job{some} == 1))"
    )
    return found


# Each node's series, one a node, and when Prometheus last scraped it: every series of one
# scrape carries that scrape's time. The exporter serves it on every node (export/families.py).
_HOSTS = "gputop_train_job_running"
# The queries whose answers are per node or per rank of a node (kept between reads).
_PER_RANK = frozenset((*RANK_FIELDS, "rank_info"))
_OF_NODES = (*_PER_RANK, "job_info", "gpu_util")


def scraped(job: str) -> str:
    """When each node of ``job`` was last scraped (its series' time stamp), by host."""
    return f'max by (host) (timestamp({_HOSTS}{{train_job="{job}"}}))'


def _any_of(hosts: list[str]) -> str:
    """A PromQL string of a regular expression that matches exactly these hosts."""
    return json.dumps("|".join(re.escape(h) for h in hosts))


class PrometheusSource:
    """Reads one job from a Prometheus server at each ``sample()``; ``job`` None: the one
    job running (several: said, with their names)."""

    def __init__(self, url: str, job: str | None = None) -> None:
        self.url = url.rstrip("/")
        if "://" not in self.url:
            self.url = "http://" + self.url
        self._pool = ThreadPoolExecutor(max_workers=8)
        self.job = job or self._running_job()
        # How many nodes the last sample of now read again (None: every node, not counted).
        self.last_read: int | None = None
        # Per host: when its answers were scraped, and its rows of each query of _OF_NODES.
        self._kept: dict[str, tuple[float, dict[str, list[dict[str, Any]]]]] = {}
        # Per kept host: its ranks as built from those rows (built again only when it changes).
        self._ranks: dict[str, list[RankFigures]] = {}
        self._built_now: set[str] = set()  # the kept hosts whose ranks the last read built
        # Per host not answering: since (its last scrape), why (Prometheus's scrape error), its
        # last job_info rows (its node's name).
        self._down: dict[str, tuple[float | None, str, list[dict[str, Any]]]] = {}

    def describe(self) -> str:
        return f"Prometheus {self.url}"

    def _running_job(self) -> str:
        rows = self.query("count by (train_job) (gputop_train_job_running == 1)")
        jobs = sorted(r["metric"].get("train_job", "") for r in rows)
        if len(jobs) == 1:
            return jobs[0]
        if not jobs:
            raise SourceError(f"{self.url}: no gputop-train job is running (give --job NAME)")
        raise SourceError(f"{self.url}: several jobs run ({', '.join(jobs)}): give --job NAME")

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """The vector an instant query returns; SourceError, said, where it fails. POSTed: a
        query naming hundreds of hosts is longer than a URL should be."""
        params = {"query": promql} | ({"time": f"{at:.3f}"} if at is not None else {})
        url = f"{self.url}/api/v1/query"
        form = urllib.parse.urlencode(params).encode()
        try:
            with urllib.request.urlopen(url, form, timeout=QUERY_TIMEOUT_S) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            detail = _error_of(error)
            raise SourceError(f"{self.url}: HTTP {error.code}: {detail}") from None
        except (OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise SourceError(f"{self.url}: not answering ({reason})") from None
        if answer.get("status") != "success":
            raise SourceError(f"{self.url}: {answer.get('error', 'query failed')}")
        return list(answer["data"]["result"])

    def sample(self, at: float | None = None) -> JobSample:
        """The job now (every node read where ``at`` is given: a moment in the past)."""
        when = time.time() if at is None else at
        if at is not None:
            return build_sample(self.job, when, self._ask(queries(self.job), at), self.url)
        answers = self._read_changed()
        down = self._not_answering(answers)
        answers["job_info"] = answers.get("job_info", []) + [
            row for _, _, rows in self._down.values() for row in rows
        ]
        built = [r for ranks in self._ranks.values() for r in ranks]
        sample = build_sample(self.job, when, answers, self.url, down, built)
        if self.last_read is not None:
            for rank in sample.ranks:
                if rank.host in self._built_now:
                    self._ranks.setdefault(rank.host, []).append(rank)
        return sample

    def _not_answering(
        self, answers: dict[str, list[dict[str, Any]]]
    ) -> dict[str, tuple[float | None, str]]:
        """The nodes whose job runs (its last value) but whose series are stale (their scrape
        failed, or they are no target any more): since their last scrape, and why, as
        Prometheus's targets say (asked once a node stops answering)."""
        if self.last_read is None:  # the nodes serve no scrape time: stale ones not told
            return {}
        stale = sorted(
            h
            for row in answers.get("job_running", ())
            if float(row["value"][1]) == 1.0
            and (h := row["metric"].get("host", "")) not in self._kept
        )
        self._down = {h: self._down[h] for h in stale if h in self._down}
        new = [h for h in stale if h not in self._down]
        if new:
            seen = sample_times(self.query, self._running(new), ENDED_LOOKBACK)
            errors = target_errors(self._targets())
            of = f", host=~{_any_of(new)}"
            info = self.query(
                _info("job_info", self.job, "host, node, world_size", of, ENDED_LOOKBACK)
            )
            for host in new:
                instance, times = seen.get(host, ("", [None]))
                why = errors.get(instance, "no longer a scrape target")
                rows = [r for r in info if r["metric"].get("host") == host]
                self._down[host] = (times[-1], why, rows)
        return {h: (since, why) for h, (since, why, _) in self._down.items()}

    def scrape_interval_s(self) -> float | None:
        """How far apart Prometheus scrapes the job's nodes: the spacing of a few nodes' last
        samples (a query frontend without the targets API answers it too); None where no
        node has two samples yet."""
        hosts = sorted({r["metric"].get("host", "") for r in self.query(scraped(self.job))})
        return (
            spacing_s(sample_times(self.query, self._running(hosts[:8]), "5m")) if hosts else None
        )

    def _running(self, hosts: list[str]) -> str:
        """The job's one series a node, of these hosts."""
        return f'{_HOSTS}{{train_job="{self.job}", host=~{_any_of(hosts)}}}'

    def _targets(self) -> list[dict[str, Any]]:
        """Prometheus's active scrape targets; none where it does not say (a query frontend)."""
        try:
            with urllib.request.urlopen(
                f"{self.url}/api/v1/targets?state=active", timeout=QUERY_TIMEOUT_S
            ) as response:
                return list(json.load(response)["data"]["activeTargets"])
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def _ask(self, asked: dict[str, str], at: float | None = None) -> dict[str, list[Any]]:
        return dict(
            zip(asked, self._pool.map(lambda q: self.query(q, at), asked.values()), strict=True)
        )

    def _read_changed(self) -> dict[str, list[dict[str, Any]]]:
        """The answers of every node now: the nodes scraped since the last read read again,
        the others' kept; a node no longer scraped (gone, or its scrape failed) left out, as
        a read of every node leaves it out."""
        stamps = {
            row["metric"].get("host", ""): float(row["value"][1])
            for row in self.query(scraped(self.job))
        }
        if not stamps:  # no node serves its scrape's time: every node read, none kept
            self._kept, self._ranks, self.last_read = {}, {}, None
            return self._ask(queries(self.job))
        changed = sorted(h for h, at in stamps.items() if self._kept.get(h, (None,))[0] != at)
        if len(changed) * 2 > len(stamps):  # most nodes: all read again, no list to match
            changed = sorted(stamps)
            answers = self._ask(queries(self.job))
        else:
            answers = self._ask(queries(self.job, changed)) if changed else {}
        self.last_read = len(changed)
        fresh: dict[str, dict[str, list[dict[str, Any]]]] = {h: {} for h in changed}
        for name in _OF_NODES:
            for row in answers.get(name, ()):
                host = row["metric"].get("host", "")
                if host in fresh:
                    fresh[host].setdefault(name, []).append(row)
        kept = {h: self._kept[h] for h in stamps if h not in fresh and h in self._kept}
        self._kept = kept | {h: (stamps[h], fresh[h]) for h in fresh}
        found = {name: answers.get(name, []) for name in ("job_running", "job_exit_code")}
        if not changed:
            found |= self._ask({n: q for n, q in queries(self.job).items() if n in found})
        # A kept node's ranks were built from the same rows: those of the nodes read again
        # only are built (a 1,000-node job's 8,000 ranks: 0.16-0.4 s a refresh, docs/jobs.md).
        self._ranks = {h: r for h, r in self._ranks.items() if h in kept}
        self._built_now = set(self._kept) - set(self._ranks)
        for name in _OF_NODES:
            hosts = self._built_now if name in _PER_RANK else self._kept
            found[name] = [row for h in hosts for row in self._kept[h][1].get(name, ())]
        return found

    def past(self, window_s: float) -> list[JobSample]:
        """The samples one to four windows back, oldest first (the verdict's three windows at
        once, and the sample before them: where a window's start holds no newer scrape of a
        node than its end, judge.py counts its ranks' steps from an older one); none where
        Prometheus holds nothing then."""
        now = time.time()
        found = []
        for k in (4, 3, 2, 1):
            try:
                sample = self.sample(now - k * window_s)
            except SourceError:
                continue
            if sample.ranks:
                found.append(sample)
        return found

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _error_of(error: urllib.error.HTTPError) -> str:
    try:
        return str(json.load(error).get("error", error.reason))
    except (OSError, ValueError):
        return str(error.reason)


def build_sample(
    job: str,
    at: float,
    answers: dict[str, list[dict[str, Any]]],
    source: str,
    down: dict[str, tuple[float | None, str]] | None = None,
    built: Sequence[RankFigures] = (),
) -> JobSample:
    """The answers of ``queries`` as a JobSample; ``down``: the hosts not answering, since
    when and why; ``built``: ranks built before, of nodes the answers do not hold."""
    by_host = {r["metric"].get("host", ""): r["metric"] for r in answers.get("job_info", ())}
    per_host: dict[str, dict[str, float]] = defaultdict(dict)
    for name in ("job_running", "job_exit_code", "gpu_util"):
        for row in answers.get(name, ()):
            per_host[row["metric"].get("host", "")][name] = float(row["value"][1])
    fields: dict[tuple[str, int], dict[str, Any]] = {}  # by host and PID
    for row in answers.get("rank_info", ()):
        labels = row["metric"]
        fields.setdefault((labels["host"], int(labels["pid"])), {}).update(
            node=labels.get("node", labels["host"]),
            gpu=labels.get("gpu", ""),
            uuid=labels.get("UUID", ""),
            rank=_int(labels.get("rank")),
            local_rank=_int(labels.get("local_rank")),
        )
    # 8,000 ranks x 7 figures a refresh of a 1,000-node job: one dict look-up a row
    for family, (name, scale) in RANK_FIELDS.items():
        connected = name == "connected"
        for row in answers.get(family, ()):
            labels = row["metric"]
            key = (labels.get("host", ""), int(labels["pid"]))
            figures = fields.get(key)
            if figures is None:  # a rank the info series does not tell: its rank from here
                figures = fields[key] = {
                    "rank": _int(labels.get("rank")),
                    "local_rank": _int(labels.get("local_rank")),
                }
            value = float(row["value"][1])
            figures[name] = value == 1.0 if connected else value * scale
    ranks = tuple(
        sorted(
            [
                RankFigures(
                    node=values.pop("node", None) or _node_of(by_host, host),
                    host=host,
                    pid=pid,
                    **values,
                )
                for (host, pid), values in fields.items()
            ]
            + list(built),
            key=lambda r: r.key,
        )
    )
    down = down or {}
    hosts = sorted({r.host for r in ranks} | set(by_host) | set(down))
    nodes = tuple(
        _node(host, by_host.get(host, {}), per_host.get(host, {}), source, down.get(host))
        for host in hosts
    )
    return JobSample(job, at, nodes, ranks)


def _node_of(by_host: dict[str, dict[str, str]], host: str) -> str:
    return by_host.get(host, {}).get("node", host)


def _node(
    host: str,
    info: dict[str, str],
    state: dict[str, float],
    source: str,
    down: tuple[float | None, str] | None,
) -> NodeFigures:
    running = state.get("job_running")
    util = state.get("gpu_util")
    world = info.get("world_size")
    return NodeFigures(
        node=info.get("node", host),
        host=host,
        source=source,
        running=None if running is None else running == 1.0,
        exit_code=state.get("job_exit_code"),
        gpu_util_pct=None if util is None else util * 100.0,
        world_size=int(world) if world else None,
        down_since=down[0] if down else None,
        down_reason=down[1] if down else None,
    )


def _int(text: str | None) -> int | None:
    return int(text) if text else None

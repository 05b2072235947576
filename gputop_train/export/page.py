"""The metrics page, rendered ahead of the scrapes and served as bytes.

The monitor runs niced below the job; building a view at each scrape took up to 2 s under
load (26 of 94 scrapes past Prometheus's 10 s default timeout in one two-node run at load
14-24, issue 45). Here one thread renders the page every ``RENDER_PERIOD_S`` and a scrape
only copies its bytes out, so a scrape's own work is a dictionary look-up and a write.

It also keeps who reads the page: after the job ends, the monitor keeps serving until each
regular scraper has read the page that says so (``ScraperLog``).
"""

from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector

# How old a page may be: the figures are medians over a 10 s window, and the job view reads
# once a second; the render costs a few ms of the monitor's CPU per period
# (git show 6a2d3ea:benchmarks/overhead/exporter_cost.py).
RENDER_PERIOD_S = 1.0
# A client that read the page this many times while the job ran is a scraper whose read of
# the end the monitor waits for (a Prometheus, each of an HA pair, a poller); one read (a
# curl) is not.
REGULAR_READS = 2


@dataclass(frozen=True)
class Page:
    """One render: the collected families, their encodings cached by content type, and
    whether the job had ended when it was rendered."""

    metrics: tuple[Any, ...]
    ended: bool
    rendered_at: float
    encoded: dict[str, bytes] = field(default_factory=dict)


class _Collected(Collector):
    def __init__(self, metrics: Iterable[Any]) -> None:
        self._metrics = tuple(metrics)

    def collect(self) -> Iterator[Any]:
        return iter(self._metrics)


@dataclass
class _Reader:
    reads: int = 0
    read_end: bool = False


class ScraperLog:
    """Who read the page: each client by address and user agent, how often, and whether it
    has read a page rendered after the job ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers: dict[tuple[str, str], _Reader] = {}
        self.last_read = 0.0

    def read(self, client: tuple[str, str], page: Page) -> None:
        with self._lock:
            reader = self._readers.setdefault(client, _Reader())
            reader.reads += 1
            reader.read_end = reader.read_end or page.ended
            self.last_read = time.time()

    def all_read_end(self) -> bool:
        """Every regular scraper has read the end; False while none is known (a lone read
        does not end the wait)."""
        with self._lock:
            regular = [r for r in self._readers.values() if r.reads >= REGULAR_READS]
            return bool(regular) and all(r.read_end for r in regular)


class PageRenderer:
    """Renders ``collector`` every ``period`` seconds on its own thread; ``app`` serves the
    latest render. ``ended()``, read after each collect: whether that collect saw the job
    ended."""

    def __init__(
        self, collector: Collector, ended: Callable[[], bool], period: float = RENDER_PERIOD_S
    ) -> None:
        self._collector = collector
        self._ended = ended
        self._period = period
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._page: Page | None = None
        self._first = threading.Event()
        self.scrapers = ScraperLog()
        self._thread = threading.Thread(
            target=self._run, name="gputop-train-metrics-render", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2.0)

    def render_now(self) -> None:
        """Render at once (the job has just ended: its end should not wait a period)."""
        self._wake.set()

    def render(self) -> Page:
        metrics = tuple(self._collector.collect())
        page = Page(metrics, self._ended(), time.time())  # ended: as of that collect
        for accept in _PRERENDERED:
            body, content_type = _encoded(page, accept)
            _gzipped(page, content_type, body)
        self._page = page
        self._first.set()
        return page

    def latest(self, wait_s: float = 5.0) -> Page:
        """The latest page; before the first render, waits for it (at most ``wait_s``)."""
        if self._page is None:
            self._first.wait(wait_s)
        return self._page if self._page is not None else self.render()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.render()
            except Exception as error:  # the page stays as it was; said, never fatal
                _say_once(f"gputop-train: the metrics page could not be rendered: {error!r}")
            self._wake.wait(self._period)
            self._wake.clear()

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """WSGI: the latest page, in the format and encoding the client accepts."""
        if environ.get("PATH_INFO", "/") == "/favicon.ico":
            start_response("200 OK", [])
            return [b""]
        page = self.latest()
        body, content_type = _encoded(page, environ.get("HTTP_ACCEPT") or "")
        headers = [("Content-Type", content_type)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING") or ""):
            body = _gzipped(page, content_type, body)
            headers.append(("Content-Encoding", "gzip"))
        client = (environ.get("REMOTE_ADDR") or "", environ.get("HTTP_USER_AGENT") or "")
        self.scrapers.read(client, page)
        start_response("200 OK", headers)
        return [body]


# What Prometheus 2.x asks for (OpenMetrics), and a plain client (curl, the job view).
_PRERENDERED = ("application/openmetrics-text; version=1.0.0", "")


def _encoded(page: Page, accept: str) -> tuple[bytes, str]:
    """The page in the format ``accept`` picks, encoded once per page and content type."""
    encoder, content_type = choose_encoder(accept)
    body = page.encoded.get(content_type)
    if body is None:
        body = encoder(_Collected(page.metrics))
        page.encoded[content_type] = body
    return body, content_type


def _gzipped(page: Page, content_type: str, body: bytes) -> bytes:
    """``body`` gzipped, once per page and content type (Prometheus asks for gzip)."""
    key = "gzip " + content_type
    zipped = page.encoded.get(key)
    if zipped is None:
        zipped = gzip.compress(body, compresslevel=6)
        page.encoded[key] = zipped
    return zipped


_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)

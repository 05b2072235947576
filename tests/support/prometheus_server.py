"""A real Prometheus server (Debian's ``prometheus``) for a test: a temporary config and
database, a free port on an address we choose, gone when the test ends."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

PROMETHEUS_MISSING = "no prometheus binary: apt-get install prometheus (.ci/run does)"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


# Prometheus's default scrape timeout. Left out, a job's timeout is the global one, which is
# the global interval where that is shorter (1 s below): a 15 s job scraped 1,000 stand-in
# nodes with a 1 s timeout, and the scrapes that took longer lost their nodes' ranks
# (docs/jobs.md "Scale").
SCRAPE_TIMEOUT_S = 10.0


def static_job(name: str, targets: list[tuple[str, str]], interval_s: float = 1.0) -> str:
    """A scrape config of ``targets`` (address, metrics path), one static group each, each
    its own ``instance`` (stand-in nodes share one address, each at its own path); the scrape
    timeout Prometheus's default, or the interval where that is shorter."""
    groups = "".join(
        f"      - targets: ['{address}']\n"
        f"        labels: {{__metrics_path__: '{path}', instance: '{address}{path}'}}\n"
        for address, path in targets
    )
    return (
        f"  - job_name: {name}\n    scrape_interval: {interval_s:g}s\n"
        f"    scrape_timeout: {min(interval_s, SCRAPE_TIMEOUT_S):g}s\n    static_configs:\n{groups}"
    )


@contextlib.contextmanager
def running_prometheus(
    folder: Path,
    scrape_configs: str,
    rules: Path | None = None,
    host: str = "127.0.0.1",
    scrape_self: bool = False,
    evaluation_s: float = 1.0,
) -> Iterator[str]:
    """Prometheus scraping ``scrape_configs`` (YAML under ``scrape_configs:``), evaluating
    ``rules`` every ``evaluation_s``; yields its URL once it is ready (at most 30 s).
    ``scrape_self``: it scrapes its own metrics too (its head series, its memory)."""
    binary = shutil.which("prometheus")
    assert binary is not None, PROMETHEUS_MISSING
    port = free_port(host)
    if scrape_self:
        scrape_configs += static_job("prometheus", [(f"{host}:{port}", "/metrics")], 5.0)
    config = folder / "prometheus.yml"
    config.write_text(
        f"global: {{scrape_interval: 1s, evaluation_interval: {evaluation_s:g}s}}\n"
        + (f"rule_files: ['{rules}']\n" if rules else "")
        + "scrape_configs:\n"
        + scrape_configs
    )
    server = subprocess.Popen(
        [binary, f"--config.file={config}",
         f"--storage.tsdb.path={folder / 'tsdb'}", f"--web.listen-address={host}:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if _ready(url):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("Prometheus did not become ready in 30 s")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False

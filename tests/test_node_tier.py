"""The exporter's node tier (issue 45): the job's identity from the scheduler or launcher,
the info series that joins dcgm-exporter's, a page served without waiting on the niced
monitor, and a job's end kept readable for every regular scraper."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from gputop_train import events
from gputop_train.export import prometheus
from gputop_train.export.identity import JobIdentity, identify
from gputop_train.export.page import Page, ScraperLog
from gputop_train.views import View, view_of
from tests.support.metrics import TRAIN, exposition, samples
from tests.support.sessions import scripted_session, two_rank_session

REPO = Path(__file__).resolve().parents[1]
PROMTOOL_MISSING = "no promtool: apt-get install prometheus (.ci/run does)"


def node(rank: int) -> list[str]:
    """Node ``rank``'s launch of one two-node torchrun job."""
    return ["torchrun", "--nnodes", "2", "--node-rank", str(rank), "--rdzv-id", "4711", "train.py"]


def test_the_job_is_the_script_with_torchruns_run_id_the_same_on_every_node() -> None:
    names = {identify(node(k), env={}).job for k in (0, 1)}
    assert names == {"train-4711"}
    assert identify(["torchrun", "--rdzv_id=4712", "train.py"], env={}).job == "train-4712"
    inside = identify(["python", "train.py"], env={"TORCHELASTIC_RUN_ID": "r9"})
    assert (inside.job, inside.run_id) == ("train-r9", "r9")


def test_a_slurm_job_names_the_job_and_the_node_by_its_index_in_the_step() -> None:
    env = {"SLURM_JOB_ID": "8123", "SLURM_NODEID": "3"}
    who = identify(["torchrun", "--nproc-per-node", "8", "train.py"], env=env, host="gpu-n3")
    assert (who.job, who.node, who.host, who.hpc_job) == ("train-8123", "3", "gpu-n3", "8123")


def test_a_given_name_wins_and_a_node_without_a_scheduler_is_its_host() -> None:
    who = identify(["python", "demos/resnet.py"], env={}, job="exp7", host="box")
    assert (who.job, who.node, who.host) == ("exp7", "box", "box")
    assert identify(node(1), env={}, host="box").node == "1"  # torchrun's --node-rank
    assert identify(node(1), env={}, node="rack2-a").node == "rack2-a"
    assert identify(["/usr/bin/accelerate", "launch"], env={}).job == "accelerate"


def test_a_kubernetes_pod_and_namespace_are_read_from_the_downward_api() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "llm-worker-3"}
    who = identify(["python", "train.py"], env={**env, "POD_NAMESPACE": "team-a"})
    assert (who.pod, who.namespace) == ("llm-worker-3", "team-a")
    assert identify(["python", "train.py"], env={"HOSTNAME": "x"}).pod is None  # not a pod


def test_each_rank_has_one_info_series_with_its_job_node_host_and_gpu() -> None:
    session = two_rank_session()  # rank 0 on GPU 0, rank 1 on GPU 1 (NVML's processes)
    session.apply(events.GpusFound(("H100", "H100"), uuids=("GPU-aaa", "GPU-bbb")))
    who = JobIdentity("train-4711", "1", "gpu-node-1", hpc_job="8123", run_id="4711")
    text = exposition(session, who)
    info = [dict(k) for k in samples(text, "gputop_train_rank_info")]
    assert {(i["rank"], i["node"], i["host"], i["gpu"], i["UUID"]) for i in info} == {
        ("0", "1", "gpu-node-1", "0", "GPU-aaa"),
        ("1", "1", "gpu-node-1", "1", "GPU-bbb"),
    }
    assert {i["job"] for i in info} == {"train-4711"}
    assert {i["Hostname"] for i in info} == {"gpu-node-1"}  # dcgm-exporter's spelling
    job = [dict(k) for k in samples(text, "gputop_train_job_info")]
    assert [(j["job"], j["hpc_job"], j["run_id"], j["node"]) for j in job] == [
        ("train-4711", "8123", "4711", "1")
    ]


def test_no_series_but_the_info_series_carries_the_slurm_job_or_the_node() -> None:
    who = JobIdentity("train-8123", "3", "gpu-n3", hpc_job="8123")
    text = exposition(scripted_session(with_gpu=True), who)
    for line in text.splitlines():
        if line.startswith("gputop_train_") and "_info{" not in line:
            assert "8123" not in line.split("}")[0].replace("train-8123", "")
            assert 'node="' not in line and "hpc_job" not in line


def test_a_rank_series_keeps_its_gpu_and_uuid_beside_the_info_series() -> None:
    session = two_rank_session()
    session.apply(events.GpusFound(("H100", "H100"), uuids=("GPU-aaa", "GPU-bbb")))
    steps = [dict(k) for k in samples(exposition(session), "gputop_train_step_seconds")]
    assert {(s["rank"], s["gpu"], s["UUID"]) for s in steps} == {
        ("0", "0", "GPU-aaa"),
        ("1", "1", "GPU-bbb"),
    }


def _get(url: str, accept: str = "") -> tuple[float, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read().decode()
    return time.monotonic() - started, body


def test_a_scrape_is_answered_from_the_rendered_page_while_a_render_is_slow() -> None:
    session = two_rank_session()
    slow = threading.Event()

    def view() -> View:
        if slow.is_set():
            time.sleep(3.0)  # a niced monitor under load (issue 45: up to 2 s, and worse)
        return view_of(session.snapshot(window_s=30.0))

    exporter = prometheus.serve("127.0.0.1:0", view, TRAIN)
    try:
        _, first = _get(exporter.url)  # the first render, before the slow ones
        slow.set()
        time.sleep(1.5)  # the renderer is now inside a slow render
        took, body = _get(exporter.url)
        prometheus_took, om = _get(exporter.url, "application/openmetrics-text;version=1.0.0")
    finally:
        slow.clear()
        exporter.close()
    assert took < 1.0 and prometheus_took < 1.0, (took, prometheus_took)
    assert "gputop_train_step_seconds{" in body and body == first
    assert om.rstrip().endswith("# EOF")


def _page(ended: bool) -> Page:
    return Page((), ended, time.time())


def test_the_end_is_kept_until_every_regular_scraper_has_read_it() -> None:
    log = ScraperLog()
    prometheus_a, prometheus_b, curl = ("10.0.0.1", "Prometheus/2.42"), ("10.0.0.2", ""), ("x", "")
    for _ in range(3):
        log.read(prometheus_a, _page(False))
        log.read(prometheus_b, _page(False))
    log.read(curl, _page(False))
    assert not log.all_read_end()
    log.read(prometheus_a, _page(True))
    log.read(curl, _page(True))  # any other read (issue 45: it ended the wait)
    assert not log.all_read_end()  # the second server of the HA pair has not read it
    log.read(prometheus_b, _page(True))
    assert log.all_read_end()


def test_with_no_regular_scraper_the_end_waits_its_stated_time() -> None:
    log = ScraperLog()
    log.read(("127.0.0.1", "curl/8"), _page(True))  # one read is not a scraper
    assert not log.all_read_end()


@pytest.mark.skipif(shutil.which("promtool") is None, reason=PROMTOOL_MISSING)
def test_the_info_series_joins_dcgm_exporters_series_in_promql() -> None:
    result = subprocess.run(
        ["promtool", "test", "rules", "tests/prometheus/dcgm_join_test.yml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr

"""The Prometheus endpoint: its metrics, its address handling, the shipped dashboard and
rules, and a real Prometheus server scraping a torchrun job's ranks."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gputop_train import events
from gputop_train.export import prometheus
from gputop_train.export.prometheus import ExporterError, parse_address
from gputop_train.views import view_of
from tests.support.cli import gputop
from tests.support.metrics import TRAIN, exposition, samples
from tests.support.sessions import scripted_session, two_rank_session
from tests.support.torchrun import TORCHRUN

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "tests" / "scenarios" / "loops.py"
DOCS = REPO / "docs"
PROMETHEUS_MISSING = "no prometheus binary: apt-get install prometheus (.ci/run does)"


def exported_names() -> set[str]:
    """Every series name the exporter can produce (counters with their ``_total``)."""
    names = set()
    for line in exposition(scripted_session()).splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(
                name + "_total" if kind == "counter" and not name.endswith("_total") else name
            )
    return names


def test_each_rank_series_carries_its_gpu_index_and_uuid_to_join_dcgm_exporter() -> None:
    session = two_rank_session()  # rank 0's process on GPU 0, rank 1's on GPU 1 (NVML)
    session.apply(events.GpusFound(("H100", "H100"), uuids=("GPU-aaa", "GPU-bbb")))
    text = exposition(session)
    for family in ("gputop_train_step_seconds", "gputop_train_rank_connected"):
        on_gpu = {(d["rank"], d["gpu"], d["UUID"]) for d in map(dict, samples(text, family))}
        assert on_gpu == {("0", "0", "GPU-aaa"), ("1", "1", "GPU-bbb")}
    # The GPU series carry the same UUID: ``on (UUID)`` joins a rank to its GPU's clocks.
    gpus = {dict(k)["UUID"] for k in samples(text, "gputop_train_gpu_memory_total_bytes")}
    assert gpus <= {"GPU-aaa", "GPU-bbb"}


def test_each_rank_is_a_series_with_units_as_prometheus_names_them() -> None:
    text = exposition(two_rank_session())
    waits = samples(text, "gputop_train_data_wait_ratio")
    by_rank = {dict(labels)["rank"]: value for labels, value in waits.items()}
    assert by_rank == {"0": pytest.approx(0.02), "1": pytest.approx(0.6)}  # ratios, not %
    labels = dict(next(iter(waits)))
    assert set(labels) == {"host", "train_job", "rank", "local_rank", "pid", "gpu", "UUID"}
    assert labels["train_job"] == "train" and labels["host"] == socket.gethostname()
    steps = samples(text, "gputop_train_step_seconds")
    assert sorted(steps.values()) == [pytest.approx(0.05)] * 2  # 50 ms, in seconds
    assert sorted(samples(text, "gputop_train_samples_total").values()) == [480.0, 480.0]
    # The straggler finding, as a labelled gauge: the headline marked.
    findings = samples(text, "gputop_train_finding")
    assert {dict(k)["finding"]: dict(k)["headline"] for k in findings} == {"ranks.straggler": "1"}
    assert [dict(k)["rank"] for k in findings] == ["1"]  # the rank it names, for an alert


def test_not_measured_is_no_sample_never_a_zero() -> None:
    text = exposition(two_rank_session())  # no GPU time measured, no GPU at all
    assert "# TYPE gputop_train_gpu_time_ratio gauge" in text
    assert samples(text, "gputop_train_gpu_time_ratio") == {}
    assert samples(text, "gputop_train_gpu_utilization_ratio") == {}


def test_each_gpu_is_a_series_from_nvml() -> None:
    text = exposition(scripted_session(with_gpu=True))
    util = samples(text, "gputop_train_gpu_utilization_ratio")
    assert util and all(0.0 <= v <= 1.0 for v in util.values())
    assert {dict(k)["gpu"] for k in util} == {"0"}
    assert samples(text, "gputop_train_gpu_memory_total_bytes")


def test_gpu_series_carry_dcgm_exporters_uuid_and_bus_id_to_join_on() -> None:
    from gputop_train import events
    from gputop_train.collect.fake import FakeGpu, FakeNvml
    from gputop_train.collect.nvml import GpuSampling
    from gputop_train.session.model import Session

    uuid = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
    session = Session(command=("python", "train.py"))
    sampling = GpuSampling(FakeNvml([FakeGpu(uuid=uuid, util=50), FakeGpu(util=40)]))
    sampling.open(session)
    session.apply(events.GpuSampled(sampling.sampler.sample()))
    util = samples(exposition(session), "gputop_train_gpu_utilization_ratio")
    by_gpu = {dict(k)["gpu"]: dict(k) for k in util}
    assert by_gpu["0"]["UUID"] == uuid and by_gpu["0"]["pci_bus_id"] == "00000000:18:00.0"
    assert by_gpu["1"]["UUID"].startswith("GPU-") and by_gpu["1"]["pci_bus_id"].endswith(":00.0")


@pytest.mark.parametrize(
    ("text", "address"),
    [("9400", ("127.0.0.1", 9400)), ("0.0.0.0:9400", ("0.0.0.0", 9400)), ("[::1]:0", ("::1", 0))],
)
def test_address_is_bound_to_localhost_unless_told(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["http", "host:port", "70000", ""])
def test_a_bad_address_says_what_is_expected(text: str) -> None:
    with pytest.raises(ExporterError, match=r"\[HOST:\]PORT|0 to 65535"):
        parse_address(text)


def test_a_port_in_use_is_said_in_one_line_and_the_job_still_runs(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    try:
        result = gputop("--headless", "--prometheus", str(port), str(script))
    finally:
        taken.close()
    assert result.returncode == 0  # the training job comes first (issue 30)
    assert f"cannot serve Prometheus metrics on 127.0.0.1:{port}" in result.stderr
    assert "the job runs without the metrics endpoint" in result.stderr
    assert "Traceback" not in result.stderr and marker.exists()


def test_the_endpoint_speaks_openmetrics_when_asked() -> None:
    session = two_rank_session()
    exporter = prometheus.serve("127.0.0.1:0", lambda: view_of(session.snapshot()), TRAIN)
    try:
        request = urllib.request.Request(
            exporter.url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            body = response.read().decode()
    finally:
        exporter.close()
    assert body.rstrip().endswith("# EOF")
    assert "gputop_train_steps_total{" in body


def test_the_dashboard_and_the_rules_use_only_metrics_that_exist() -> None:
    names = exported_names()
    rules_text = (DOCS / "prometheus" / "rules.yml").read_text()
    recorded = set(re.findall(r"record: (\S+)", rules_text))
    dashboard = json.loads((DOCS / "grafana" / "gputop-train.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    text = " ".join(exprs) + rules_text
    rule_names = set(re.findall(r"\b[a-z_]+:gputop_train_\w+:\w+", text))
    raw = re.sub(r"\b[a-z_]+:gputop_train_\w+:\w+", " ", text)  # recorded names apart
    assert set(re.findall(r"\bgputop_train_\w+", raw)) <= names
    assert rule_names <= recorded
    documented = (DOCS / "prometheus.md").read_text()
    assert {n for n in names if f"`{n}`" not in documented} == set()  # every metric listed


def test_promtool_accepts_the_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(PROMETHEUS_MISSING)
    result = subprocess.run(
        [promtool, "check", "rules", str(DOCS / "prometheus" / "rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(port: int, path: str) -> dict[str, Any]:
    """The ``data`` of a Prometheus HTTP API answer; empty while the server is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return dict(json.load(response)["data"])
    except OSError:
        return {"result": [], "alerts": []}


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    return list(_get(port, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))["result"])


def _node_monitor(exporter_port: int, rendezvous_port: int, run_id: str) -> subprocess.Popen:
    """One "node" of a two-node torchrun job on loopback, under its own monitor, as the docs
    run one monitor per node: one rank per node, rank 1 slowed in its input."""
    return subprocess.Popen(
        [
            sys.executable, "-m", "gputop_train", "--headless", "--format", "json",
            "--no-record", "--prometheus", str(exporter_port),
            "--",
            *TORCHRUN, "--nnodes", "2",
            "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{rendezvous_port}", "--rdzv-id", run_id,
            str(SCENARIOS), "ddp", "batch=8", "steps=100000", "step_ms=20",
            "slow_rank=1", "slow_data_ms=30",
        ],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_real_prometheus_joins_a_two_node_jobs_ranks_and_names_its_straggler(
    tmp_path: Path,
) -> None:
    pytest.importorskip("torch")
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(PROMETHEUS_MISSING)
    exporters, prometheus_port = [_free_port(), _free_port()], _free_port()
    targets = ", ".join(f"'127.0.0.1:{port}'" for port in exporters)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{DOCS / 'prometheus' / 'rules.yml'}']\n"
        "scrape_configs:\n"
        "  - job_name: gputop-train\n"
        f"    static_configs: [{{targets: [{targets}]}}]\n"
    )
    rendezvous = _free_port()
    monitors = [_node_monitor(port, rendezvous, "4711") for port in exporters]
    server = subprocess.Popen(
        [
            binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # Rank 1 sleeps 30 ms for each batch beside 20 ms of step: 0.58 planned, 0.19-0.35
        # read on a 2-core box busy with other tests, 0.14 beside a CPU hog as well (the
        # step's compute stretches, the sleep does not); 0.066 once, at the first scrape that
        # had both ranks (dev box running four torchrun test files at once, 2026-11-27), when
        # the window may still hold the ranks' start: so the test reads until the figures
        # hold, for up to 150 s. Rank 0 waits on the all-reduce, never on data.
        deadline, ranks, wait = time.monotonic() + 150, dict[str, Any](), dict[str, Any]()
        while time.monotonic() < deadline and not (
            len(wait) == 2 and wait["1"] > 0.08 > 0.05 > wait["0"]
        ):
            time.sleep(1.0)
            series = _query(prometheus_port, 'gputop_train_data_wait_ratio{job="gputop-train"}')
            ranks = {s["metric"]["rank"]: s for s in series}
            wait = {rank: float(r["value"][1]) for rank, r in ranks.items()}
        assert set(ranks) == {"0", "1"}, "Prometheus never had both ranks"
        # Two "nodes": each rank comes from its own monitor's endpoint, under one job name
        # (torchrun's --rdzv-id after the script's name).
        assert {r["metric"]["instance"] for r in ranks.values()} == {
            f"127.0.0.1:{port}" for port in exporters
        }
        assert {r["metric"]["train_job"] for r in ranks.values()} == {"loops-4711"}
        assert wait["1"] > 0.08 > 0.05 > wait["0"]
        steps = _query(prometheus_port, "gputop_train_step_seconds")
        assert all(0.03 < float(s["value"][1]) < 0.5 for s in steps)
        # The shipped alert rule, comparing each rank with the job's other ranks across both
        # endpoints, picks out rank 1 alone (pending: it fires after a minute). Rank 0 was
        # pending beside it once (the loaded 2-core box, 2026-11-25), most likely from its
        # first steps, which wait for rank 1 to join, in a median over a few scrapes; the
        # rule's "for: 1m" keeps a pending that short from firing, and the test waits for the
        # window to hold the steady steps.
        deadline, alerts = time.monotonic() + 90, list[dict[str, Any]]()
        while time.monotonic() < deadline and [a["rank"] for a in alerts] != ["1"]:
            time.sleep(1.0)
            alerts = [
                a["labels"]
                for a in _get(prometheus_port, "/api/v1/alerts")["alerts"]
                if a["labels"]["alertname"] == "GputopTrainStraggler"
            ]
        assert [a["rank"] for a in alerts] == ["1"]
        assert {a["train_job"] for a in alerts} == {"loops-4711"}
    finally:
        server.terminate()
        # SIGTERM, as a scheduler stops it: passed on to torchrun, SIGKILL after its 30 s
        # grace, so the end is bounded whatever torchrun's ranks do on a loaded box.
        for monitor in monitors:
            monitor.send_signal(signal.SIGTERM)
        errors = [monitor.communicate(timeout=90)[1] for monitor in monitors]
        server.wait(timeout=30)
    for port, stderr in zip(exporters, errors, strict=True):
        assert f"Prometheus metrics at http://127.0.0.1:{port}/metrics" in stderr


def test_the_dashboards_job_state_panel_maps_the_state_query_alone() -> None:
    """Its value labels (0 running ... 3 hung) read one query: mapped onto the exit status too,
    exit 0 read "running" (issue 45)."""
    dashboard = json.loads((DOCS / "grafana" / "gputop-train.json").read_text())
    mapped = [
        p
        for p in dashboard["panels"]
        if p.get("fieldConfig", {}).get("defaults", {}).get("mappings")
    ]
    assert [[t["expr"].split("{")[0] for t in p["targets"]] for p in mapped] == [
        ["host_train_job:gputop_train_job_running:state"]
    ]

"""The Prometheus endpoint under a flood of idle connections, out of file descriptors, bound
to every interface, and over TLS (issue 31 points 1 and 8)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from gputop_train.export import http_server, prometheus
from gputop_train.export.http_server import MAX_CONNECTIONS, start_server
from gputop_train.session.model import Session
from gputop_train.views import view_of
from tests.support.metrics import TRAIN
from tests.support.waiting import wait_until


def _app(environ: object, start_response: object) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]


def _thread_cpu_s(native_id: int) -> float:
    for thread in psutil.Process().threads():
        if thread.id == native_id:
            return thread.user_time + thread.system_time
    return 0.0


def test_idle_connections_take_at_most_the_cap_and_cost_no_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_server, "CONNECTION_DEADLINE_S", 1.0)
    monkeypatch.setattr(http_server._QuietHandler, "timeout", 1.0)
    server, thread = start_server("127.0.0.1", 0, _app)
    port = server.server_address[1]
    fds_before = psutil.Process().num_fds()
    attackers = []
    try:
        for _ in range(300):
            attacker = socket.socket()
            attacker.setblocking(False)
            attacker.connect_ex(("127.0.0.1", port))
            attackers.append(attacker)
        time.sleep(0.5)
        cpu_before = _thread_cpu_s(thread.native_id)  # type: ignore[arg-type]
        time.sleep(2.0)
        cpu = _thread_cpu_s(thread.native_id) - cpu_before  # type: ignore[arg-type]
        assert server.open_connections <= MAX_CONNECTIONS
        # Ours: the attackers' 300 ends, plus at most the cap's server ends (and a few).
        assert psutil.Process().num_fds() - fds_before <= 300 + MAX_CONNECTIONS + 4
        assert cpu < 0.4, f"the accept loop spun: {cpu:.2f} s of CPU in 2 s"
        assert server.refused > 0
    finally:
        for attacker in attackers:
            attacker.close()
    wait_until(lambda: not server.open_connections, 15, what="the attackers' connections closed")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
        assert response.read() == b"ok\n"
    server.shutdown()
    server.server_close()


def test_a_connection_past_its_deadline_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "CONNECTION_DEADLINE_S", 0.5)
    server, _ = start_server("127.0.0.1", 0, _app)
    host, port = server.server_address[:2]
    trickler = socket.create_connection((str(host), port))
    try:
        trickler.settimeout(10)
        trickler.sendall(b"GET / HTTP/1.1\r\n")  # a request that never ends
        started = time.monotonic()
        assert trickler.recv(100) == b""  # closed by the server, not by the test's timeout
        assert time.monotonic() - started < 5
    finally:
        trickler.close()
        server.shutdown()
        server.server_close()


OUT_OF_FDS = """
import resource, socket, sys, time, os
from gputop_train.export.http_server import start_server
app = lambda environ, start: (start("200 OK", []), [b"ok"])[1]
server, thread = start_server("127.0.0.1", 0, app)
print(server.server_address[1], thread.native_id, flush=True)
open_now = len(os.listdir("/proc/self/fd"))
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 3, hard))
sys.stdin.readline()
print(server.accept_failures, flush=True)
"""


def test_out_of_file_descriptors_the_accept_loop_backs_off(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", OUT_OF_FDS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    attackers = []
    try:
        port, native_id = map(int, child.stdout.readline().split())
        for _ in range(40):
            attacker = socket.socket()
            attacker.setblocking(False)
            attacker.connect_ex(("127.0.0.1", port))
            attackers.append(attacker)
        time.sleep(0.5)
        server_thread = next(t for t in psutil.Process(child.pid).threads() if t.id == native_id)
        before = server_thread.user_time + server_thread.system_time
        time.sleep(2.0)
        server_thread = next(t for t in psutil.Process(child.pid).threads() if t.id == native_id)
        cpu = server_thread.user_time + server_thread.system_time - before
        child.stdin.write("\n")
        child.stdin.flush()
        failures = int(child.stdout.readline())
        assert failures > 0  # it did run out of descriptors ...
        assert cpu < 0.4, f"... and spun: {cpu:.2f} s of CPU in 2 s"  # ... without spinning
    finally:
        for attacker in attackers:
            attacker.close()
        child.kill()
        child.wait()


def test_every_interface_is_warned_about_and_named_by_the_hosts_name() -> None:
    session = Session(command=("train.py",))
    exporter = prometheus.serve("0.0.0.0:0", lambda: view_of(session.snapshot()), TRAIN)
    try:
        assert exporter.warning is not None and "every interface" in exporter.warning
        assert "0.0.0.0" not in exporter.url and socket.getfqdn() in exporter.url
    finally:
        exporter.close()
    local = prometheus.serve("127.0.0.1:0", lambda: view_of(session.snapshot()), TRAIN)
    local.close()
    assert local.warning is None and local.url.startswith("http://127.0.0.1:")


@pytest.mark.skipif(not os.path.exists("/usr/bin/openssl"), reason="needs openssl")
def test_with_a_client_ca_only_a_scraper_with_a_certificate_reads_the_metrics(
    tmp_path: Path,
) -> None:
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp_path)

    subject = "/CN=localhost"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", subject,
            "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", "server.key", "-out", "server.pem")  # fmt: skip
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=ca",
            "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=scraper",
            "-keyout", "client.key", "-out", "client.csr")  # fmt: skip
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-out", "client.pem")  # fmt: skip
    session = Session(command=("train.py",))
    tls = prometheus.Tls(str(tmp_path / "server.pem"), str(tmp_path / "server.key"),
                         str(tmp_path / "ca.pem"))  # fmt: skip
    exporter = prometheus.serve("127.0.0.1:0", lambda: view_of(session.snapshot()), TRAIN, tls)
    try:
        assert exporter.url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(tmp_path / "server.pem"))
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            urllib.request.urlopen(exporter.url, context=context, timeout=5).read()
        context.load_cert_chain(str(tmp_path / "client.pem"), str(tmp_path / "client.key"))
        with urllib.request.urlopen(exporter.url, context=context, timeout=5) as response:
            assert b"gputop_train_" in response.read()
    finally:
        exporter.close()


@pytest.mark.skipif(not os.path.exists("/usr/bin/openssl"), reason="needs openssl")
def test_plain_http_to_the_tls_endpoint_is_one_line_each_time_not_a_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.pem"],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    context = http_server.tls_context(str(tmp_path / "server.pem"), str(tmp_path / "server.key"))
    server, thread = start_server("127.0.0.1", 0, _app, context)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        for attempt in range(1, 3):
            with pytest.raises(OSError):  # the server hangs up on a request that is not TLS
                urllib.request.urlopen(url, timeout=5).read()
            deadline = time.monotonic() + 10
            while server.connection_errors < attempt and time.monotonic() < deadline:
                time.sleep(0.05)
        err = capfd.readouterr().err
        lines = [line for line in err.splitlines() if line]
        assert len(lines) == 2, err
        assert all(
            line.startswith(
                "gputop-train: Prometheus endpoint: TLS handshake failed from 127.0.0.1"
            )
            for line in lines
        ), err
        assert "Traceback" not in err
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=2.0)

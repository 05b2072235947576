"""The exporter's HTTP server, bounded: no client of the endpoint can cost the job.

prometheus_client's own server starts a thread per connection with no limit and no timeout:
a local user who opened idle connections until the monitor ran out of file descriptors left
its accept loop spinning on EMFILE (55% of a core), scrapes timing out and the job at
0.45-0.5x (issue 31, 2026-11-24). Here connections are capped, each has a deadline, a
failing accept backs off, and a TLS handshake runs in the connection's own thread (done in
``accept`` it would let one silent client stall the server).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

# Prometheus opens one connection per scrape; 16 leave room for people with curl beside it.
MAX_CONNECTIONS = 16
# A scrape is answered in milliseconds (1.8 ms of CPU: git show
# 6a2d3ea:benchmarks/overhead/exporter_cost.py); 10 s is Prometheus's default scrape_timeout.
# A client still connected after it is cut off.
CONNECTION_DEADLINE_S = 10.0
# A scraper sends its request as soon as it connects: a read that waits longer is an idle
# client, and its slot goes to the next one.
READ_TIMEOUT_S = 2.0
# Out of file descriptors, or at the cap: wait this long before the next accept, not spin.
ACCEPT_BACKOFF_S = 0.2
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class _QuietHandler(WSGIRequestHandler):
    """No access log on the monitor's terminal; each read times out; TLS handshakes here."""

    timeout = READ_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:
        return


class BoundedServer(ThreadingMixIn, WSGIServer):
    """A threading WSGI server with at most ``MAX_CONNECTIONS`` open, each cut off after
    ``CONNECTION_DEADLINE_S``; counts what it refused (``refused``, ``accept_failures``)."""

    daemon_threads = True
    block_on_close = False
    # Connections past the cap wait in the kernel's queue, which costs us no descriptor.
    request_queue_size = 128
    tls: ssl.SSLContext | None = None

    def server_bind(self) -> None:
        self._open: dict[socket.socket, float] = {}
        self._open_lock = threading.Lock()
        self.refused = 0
        self.accept_failures = 0
        self.connection_errors = 0  # connections that failed (a TLS handshake), said in a line
        super().server_bind()

    def get_request(self) -> tuple[socket.socket, Any]:
        with self._open_lock:
            full = len(self._open) >= MAX_CONNECTIONS
        if full:  # the rest wait in the kernel's queue, holding none of our descriptors
            self.refused += 1
            time.sleep(ACCEPT_BACKOFF_S)
            raise OSError(errno.EAGAIN, "at the connection cap")
        try:
            connection, address = self.socket.accept()
        except OSError as error:
            if error.errno in _OUT_OF_RESOURCES:
                self.accept_failures += 1
                time.sleep(ACCEPT_BACKOFF_S)
            raise
        if self.tls is not None:
            connection = self.tls.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed (plain HTTP to the TLS endpoint, a client that hung up):
        one line on stderr, not socketserver's traceback; our own bugs keep theirs."""
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):  # ssl.SSLError and ConnectionError are OSErrors
            super().handle_error(request, client_address)
            return
        self.connection_errors += 1
        host = client_address[0] if isinstance(client_address, tuple) else client_address
        what = "TLS handshake failed" if isinstance(error, ssl.SSLError) else "connection failed"
        reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or error
        line = f"gputop-train: Prometheus endpoint: {what} from {host}: {reason}"
        with contextlib.suppress(OSError, ValueError):  # no terminal to say it on
            print(line, file=sys.stderr, flush=True)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open[request] = time.monotonic()
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Between accepts (at least every half second): cut off connections past their
        deadline; their threads then end on a failed read."""
        cutoff = time.monotonic() - CONNECTION_DEADLINE_S
        with self._open_lock:
            late = [conn for conn, opened in self._open.items() if opened < cutoff]
        for connection in late:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue

    @property
    def open_connections(self) -> int:
        with self._open_lock:
            return len(self._open)


def start_server(
    host: str, port: int, app: Callable[..., Any], tls: ssl.SSLContext | None = None
) -> tuple[BoundedServer, threading.Thread]:
    """Serve ``app`` on host:port (IPv4 or IPv6, as the host is) from a daemon thread."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    server_class = type("Server", (BoundedServer,), {"address_family": family[0][0], "tls": tls})
    server: BoundedServer = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    thread = threading.Thread(
        target=server.serve_forever, name="gputop-train-prometheus", daemon=True
    )
    thread.start()
    return server, thread


def tls_context(certfile: str, keyfile: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A server-side TLS context; with ``client_ca``, only clients holding a certificate it
    signed may scrape (mutual TLS: what keeps other local users out)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    if client_ca:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context

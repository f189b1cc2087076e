"""The Prometheus endpoint: `GET /metrics` over HTTP, served by a thread of the main process.

Off unless `metrics.listen` is set (a bare port listens on 127.0.0.1 only). The
socket is bound at start-up with the broker's listeners, so a port in use stops
the broker with one line, as a listener's would. Each scrape runs on the server
thread holding the topic lock (`acceptor/control.py`): it opens partitions and reads
the ZooKeeper states while no topic is being made or changed, and the supervisor
never forks in the middle of it; the control thread queues its topic work meanwhile
but goes on answering group requests (a scrape of thousands of partitions takes a
while). Forked children close the socket (`Supervisor._fork`). Any other path
answers 404.
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from mmlog.metrics.exposition import CONTENT_TYPE, render
from mmlog.metrics.families import collect

log = logging.getLogger("mmlog.broker")


class MetricsSources:
    """What a scrape reads in the main process: the shared block, the wake board and the control plane."""

    def __init__(self, block, board, control) -> None:
        self.block = block
        self.board = board
        self.control = control

    @property
    def manager(self):
        return self.control.manager

    @property
    def coordinator(self):
        return self.control.coordinator

    def is_controller(self) -> bool:
        # A ZooKeeper store knows whether it won /controller; the embedded store is the whole cluster.
        return bool(self.control.store.is_controller)

    def offline_partitions(self) -> int:
        store = self.control.store
        states = store.states  # None: a broker alone, whose catalogue knows its offline partitions
        if states is not None:
            if not store.is_controller:
                return 0
            return sum(1 for t in states.topics() for s in states.of_topic(t) if s is not None and s.leader < 0)
        manager = self.manager
        return sum(1 for t, p in manager.hosted() if manager.is_offline(t, p))

    def isr_changes(self) -> tuple[int, int]:
        replicas = self.control.store.replicas
        return (replicas.isr_shrinks, replicas.isr_expands) if replicas is not None else (0, 0)


class MetricsServer:
    """An HTTP server on its own thread; `scrape()` is what it answers."""

    def __init__(self, address: tuple[str, int], sources: MetricsSources, lock) -> None:
        self.sources = sources
        self.lock = lock
        server_class = _IPv6Server if ":" in address[0] else HTTPServer
        self.httpd = server_class(address, _handler(self))
        self.address = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def socket(self) -> socket.socket:
        return self.httpd.socket

    def scrape(self) -> bytes:
        with self.lock:
            return render(collect(self.sources))

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.5},
                                        name="metrics", daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()


class _IPv6Server(HTTPServer):
    address_family = socket.AF_INET6


def _handler(server: MetricsServer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?", 1)[0] != "/metrics":
                self._send(404, b"not found: try /metrics\n", "text/plain")
                return
            try:
                body = server.scrape()
            except Exception:  # noqa: BLE001 - a scrape that fails answers 500, the broker goes on
                log.exception("metrics scrape failed")
                self._send(500, b"scrape failed (see the broker log)\n", "text/plain")
                return
            self._send(200, body, CONTENT_TYPE)

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass  # a scrape every few seconds is not worth a log line

    return Handler

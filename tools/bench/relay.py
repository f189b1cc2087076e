"""The host's floor for end-to-end latency: a relay that passes a producer's bytes to its stream's consumer.

    python -m tools.bench.relay PORT        # the server (tools/bench_peers.py starts it as RelayServer)

No log, no acknowledgement, no parsing: one Python process on epoll that writes whatever a producer's
socket delivers to the socket of the consumer of the same stream (or keeps it until that consumer
connects). Its clients are plain blocking sockets in Python, a process each, paced and stamped as the
other systems' latency clients are (tools/bench/latency.py). What it measures is what three processes
handing 200 bytes along over loopback cost on this host at this minute: no broker's end-to-end latency,
with any clients, can sit far below it, so a ratio asked of a peer is read against it.

A client's first bytes name its role and stream: `P <stream>\\n` or `C <stream>\\n`.
"""

from __future__ import annotations

import selectors
import socket
import struct
import sys
import time
from pathlib import Path

import numpy as np

from tools.bench.common import MESSAGE_SIZE, free_port, payload
from tools.bench.servers import ChildServer, wait_port

ROOT = Path(__file__).resolve().parents[2]


class Stream:
    """One stream's consumer socket, and what its producers sent before that consumer came."""

    def __init__(self) -> None:
        self.consumer: socket.socket | None = None
        self.pending = bytearray()
        self.gone = False  # its consumer went away: what follows for this stream is dropped

    def deliver(self, data) -> None:
        if self.gone:
            return
        if self.consumer is None:
            self.pending += data
            return
        try:
            self.consumer.sendall(data)  # 200 bytes a message: the consumer's socket buffer takes them
        except OSError:
            self.consumer.close()
            self.gone = True

    def attach(self, consumer: socket.socket) -> None:
        self.consumer = consumer
        consumer.sendall(self.pending)
        self.pending = bytearray()


def serve(port: int) -> None:
    """The relay's loop: accept, read each client's hello, then pass producers' bytes to their streams."""
    listener = socket.create_server(("127.0.0.1", port))
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    streams: dict[str, Stream] = {}
    hellos: dict[socket.socket, bytearray] = {}  # clients whose hello line is not complete yet
    while True:
        for key, _ in sel.select():
            sock = key.fileobj
            if sock is listener:
                conn, _ = listener.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                hellos[conn] = bytearray()
                sel.register(conn, selectors.EVENT_READ, None)
                continue
            data = sock.recv(1 << 16)
            if not data:
                sel.unregister(sock)
                hellos.pop(sock, None)
                sock.close()
            elif sock in hellos:
                _hello(sel, sock, hellos, streams, data)
            else:
                key.data.deliver(data)


def _hello(sel, sock, hellos, streams, data) -> None:
    """Take `data` into the client's hello; once it is whole, make the client a producer or a consumer."""
    line = hellos[sock]
    line += data
    if b"\n" not in line:
        return
    head, rest = bytes(line).split(b"\n", 1)
    del hellos[sock]
    role, name = head.decode().split(" ", 1)
    stream = streams.setdefault(name, Stream())
    if role == "C":
        sel.unregister(sock)  # a consumer only receives
        stream.attach(sock)
    else:
        sel.modify(sock, selectors.EVENT_READ, stream)
        if rest:
            stream.deliver(rest)


class RelayServer(ChildServer):
    """The relay (`python -m tools.bench.relay PORT`), on 127.0.0.1:port."""

    name = "relay"

    def start(self) -> "RelayServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc = self._spawn([sys.executable, "-m", "tools.bench.relay", str(self.port)], self.dir / "relay.log",
                                cwd=ROOT)
        wait_port(self.port, self.proc, 30, "the relay", self.dir / "relay.log")
        return self


def _connect(address, role: str, stream: str) -> socket.socket:
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(f"{role} {stream}\n".encode())
    return sock


def latency_producer(address, stream: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` stamped messages at `rate` a second, the due ones in one send a tick."""
    from tools.bench.latency import paced

    pad = payload(MESSAGE_SIZE - 8)
    stamp, now = struct.Struct("<q").pack, time.monotonic_ns
    with _connect(address, "P", stream) as sock:
        sock.sendall(bytes(8) + pad)
        created.set()
        go.wait()
        achieved = paced(lambda n: sock.sendall(b"".join(stamp(now()) + pad for _ in range(n))), rate, count)
        return {"achieved": achieved}


def latency_consumer(address, stream: str, count: int, ready) -> np.ndarray:
    """Client process: every message of the stream as it arrives; send -> receipt in ms."""
    want = (count + 1) * MESSAGE_SIZE  # the paced ones and the stamp-0 one
    buf = bytearray(want)
    view = memoryview(buf)
    arrived = np.zeros(count + 1, np.int64)
    got = 0
    with _connect(address, "C", stream) as sock:
        while got < want:
            n = sock.recv_into(view[got:])
            if not n:
                raise ConnectionError("the relay closed the stream")
            at = time.monotonic_ns()
            arrived[got // MESSAGE_SIZE:(got + n) // MESSAGE_SIZE] = at  # the messages this read completed
            got += n
            if got >= MESSAGE_SIZE:
                ready.set()
    from tools.bench.latency import received_ms

    return received_ms(np.frombuffer(buf, "<i8")[::MESSAGE_SIZE // 8], arrived, count)


if __name__ == "__main__":
    serve(int(sys.argv[1]))

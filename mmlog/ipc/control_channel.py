"""The local channel between processors and the control plane (the broker's main process).

Requests that change cluster state (create or delete topics, later group
membership) are forwarded by a processor to the main process, which owns the log
manager's catalogue and the coordinators. Each processor has one Unix stream
socketpair to the main process, made before it is forked. Messages are
length-prefixed pickles (both ends are this program): a request is
(id, op, args), a reply is (id, ok, value-or-exception).

The processor end (`ControlClient`) is non-blocking and lives in the processor's
event loop: `call` queues a request with a callback, and replies arrive whenever
the loop finds the socket readable, so no client connection waits on another.
The main end (`ControlServer`) is one thread running a selector over every
processor's channel plus a timer heap, so handlers can answer later (a JoinGroup
waits for its rebalance) by calling `reply` when ready.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import pickle
import selectors
import socket
import struct
import threading
import time
from typing import Any, Callable

from mmlog.errors import MetadataStoreUnreachable

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
MAX_MESSAGE = 64 << 20


def pack(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(body)) + body


class MessageReader:
    """Splits the channel's byte stream into unpickled messages."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list:
        self._buf += data
        out = []
        while len(self._buf) >= 4:
            (n,) = _LEN.unpack_from(self._buf, 0)
            if n > MAX_MESSAGE:
                raise ValueError(f"control message of {n} bytes")
            if len(self._buf) < 4 + n:
                break
            out.append(pickle.loads(self._buf[4 : 4 + n]))
            del self._buf[: 4 + n]
        return out


class ControlUnavailable(Exception):
    """The control plane went away (the broker is stopping)."""


class ControlClient:
    """The processor's end: asynchronous calls into the control plane."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self._ids = itertools.count(1)
        self._waiting: dict[int, Callable[[bool, Any], None]] = {}
        self._out = bytearray()
        self._reader = MessageReader()

    def call(self, op: str, args: Any, callback: Callable[[bool, Any], None]) -> None:
        """Send a request; callback(ok, value) runs in the event loop when the reply comes."""
        req_id = next(self._ids)
        self._waiting[req_id] = callback
        self._out += pack((req_id, op, args))
        self.flush()

    @property
    def wants_write(self) -> bool:
        return bool(self._out)

    def flush(self) -> None:
        try:
            while self._out:
                n = self.sock.send(self._out)
                del self._out[:n]
        except BlockingIOError:
            pass

    def on_readable(self) -> None:
        """Read replies and run their callbacks; ControlUnavailable if the channel closed."""
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        if not data:
            self.fail_all()
            raise ControlUnavailable("control channel closed")
        for req_id, ok, value in self._reader.feed(data):
            callback = self._waiting.pop(req_id, None)
            if callback is not None:
                callback(ok, value)

    def fail_all(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for callback in waiting.values():
            callback(False, ControlUnavailable("control plane unavailable"))


Handler = Callable[[Any, Callable[[Any], None]], None]


class ControlServer:
    """The main process's end: one thread serving every processor's channel."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._pending: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="control-plane", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add_channel(self, sock: socket.socket) -> None:
        self.call_soon(lambda: self._register(sock))

    def _register(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sel.register(sock, selectors.EVENT_READ, MessageReader())

    def remove_channel(self, sock: socket.socket) -> None:
        def drop() -> None:
            try:
                self._sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()

        self.call_soon(drop)

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run fn on the control thread (thread-safe)."""
        with self._lock:
            self._pending.append(fn)
        os.write(self._wake_w, b"x")

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run fn on the control thread after delay seconds (call from the control thread)."""
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), fn))

    def stop(self) -> None:
        self._stop = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop:
            timeout = max(0.0, self._timers[0][0] - time.monotonic()) if self._timers else None
            for key, _ in self._sel.select(timeout):
                if key.data is None:
                    self._run_pending()
                else:
                    self._serve(key.fileobj, key.data)
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                self._safely(heapq.heappop(self._timers)[2])

    def _run_pending(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass
        with self._lock:
            pending, self._pending = self._pending, []
        for fn in pending:
            self._safely(fn)

    def _serve(self, sock: socket.socket, reader: MessageReader) -> None:
        try:
            data = sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(sock)
            sock.close()
            return
        for req_id, op, args in reader.feed(data):
            self._dispatch(sock, req_id, op, args)

    def _dispatch(self, sock: socket.socket, req_id: int, op: str, args: Any) -> None:
        def reply(value: Any, ok: bool = True) -> None:
            try:
                sock.sendall(pack((req_id, ok, value)))
            except OSError:
                pass  # the processor died; its replacement has a new channel

        handler = self.handlers.get(op)
        if handler is None:
            reply(ValueError(f"unknown control op {op!r}"), ok=False)
            return
        try:
            handler(args, reply)
        except MetadataStoreUnreachable as exc:  # a partition, not a bug: one line, and the client retries
            log.warning("control op %s not done: %s", op, exc)
            reply(exc, ok=False)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
            log.exception("control op %s failed", op)
            reply(exc, ok=False)

    @staticmethod
    def _safely(fn: Callable[[], None]) -> None:
        try:
            fn()
        except MetadataStoreUnreachable as exc:
            log.warning("control plane task not done: %s", exc)
        except Exception:  # noqa: BLE001
            log.exception("control plane task failed")

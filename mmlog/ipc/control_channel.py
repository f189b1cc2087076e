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

Failures are contained on both ends. Every call has a deadline: a reply that has
not come by then runs its callback with `ControlTimedOut` (the loop calls
`expire`), and a late reply is dropped, so a request never waits for ever on a
control plane that stopped answering. A callback that raises is logged and its
`fallback` runs (the handler answers its request another way); the other replies
of the same read still run. On the main end, a channel is closed by one owner
only: the control thread, whether its processor died (`remove_channel`) or the
channel hit its end while being served; either path tolerates the other having
gone first, and a socket in any state (closed, its fd -1) is dropped from the
selector without an error.
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
from dataclasses import dataclass
from typing import Any, Callable

from mmlog.errors import MetadataStoreUnreachable
from mmlog.system.process import name_thread

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


class ControlTimedOut(ControlUnavailable):
    """The control plane did not answer a call within its timeout."""


DEFAULT_TIMEOUT_S = 30.0  # a call's deadline when its request names none (a client's own request.timeout.ms)
CALLBACK_LOG_GAP_S = 1.0  # failed callbacks: one line with its traceback, then at most one line a second


@dataclass(slots=True)
class _Call:
    """A call waiting for its reply."""

    op: str
    callback: Callable[[bool, Any], None]
    deadline: float
    fallback: Callable[[BaseException], None] | None


class ControlClient:
    """The processor's end: asynchronous calls into the control plane."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Call] = {}
        self._deadlines: list[tuple[float, int]] = []  # heap of (deadline, request id); answered ones linger
        self._out = bytearray()
        self._reader = MessageReader()
        self.failed_callbacks = 0
        self._next_failure_log = 0.0

    def call(self, op: str, args: Any, callback: Callable[[bool, Any], None], timeout_s: float = DEFAULT_TIMEOUT_S,
             fallback: Callable[[BaseException], None] | None = None) -> None:
        """Send a request; callback(ok, value) runs in the event loop when the reply comes, or with
        (False, ControlTimedOut) once timeout_s has passed without one. Should the callback raise,
        fallback(exception) runs instead (it answers the request another way)."""
        req_id = next(self._ids)
        deadline = time.monotonic() + timeout_s
        self._waiting[req_id] = _Call(op, callback, deadline, fallback)
        heapq.heappush(self._deadlines, (deadline, req_id))
        self._out += pack((req_id, op, args))
        self.flush()

    @property
    def waiting(self) -> int:
        """Calls not answered yet."""
        return len(self._waiting)

    def next_deadline(self) -> float | None:
        """The monotonic time of the next call's deadline, None if nothing waits."""
        while self._deadlines and self._deadlines[0][1] not in self._waiting:
            heapq.heappop(self._deadlines)  # answered in time
        return self._deadlines[0][0] if self._deadlines else None

    def expire(self, now: float | None = None) -> None:
        """Fail the calls whose deadline has passed with ControlTimedOut (the loop calls this each pass)."""
        if not self._deadlines:
            return  # the usual pass: nothing waits on the control plane
        now = time.monotonic() if now is None else now
        while self._deadlines and self._deadlines[0][0] <= now:
            _, req_id = heapq.heappop(self._deadlines)
            call = self._waiting.pop(req_id, None)
            if call is not None:
                self._finish(call, False, ControlTimedOut(f"control op {call.op} not answered in time"))

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
        except OSError:  # reset: the main end closed with our requests unread
            data = b""
        if not data:
            self.fail_all()
            raise ControlUnavailable("control channel closed")
        for req_id, ok, value in self._reader.feed(data):
            call = self._waiting.pop(req_id, None)
            if call is not None:  # None: answered after its deadline, and failed then
                self._finish(call, ok, value)

    def fail_all(self) -> None:
        waiting, self._waiting = self._waiting, {}
        self._deadlines.clear()
        for call in waiting.values():
            self._finish(call, False, ControlUnavailable("control plane unavailable"))

    def _finish(self, call: _Call, ok: bool, value: Any) -> None:
        """Run a call's callback; if it raises, log it and run its fallback: one request's failure
        never reaches the loop, nor the replies read with it."""
        try:
            call.callback(ok, value)
        except Exception as exc:  # noqa: BLE001 - contained: its request is answered by the fallback
            self._callback_failed(call, exc)

    def _callback_failed(self, call: _Call, exc: BaseException) -> None:
        self.failed_callbacks += 1
        now = time.monotonic()
        if now >= self._next_failure_log:
            self._next_failure_log = now + CALLBACK_LOG_GAP_S
            log.error("the answer to control op %s could not be handled (%d so far); its request is answered "
                      "with an error", call.op, self.failed_callbacks, exc_info=exc)
        if call.fallback is not None:
            try:
                call.fallback(exc)
            except Exception:  # noqa: BLE001 - the last net: nothing more to do for that request
                log.exception("control op %s: its request could not be answered either", call.op)


Handler = Callable[[Any, Callable[[Any], None]], None]


THREAD_NAME = "mmlog-control"  # the control thread, as top -H shows it
MAX_UNSENT = 64 << 20  # replies a processor leaves unread before its channel is dropped (it is stuck)


class _Channel:
    """The main end of one processor's channel: what was read of it, and replies not yet sent."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = MessageReader()
        self.out = bytearray()
        self.writing = False  # registered for EVENT_WRITE too


class ControlServer:
    """The main process's end: one thread serving every processor's channel.

    Replies are sent without blocking: what a processor does not read at once waits in its
    channel's buffer, so a stopped or stuck processor can never hold up the control thread (past
    MAX_UNSENT its channel is dropped, and the processor, finding it closed, stops)."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._pending: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="control-plane", daemon=True)
        self.on_turn: Callable[[], None] = lambda: None  # called once per pass of the loop (a liveness stamp)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def start(self) -> None:
        self._thread.start()

    def add_channel(self, sock: socket.socket) -> None:
        self.call_soon(lambda: self._register(sock))

    def _register(self, sock: socket.socket) -> None:
        if sock.fileno() < 0:
            return  # its processor died before the channel was registered, and remove_channel ran first
        sock.setblocking(False)
        self._sel.register(sock, selectors.EVENT_READ, _Channel(sock))

    def remove_channel(self, sock: socket.socket) -> None:
        """A processor died: its channel goes, on the control thread, which alone closes channels."""
        self.call_soon(lambda: self._drop(sock))

    def _drop(self, sock: socket.socket) -> None:
        """Stop serving a channel and close it. Any state of the socket will do: dropped already (its
        processor's death and the channel's end both lead here), or closed with its fd -1, which the
        selector still finds by the object it registered."""
        if any(key.fileobj is sock for key in self._sel.get_map().values()):
            self._sel.unregister(sock)
        sock.close()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run fn on the control thread (thread-safe)."""
        with self._lock:
            self._pending.append(fn)
        self._wake()

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run fn on the control thread after delay seconds (call from the control thread)."""
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), fn))

    def stop(self) -> None:
        self._stop = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups the thread has not read yet: one more changes nothing

    def _run(self) -> None:
        name_thread(THREAD_NAME)
        while not self._stop:
            self.on_turn()
            # At least once a second, idle or not: the turns are what the broker's liveness watch sees.
            timeout = min(max(0.0, self._timers[0][0] - time.monotonic()), 1.0) if self._timers else 1.0
            for key, events in self._sel.select(timeout):
                if key.data is None:
                    self._run_pending()
                elif key.fileobj.fileno() >= 0:  # else dropped by a task of this same pass
                    self._serve(key.data, events)
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

    def _serve(self, channel: _Channel, events: int) -> None:
        if events & selectors.EVENT_WRITE:
            self._send(channel)
        if events & selectors.EVENT_READ and channel.sock.fileno() >= 0:
            self._receive(channel)

    def _receive(self, channel: _Channel) -> None:
        sock = channel.sock
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        try:
            messages = channel.reader.feed(data)
        except Exception:  # noqa: BLE001 - a channel that sends garbage is dropped, its processor replaced
            log.exception("unreadable message on a processor's control channel: dropping the channel")
            self._drop(sock)
            return
        for req_id, op, args in messages:
            self._dispatch(channel, req_id, op, args)

    def _send(self, channel: _Channel) -> None:
        """Send what the channel's buffer holds, as much as the socket takes now; wait for it to be
        writable for the rest."""
        sock = channel.sock
        if sock.fileno() < 0:
            channel.out.clear()  # its processor died: the replacement has a new channel
            return
        try:
            while channel.out:
                del channel.out[:sock.send(channel.out)]
        except BlockingIOError:
            pass
        except OSError:
            channel.out.clear()
            return
        if len(channel.out) > MAX_UNSENT:
            log.error("a processor left %d bytes of control replies unread: dropping its channel", len(channel.out))
            self._drop(sock)
            return
        if bool(channel.out) != channel.writing:
            channel.writing = bool(channel.out)
            self._sel.modify(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if channel.writing else 0), channel)

    def _dispatch(self, channel: _Channel, req_id: int, op: str, args: Any) -> None:
        def reply(value: Any, ok: bool = True) -> None:
            if threading.get_ident() != self._thread.ident:
                self.call_soon(lambda: reply(value, ok))  # channels are the control thread's alone
                return
            if channel.sock.fileno() < 0:
                return  # the processor died; its replacement has a new channel
            try:
                message = pack((req_id, ok, value))
            except Exception as exc:  # noqa: BLE001 - an answer that cannot be pickled is a failure to report
                log.error("control op %s: its answer cannot be sent: %r", op, exc)
                message = pack((req_id, False, RuntimeError(f"control op {op}: unsendable answer: {exc!r}")))
            channel.out += message
            self._send(channel)

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

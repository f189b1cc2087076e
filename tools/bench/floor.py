"""The syscalls of one awaited Produce and nothing else, in a Python server: the floor a request's cost is read
against (tools/bench_request.py)."""

from __future__ import annotations

import contextlib
import socket
import tempfile

from mmlog.protocol.messages import produce
from tools.bench.common import ClientProcess


def floor_server(port_out, data_dir: str, topic: str) -> None:
    """Server process: the syscalls of one awaited Produce and nothing else, in Python (the baseline row).

    Per request: epoll_wait, recv_into, flock, pwrite of what came, flock off, send of a fixed
    Produce v8 answer for `topic` with the request's correlation id patched in. No parsing, no
    checks, no index, no state: what any Python server pays for the same round trip before it
    does any work of its own."""
    import fcntl
    import os
    import select

    from mmlog.processors.handlers.produce import _answer
    from mmlog.protocol import RequestHeader

    answer = _answer(RequestHeader(produce.API_KEY, 8, 0, None), [(topic, [(0, 0, 0, 0, None)])])
    listener = socket.create_server(("127.0.0.1", 0))
    port_out.send(listener.getsockname()[1])
    log = os.open(os.path.join(data_dir, "floor.log"), os.O_RDWR | os.O_CREAT, 0o644)
    lock = os.open(os.path.join(data_dir, "floor.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    buf = bytearray(1 << 16)
    position = 0
    while True:
        conn, _ = listener.accept()
        conn.setblocking(False)
        poll = select.epoll()
        poll.register(conn.fileno(), select.EPOLLIN)
        while True:
            poll.poll()
            try:
                n = conn.recv_into(buf)  # one whole request a read: the client awaits each answer
            except BlockingIOError:
                continue
            if n == 0:
                break
            fcntl.flock(lock, fcntl.LOCK_EX)
            position += os.pwrite(log, memoryview(buf)[:n], position)
            fcntl.flock(lock, fcntl.LOCK_UN)
            answer[4:8] = buf[8:12]  # the correlation id
            conn.send(answer)
        poll.close()
        conn.close()


@contextlib.contextmanager
def floor():
    """`floor_server` in a process of its own: yields (port, pid); killed on the way out."""
    import os
    import signal

    ctx = ClientProcess._ctx
    receive, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryDirectory() as data:
        server = ctx.Process(target=floor_server, args=(send, data, "floor"), daemon=True)
        server.start()
        try:
            yield receive.recv(), server.pid
        finally:
            os.kill(server.pid, signal.SIGKILL)
            server.join()

"""The machine's ceilings for the same bytes: what no broker on this machine can beat.

* raw appends: `os.write` of the run's 200-byte messages, 50 (10 KB) a write,
  to a new file, no fsync (the page cache, as the brokers' asynchronous flush);
* loopback sendfile: that file, page-cached, `os.sendfile`d over a loopback
  TCP connection to a reader in another process (`recv_into` a 1 MiB buffer).

Their msg/s are the 200-byte messages the bytes amount to.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from tools.bench.common import MESSAGE_SIZE, ClientProcess, Meter, Result, Rows, payload

PER_WRITE = 50  # messages per os.write: 10 KB
SENDFILE_STEP = 64 << 20  # bytes per os.sendfile call (so the progress can be sampled)


def appends(path: str, messages: int) -> dict:
    """Client process: append `messages` messages to a new file at `path`, PER_WRITE a write."""
    chunk = payload() * PER_WRITE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    meter, written = Meter(), 0
    try:
        while written < messages:
            m = min(PER_WRITE, messages - written)
            os.write(fd, chunk if m == PER_WRITE else chunk[: m * MESSAGE_SIZE])
            written += m
            if not written % (PER_WRITE * 100):
                meter.tick(written)
    finally:
        os.close(fd)
    return meter.result(messages)


def drain(port: int, nbytes: int) -> float:
    """Client process: read `nbytes` from 127.0.0.1:port; returns the monotonic time of the last byte."""
    sock = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(1 << 20)
    left = nbytes
    while left:
        got = sock.recv_into(buf)
        if not got:
            raise ConnectionError(f"sender closed with {left:,} bytes to go")
        left -= got
    done = time.monotonic()
    sock.close()
    return done


def sendfile(path: str, timeout: float) -> dict:
    """Send the page-cached file at `path` over loopback TCP to a reader process; the sender's side."""
    size = os.path.getsize(path)
    with open(path, "rb") as f, socket.create_server(("127.0.0.1", 0)) as listener:
        scratch = bytearray(1 << 24)
        while f.readinto(scratch):  # page-cached before the clock starts
            pass
        reader = ClientProcess(drain, listener.getsockname()[1], size)
        conn, _ = listener.accept()
        with conn:
            meter, start, offset = Meter(), time.monotonic(), 0
            while offset < size:
                offset += os.sendfile(conn.fileno(), f.fileno(), offset, min(SENDFILE_STEP, size - offset))
                meter.tick(offset // MESSAGE_SIZE)
            last_byte = reader.result(timeout)
    result = meter.result(size // MESSAGE_SIZE, size)
    result["seconds"] = last_byte - start
    return result


def bench(cfg, workdir: Path, log) -> list[Result]:
    path = str(Path(workdir) / "ceiling.log")
    results = Rows("machine", log)
    r = ClientProcess(appends, path, cfg.messages).result(cfg.timeout(cfg.messages))
    results.add("ceiling", f"raw appends, os.write of {PER_WRITE * MESSAGE_SIZE // 1000} KB", None, r)
    r = sendfile(path, cfg.timeout(cfg.messages))
    results.add("ceiling", "loopback os.sendfile of a page-cached file", None, r)
    os.unlink(path)
    return results

"""What every driver shares: the message, the meter a client samples its progress with, the
result rows, and `ClientProcess`, which runs one client in a process of its own."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import socket
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

MESSAGE_SIZE = 200  # bytes of value per message, as in the paper
MB = 1_000_000
SAMPLE_EVERY = 0.05  # seconds between progress samples: 20 points a second for the figures


def payload(size: int = MESSAGE_SIZE) -> bytes:
    """The message every system sends: `size` bytes (not all equal, so nothing compresses it away)."""
    return (bytes(range(256)) * (size // 256 + 1))[:size]


class Meter:
    """A client's clock: `tick(messages)` at chunk boundaries records (seconds, messages) at most every
    SAMPLE_EVERY; `result()` returns the run's totals and the samples the figures are drawn from."""

    def __init__(self, size: int = MESSAGE_SIZE) -> None:
        self.size = size
        self.start = time.monotonic()  # the clock of mmlog's futures' acked_at
        self._next = self.start + SAMPLE_EVERY
        self.samples: list[tuple[float, int]] = [(0.0, 0)]

    def tick(self, messages: int) -> None:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + SAMPLE_EVERY
            self.samples.append((now - self.start, messages))

    def result(self, messages: int, nbytes: int | None = None) -> dict:
        seconds = time.monotonic() - self.start
        self.samples.append((seconds, messages))
        return dict(messages=messages, nbytes=messages * self.size if nbytes is None else nbytes,
                    seconds=seconds, samples=self.samples)


AWAITED_CHUNK = 1000  # awaited records between two looks at the clock


def timed(sender, messages: int, ready=None, go=None) -> dict:
    """Client process: `messages` records through `sender` (a context manager yielding `send(n)`, n records
    each awaited before the next, connected and warmed up on entry), timed from `go` (when given)."""
    with sender as send:
        if ready is not None:
            ready.set()
            go.wait()
        meter, sent = Meter(), 0
        while sent < messages:
            m = min(AWAITED_CHUNK, messages - sent)
            send(m)
            sent += m
            meter.tick(sent)
        return meter.result(messages)


@contextmanager
def awaited_async(opened):
    """An async client as an awaited sender (`timed`): `opened` is an async context manager yielding an
    async `send(n)`; it runs on an event loop of its own, so a client process can hold several senders
    and call them between other work."""
    loop = asyncio.new_event_loop()
    cm = opened()
    try:
        send = loop.run_until_complete(cm.__aenter__())
        loop.run_until_complete(send(1))  # connected and warmed up before any clock starts
        yield lambda n: loop.run_until_complete(send(n))
    finally:
        try:
            loop.run_until_complete(cm.__aexit__(None, None, None))
        finally:
            loop.close()


@dataclass
class Result:
    """One row of the table: a client run of one system in one test."""

    system: str  # "mmlog", "redis", "rabbitmq", "machine"
    test: str  # "produce", "consume", "ceiling"
    variant: str  # how it was run, e.g. "send(), batch 50"
    batch: int | None  # messages per request / pipeline / flush (producer); None elsewhere
    messages: int
    nbytes: int
    seconds: float
    samples: list = field(default_factory=list, repr=False)  # (seconds, messages)
    baseline: bool = False  # the mmlog row the peers of the same (test, batch) are compared with

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_rate(self) -> float:
        return self.nbytes / MB / self.seconds if self.seconds > 0 else 0.0


class Rows(list):
    """One system's Result rows, each logged (the run's progress) as it is added."""

    def __init__(self, system: str, log) -> None:
        super().__init__()
        self.system = system
        self.log = log

    def add(self, test: str, variant: str, batch: int | None, run: dict, baseline: bool = False) -> None:
        """Add the row of a client's `run` (its Meter.result())."""
        self.append(Result(self.system, test, variant, batch, baseline=baseline, **run))
        self.log(self[-1])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the usual bind-to-0 race applies)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClientFailed(RuntimeError):
    """A client process raised, died or ran out of time."""


def _child(conn, fn, args, kwargs) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness stops its children itself
    try:
        conn.send(("ok", fn(*args, **kwargs)))
    except BaseException:  # noqa: BLE001 - reported to the parent, whatever it was
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class ClientProcess:
    """`fn(*args, **kwargs)` in a fresh (spawned) process: the client gets a core and an interpreter of
    its own, the same for every system. `result()` waits for its return value."""

    _ctx = multiprocessing.get_context("spawn")

    def __init__(self, fn, *args, **kwargs) -> None:
        self.fn = fn
        self._recv, send = self._ctx.Pipe(duplex=False)
        self.proc = self._ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=True)
        self.proc.start()
        send.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for(self, event, timeout: float, what: str) -> None:
        """Wait for `event` (set by the client); raise ClientFailed if the client dies or time runs out."""
        deadline = time.monotonic() + timeout
        while not event.wait(0.1):
            if not self.proc.is_alive():
                self.result(0)  # raises with the client's traceback, if it sent one
                raise ClientFailed(f"{self.name()} ended before {what}")
            if time.monotonic() > deadline:
                self.stop()
                raise ClientFailed(f"{self.name()}: no {what} in {timeout:.0f} s")

    def result(self, timeout: float):
        try:
            if not self._recv.poll(timeout):
                raise ClientFailed(f"{self.name()} did not finish in {timeout:.0f} s")
            status, value = self._recv.recv()
        except EOFError:
            raise ClientFailed(f"{self.name()} died (exit code {self.proc.exitcode})") from None
        finally:
            self.stop()
        if status != "ok":
            raise ClientFailed(f"{self.name()} failed:\n{value}")
        return value

    def name(self) -> str:
        return f"client {self.fn.__module__}.{self.fn.__name__} (pid {self.proc.pid})"

    def stop(self, grace: float = 5.0) -> None:
        """Join the process; kill it (by pid) if it does not end within `grace` seconds."""
        self.proc.join(grace)
        if self.proc.is_alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.join()
        self._recv.close()

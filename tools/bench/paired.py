"""Servers compared in interleaved slices: what a request costs each, measured over the same minutes.

On a shared host the cost of a wake-up moves by 2x from one minute to the next, so rows run one
after another compare the host's minutes as much as the servers. Here one client process holds a
connection to every server and takes them in turn, `per_slice` awaited requests each, the order
rotating from slice to slice; each server's CPU is read from the scheduler's own clock
(/proc/<pid>/task/*/schedstat: nanoseconds on a CPU, every thread) before and after its slice, and
the slice's wall time gives its requests a second. Every server sees the same minutes, so their
ratios hold where their absolute figures do not.

A request is a raw one (a pre-encoded Kafka Produce frame, or an XADD command: the server's cost
with the least client in front of it) or a client library's awaited send (librdkafka, mmlog's
producer, redis-py, nats-py, rstream: `tools/bench/*_driver.awaited`), the row a user sees.
"""

from __future__ import annotations

import importlib
import os
import socket
import statistics
import time
from contextlib import ExitStack, contextmanager
from typing import NamedTuple

from mmlog.client.connection import BrokerConnection
from tools.bench.resp import awaited_xadd


class Server(NamedTuple):
    """One server of the comparison: its name, address, the processes whose CPU counts, and how a request
    is made ("kafka": a pre-encoded Kafka frame, its answer's error code at `error_at` of the frame read
    without its size; "resp": an XADD command; a key of CLIENTS: that client's awaited send to `stream`)."""

    name: str
    host: str
    port: int
    pids: tuple
    kind: str
    frame: bytes = b""
    error_at: int = 0
    stream: str = ""


# kind -> the driver whose `awaited(address, stream)` sends through that client library
CLIENTS = {"librdkafka": "kafka_driver", "mmlog": "mmlog_driver", "redis-py": "redis_driver",
           "nats-py": "nats_driver", "rstream": "rstream_driver", "relay": "relay",
           "frames": "frames_driver"}


class Tally(NamedTuple):
    """A server's totals over every slice, and its CPU per request and requests a second slice by slice."""

    name: str
    requests: int
    cpu_ns: int
    wall_ns: int
    slices_us: list  # CPU µs per request, one entry per slice
    slices_rate: list  # requests a second, one entry per slice

    @property
    def us_per_request(self) -> float:
        return self.cpu_ns / self.requests / 1e3

    @property
    def rate(self) -> float:
        return self.requests / (self.wall_ns / 1e9)


def cpu_ns(pids) -> int:
    """Nanoseconds on a CPU so far of every live thread of `pids` (the first field of each thread's schedstat)."""
    return schedstat(pids)[0]


def schedstat(pids) -> tuple[int, int]:
    """(ns on a CPU, times put on a CPU) so far, summed over every live thread of `pids`: the first and third
    fields of each thread's schedstat."""
    ns = runs = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    fields = f.read().split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            ns, runs = ns + int(fields[0]), runs + int(fields[2])
    return ns, runs


@contextmanager
def _raw(server: Server):
    """send(n): n raw requests, each answer read whole (and checked) before the next."""
    if server.kind == "resp":
        sock = socket.create_connection((server.host, server.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray(256)

        def send(n: int) -> None:
            for _ in range(n):
                awaited_xadd(sock, server.frame, buf)

        with sock:
            yield send
        return
    conn, at = BrokerConnection(server.host, server.port), server.error_at

    def send(n: int) -> None:
        for _ in range(n):
            conn.send_raw(server.frame)
            if code := int.from_bytes(conn.receive_frame()[at:at + 2], "big"):
                raise RuntimeError(f"{server.name}: error code {code}")

    try:
        yield send
    finally:
        conn.close()


def driver(server: Server):
    """The client driver of a server whose kind is a key of CLIENTS, and the address it takes."""
    module = importlib.import_module(f"tools.bench.{CLIENTS[server.kind]}")
    kafka = server.kind in ("librdkafka", "mmlog", "frames")
    return module, f"{server.host}:{server.port}" if kafka else (server.host, server.port)


def sender(server: Server):
    """A context manager yielding `send(n)`: n awaited requests to `server`."""
    if server.kind not in CLIENTS:
        return _raw(server)
    module, address = driver(server)
    return module.awaited(address, server.stream)


def interleaved(servers: list[Server], slices: int, per_slice: int, warm: int) -> list[Tally]:
    """Client process: `slices` rounds of `per_slice` awaited requests to each server in turn (the order
    rotated each round), after `warm` requests each; every server's CPU and wall time per slice."""
    with ExitStack() as stack:
        sends = [stack.enter_context(sender(s)) for s in servers]
        for send in sends:
            send(warm)
        cpu, wall = [0] * len(servers), [0] * len(servers)
        per, rates = [[] for _ in servers], [[] for _ in servers]
        for r in range(slices):
            for k in range(len(servers)):
                i = (r + k) % len(servers)
                before, start = cpu_ns(servers[i].pids), time.perf_counter_ns()
                sends[i](per_slice)
                took, used = time.perf_counter_ns() - start, cpu_ns(servers[i].pids) - before
                cpu[i] += used
                wall[i] += took
                per[i].append(used / per_slice / 1e3)
                rates[i].append(per_slice / (took / 1e9))
    return [Tally(s.name, slices * per_slice, cpu[i], wall[i], per[i], rates[i]) for i, s in enumerate(servers)]


def quartiles(values: list) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of values."""
    q1, median, q3 = statistics.quantiles(values, n=4)
    return q1, median, q3


def slice_ratios(a: list, b: list) -> tuple[float, float, float]:
    """The quartiles of a's figure over b's, slice by slice (each pair measured in one round)."""
    return quartiles([x / y for x, y in zip(a, b) if y > 0])


def table(tallies: list[Tally], against: list[str]) -> list[str]:
    """Markdown lines: each server's totals, then the first server over each of `against`, slice by slice:
    its CPU per request and its requests a second."""
    lines = ["| server | requests | CPU µs per request | per slice: median (quartiles) | requests/s | "
             "per slice: median (quartiles) |", "|---|---:|---:|---:|---:|---:|"]
    for t in tallies:
        q1, med, q3 = quartiles(t.slices_us)
        r1, rmed, r3 = quartiles(t.slices_rate)
        lines.append(f"| {t.name} | {t.requests:,} | {t.us_per_request:.1f} | {med:.1f} ({q1:.1f}–{q3:.1f}) | "
                     f"{t.rate:,.0f} | {rmed:,.0f} ({r1:,.0f}–{r3:,.0f}) |")
    first, by_name = tallies[0], {t.name: t for t in tallies}
    lines += ["", f"| {first.name} over | CPU per request, of the totals | per slice: median (quartiles) | "
              "requests/s, of the totals | per slice: median (quartiles) |", "|---|---:|---:|---:|---:|"]
    for name in against:
        if (other := by_name.get(name)) is not None:
            q1, med, q3 = slice_ratios(first.slices_us, other.slices_us)
            r1, rmed, r3 = slice_ratios(first.slices_rate, other.slices_rate)
            lines.append(f"| {name} | {first.us_per_request / other.us_per_request:.2f} | "
                         f"{med:.2f} ({q1:.2f}–{q3:.2f}) | {first.rate / other.rate:.2f} | "
                         f"{rmed:.2f} ({r1:.2f}–{r3:.2f}) |")
    return lines

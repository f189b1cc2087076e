"""Servers compared in interleaved slices: what a request costs each, measured over the same minutes.

On a shared host the cost of a wake-up moves by 2x from one minute to the next, so rows run one
after another compare the host's minutes as much as the servers. Here one client process holds a
connection to every server and takes them in turn, `per_slice` awaited requests each, the order
rotating from slice to slice; each server's CPU is read from the scheduler's own clock
(/proc/<pid>/task/*/schedstat: nanoseconds on a CPU, every thread) before and after its slice.
Every server sees the same minutes, so their ratio holds where their absolute figures do not.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from typing import NamedTuple

from mmlog.client.connection import BrokerConnection
from tools.bench.resp import awaited_xadd


class Server(NamedTuple):
    """One server of the comparison: its name, address, the processes whose CPU counts, and how a request
    is made ("kafka": a pre-encoded Kafka frame, its answer's error code at `error_at` of the frame read
    without its size; "resp": an XADD command)."""

    name: str
    host: str
    port: int
    pids: tuple
    kind: str
    frame: bytes
    error_at: int = 0


class Tally(NamedTuple):
    """A server's totals over every slice, and its CPU per request slice by slice."""

    name: str
    requests: int
    cpu_ns: int
    wall_ns: int
    slices_us: list  # CPU µs per request, one entry per slice

    @property
    def us_per_request(self) -> float:
        return self.cpu_ns / self.requests / 1e3

    @property
    def rate(self) -> float:
        return self.requests / (self.wall_ns / 1e9)


def cpu_ns(pids) -> int:
    """Nanoseconds on a CPU so far of every live thread of `pids` (the first field of each thread's schedstat)."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


class _Exchange:
    """One connection's awaited request: send, read the whole answer, check it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        if server.kind == "resp":
            self.sock = socket.create_connection((server.host, server.port))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buf = bytearray(256)
        else:
            self.conn = BrokerConnection(server.host, server.port)

    def one(self) -> None:
        if self.server.kind == "resp":
            awaited_xadd(self.sock, self.server.frame, self.buf)
            return
        self.conn.send_raw(self.server.frame)
        answer, at = self.conn.receive_frame(), self.server.error_at
        if code := int.from_bytes(answer[at:at + 2], "big"):
            raise RuntimeError(f"{self.server.name}: error code {code}")

    def close(self) -> None:
        (self.sock if self.server.kind == "resp" else self.conn).close()


def interleaved(servers: list[Server], slices: int, per_slice: int, warm: int) -> list[Tally]:
    """Client process: `slices` rounds of `per_slice` awaited requests to each server in turn (the order
    rotated each round), after `warm` requests each; every server's CPU and wall time per slice."""
    exchanges = [_Exchange(s) for s in servers]
    for ex in exchanges:
        for _ in range(warm):
            ex.one()
    cpu = [0] * len(servers)
    wall = [0] * len(servers)
    per = [[] for _ in servers]
    for r in range(slices):
        for k in range(len(servers)):
            i = (r + k) % len(servers)
            ex = exchanges[i]
            before, start = cpu_ns(ex.server.pids), time.perf_counter_ns()
            for _ in range(per_slice):
                ex.one()
            took, used = time.perf_counter_ns() - start, cpu_ns(ex.server.pids) - before
            cpu[i] += used
            wall[i] += took
            per[i].append(used / per_slice / 1e3)
    for ex in exchanges:
        ex.close()
    return [Tally(s.name, slices * per_slice, cpu[i], wall[i], per[i]) for i, s in enumerate(servers)]


def slice_ratios(a: Tally, b: Tally) -> tuple[float, float, float]:
    """The quartiles of a's CPU per request over b's, slice by slice (each pair measured in one round)."""
    ratios = sorted(x / y for x, y in zip(a.slices_us, b.slices_us) if y > 0)
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return q1, median, q3


def table(tallies: list[Tally], against: list[str]) -> list[str]:
    """Markdown lines: each server's totals, then the first server over each of `against`, slice by slice."""
    lines = ["| server | requests | CPU µs per request | per slice: median (quartiles) | requests/s |",
             "|---|---:|---:|---:|---:|"]
    for t in tallies:
        q1, med, q3 = statistics.quantiles(t.slices_us, n=4)
        lines.append(f"| {t.name} | {t.requests:,} | {t.us_per_request:.1f} | {med:.1f} ({q1:.1f}–{q3:.1f}) | "
                     f"{t.rate:,.0f} |")
    first, by_name = tallies[0], {t.name: t for t in tallies}
    lines += ["", "| ratio of CPU per request | of the totals | per slice: median (quartiles) |", "|---|---:|---:|"]
    for name in against:
        if (other := by_name.get(name)) is not None:
            q1, med, q3 = slice_ratios(first, other)
            lines.append(f"| {first.name} / {name} | {first.us_per_request / other.us_per_request:.2f} | "
                         f"{med:.2f} ({q1:.2f}–{q3:.2f}) |")
    return lines

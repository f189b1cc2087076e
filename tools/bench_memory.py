"""What connections cost a broker in memory, and what the request memory pool costs in time.

    python tools/bench_memory.py [--idle N] [--hostile N] [--declare MIB] [--send KIB]

One broker (EmbeddedBroker, loopback, 2 processors, default settings). Its
resident memory is read from /proc for the main process and every processor:
RSS summed (pages shared between the processes, the code and numba's kernels,
count once per process: an upper bound) and PSS summed (shared pages split
between their users: the broker's real share of RAM).

1. baseline: the broker with no client;
2. idle: N connections that each sent one ApiVersions request, then nothing;
   reported per connection (the average, and the slope over the second half, which
   leaves out one-time costs), with the compiled request path on and off;
3. hostile: N more sockets that each declare a frame of MIB mebibytes and send
   KIB kibibytes of it, then nothing (before the pool, each made a processor
   allocate the declared size at once);
4. framing: a 100 MiB frame through FrameReader in 256 KiB receives, allocated
   whole (no budget) and grown as it arrives (budget); and the cost of a small
   frame's reserve and release through a connection's budget.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.ipc.memory_pool import MemoryPool  # noqa: E402
from mmlog.processors.memory import Allowance, ConnectionBudget  # noqa: E402
from mmlog.protocol import FrameReader, RequestHeader, encode_request  # noqa: E402
from mmlog.protocol.messages import api_versions  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402

MiB = 1 << 20


def process_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in bytes, from /proc/<pid>/smaps_rollup."""
    rss = pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("Pss:"):
            pss = int(line.split()[1]) * 1024
    return rss, pss


def memory(broker) -> tuple[int, int]:
    """(RSS, PSS) of the broker's processes, summed, in bytes."""
    each = [process_memory(pid) for pid in [broker.pid, *broker.processor_pids()]]
    return sum(r for r, _ in each), sum(p for _, p in each)


def settle(broker, seconds: float = 2.0) -> tuple[int, int]:
    time.sleep(seconds)
    return memory(broker)


def api_versions_frame() -> bytes:
    return bytes(encode_request(RequestHeader(api_versions.API_KEY, 3, 1, "bench"),
                                api_versions.REQUEST(client_software_name="bench", client_software_version="1")))


def open_idle(broker, count: int) -> list[socket.socket]:
    """`count` connections that each sent one ApiVersions request and were answered."""
    host, port = broker.bootstrap.rsplit(":", 1)
    frame, socks = api_versions_frame(), []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(frame)
        socks.append(sock)
    for sock in socks:  # every one answered: handed off, framer allocated
        assert sock.recv(4)
    return socks


def open_hostile(broker, count: int, declare: int, send: int) -> list[socket.socket]:
    host, port = broker.bootstrap.rsplit(":", 1)
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(struct.pack(">i", declare) + os.urandom(send))
        socks.append(sock)
    return socks


def framing_times(size: int = 100 * MiB, recv: int = 256 * 1024) -> tuple[float, float]:
    """Seconds to assemble one `size` frame from `recv`-byte receives: allocated whole, and grown."""
    data = memoryview(struct.pack(">i", size) + bytes(size))

    class Unlimited:
        def reserve(self, want, need):
            return want

        def release(self, n):
            pass

    out = []
    for budget in (None, Unlimited()):
        reader, pos = FrameReader(budget=budget), 0
        started = time.perf_counter()
        while pos < len(data):
            target = reader.get_buffer()
            n = min(len(target), recv, len(data) - pos)
            target[:n] = data[pos:pos + n]
            reader.buffer_updated(n)
            pos += n
        assert len(reader.next_frame()) == size
        out.append(time.perf_counter() - started)
    return out[0], out[1]


def small_frame_ns(rounds: int = 1_000_000) -> float:
    """Nanoseconds per small frame's reserve + release through a connection's budget."""
    budget = ConnectionBudget(Allowance(MemoryPool(512 * MiB, 100 * MiB, 1), 0), 100 * MiB)
    started = time.perf_counter()
    for _ in range(rounds):
        budget.reserve(1024, 1024)
        budget.release(1024)
    return (time.perf_counter() - started) / rounds * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--hostile", type=int, default=200)
    parser.add_argument("--declare", type=int, default=100, help="MiB each hostile socket declares")
    parser.add_argument("--send", type=int, default=4, help="KiB each hostile socket sends")
    args = parser.parse_args()

    # A fresh broker for each measurement: memory freed by one stays in the processes' heaps for the next.
    # Idle connections with the compiled request path on (the default) and off, one after the other.
    for compiled in ("true", "false"):
        with EmbeddedBroker(processors=2, config={"compiled.request.path.enable": compiled}) as broker:
            base_rss, base_pss = settle(broker)
            print(f"compiled path {compiled:5}: baseline   RSS {base_rss / MiB:7.1f} MiB   PSS {base_pss / MiB:7.1f} MiB")
            # The slope between N/2 and N connections: what one more costs, without the one-time costs
            # the first connections bring (pages of code and caches touched once).
            half = args.idle // 2
            idle = open_idle(broker, half)
            rss1, pss1 = settle(broker)
            idle += open_idle(broker, args.idle - half)
            rss, pss = settle(broker)
            more = args.idle - half
            print(f"compiled path {compiled:5}: {args.idle} idle connections   RSS {rss / MiB:7.1f} MiB   "
                  f"PSS {pss / MiB:7.1f} MiB   per connection: RSS {(rss - base_rss) / args.idle / 1024:5.1f} KiB, "
                  f"PSS {(pss - base_pss) / args.idle / 1024:5.1f} KiB; the last {more}: "
                  f"RSS {(rss - rss1) / more / 1024:5.1f} KiB, PSS {(pss - pss1) / more / 1024:5.1f} KiB each")
            for sock in idle:
                sock.close()
    with EmbeddedBroker(processors=2) as broker:
        base_rss, base_pss = settle(broker)
        hostile = open_hostile(broker, args.hostile, args.declare * MiB, args.send * 1024)
        rss, pss = settle(broker)
        print(f"{args.hostile} sockets declaring {args.declare} MiB, sending {args.send} KiB: "
              f"RSS {base_rss / MiB:.1f} -> {rss / MiB:.1f} MiB (+{(rss - base_rss) / MiB:.1f})   "
              f"PSS {base_pss / MiB:.1f} -> {pss / MiB:.1f} MiB (+{(pss - base_pss) / MiB:.1f})")
        for sock in hostile:
            sock.close()

    whole, grown = framing_times()
    print(f"a 100 MiB frame in 256 KiB receives: allocated whole {whole * 1000:.0f} ms, "
          f"grown as it arrives {grown * 1000:.0f} ms")
    print(f"a small frame's reserve + release: {small_frame_ns():.0f} ns")


if __name__ == "__main__":
    main()

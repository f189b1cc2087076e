"""Two things this host does to every figure on the benchmarks page, measured with no broker at all.

    python tools/bench_host.py             # prints both tables
    python tools/bench_host.py --rounds 5

1. A write into the page cache costs what the page it lands in costs. `os.pwrite` of 10 KB at a time into a
   new file, twice: first into pages the kernel has to find (on a virtual machine whose balloon reports free
   pages to the host, the host took them back and faults each one in again at its first store), then again
   at once into a second new file after the first was deleted (the pages just freed, still the guest's).
   A broker's appends are such writes, so its CPU per record moves with which kind of page it gets.
2. A thread's first work after it slept costs more the longer it slept: the same 20 small numpy operations
   timed (thread CPU and wall) right after an `epoll` wait of 0.2 ms to 250 ms. What the hardware and the
   hypervisor evict meanwhile (caches, TLB entries, the host's own page tables) is paid back by the first
   instructions: an idle broker's wake-ups, each a timer, cost it this, and an awaited request after a pause
   too.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import sys
import tempfile
import time

import numpy as np

WRITE = 10 * 1024
WRITES = 20_000  # 200 MiB a file
SLEEPS_MS = (0.2, 1, 5, 20, 100, 250)


def pwrite_us(directory: str | None, writes: int = WRITES) -> tuple[float, float]:
    """µs per 10 KB pwrite into a new file (pages the kernel must find), then into another new file right
    after the first was deleted (the pages it just freed)."""
    buf = b"x" * WRITE
    out = []
    for _ in range(2):
        fd, path = tempfile.mkstemp(dir=directory, prefix="bench-host-")
        try:
            start = time.perf_counter_ns()
            for i in range(writes):
                os.pwrite(fd, buf, i * WRITE)
            out.append((time.perf_counter_ns() - start) / 1e3 / writes)
        finally:
            os.close(fd)
            os.unlink(path)
    return out[0], out[1]


def after_sleep_us(sleep_ms: float, wakes: int) -> tuple[float, float]:
    """(thread CPU µs, wall µs), medians, of 20 small numpy operations right after each of `wakes` sleeps."""
    ep = select.epoll()
    a = np.zeros(10)
    cpu, wall = [], []
    try:
        for _ in range(wakes):
            ep.poll(sleep_ms / 1000)
            c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(20):
                np.add(a, 1, out=a)
            cpu.append(time.thread_time_ns() - c0)
            wall.append(time.perf_counter_ns() - w0)
    finally:
        ep.close()
    return statistics.median(cpu) / 1e3, statistics.median(wall) / 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="pairs of page-cache writes")
    ap.add_argument("--dir", default=None, help="where the written files go (default: the temporary directory)")
    ap.add_argument("--writes", type=int, default=WRITES, help="10 KB writes a file")
    ap.add_argument("--wakes", type=int, default=None, help="wakes a sleep length (default: 20 to 500, by length)")
    args = ap.parse_args(argv)
    if args.rounds <= 0 or args.writes <= 0 or (args.wakes is not None and args.wakes <= 0):
        ap.error("rounds, writes and wakes must be positive")
    command = " ".join(["python tools/bench_host.py", *(sys.argv[1:] if argv is None else argv)])
    print(f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}):\n")
    print(f"| round | µs a {WRITE // 1024} KB pwrite, new pages | the same right after, freed pages | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for r in range(args.rounds):
        if r:
            time.sleep(10)  # for the freed pages to be reported to the host again (a balloon that reports them)
        cold, warm = pwrite_us(args.dir, args.writes)
        print(f"| {r + 1} | {cold:.2f} | {warm:.2f} | {cold / warm:.1f}x |", flush=True)
    print("\n| slept | 20 numpy operations after the wake: thread CPU µs | wall µs |")
    print("| ---: | ---: | ---: |")
    for ms in SLEEPS_MS:
        cpu, wall = after_sleep_us(ms, args.wakes or max(20, min(500, int(200 / ms))))
        print(f"| {ms:g} ms | {cpu:.1f} | {wall:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

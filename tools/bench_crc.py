"""CRC-32C speed: the kernel every batch check calls against its references, at the sizes batches come in.

    python tools/bench_crc.py                 # 200 B, 1 KB, 10 KB (a batch of 50 records), 4 MiB (a fetch)
    python tools/bench_crc.py --sizes 10000   # some sizes

Rows: `kernels.crc32c` (what the compiled append, the segment scan and the cleaner call: SSE4.2 over three
interleaved streams where the CPU has it), `kernels.crc32c_tables` (slicing-by-8, the fallback and the
reference), and the `crc32c` package called from Python (the clients' encoders use it; its figure includes
a Python call). Each figure is the best of --rounds timings of a compiled loop over one buffer, in µs a
call and GB/s, all measured in this one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_crc.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from mmlog.log import kernels  # noqa: E402

SIZES = (200, 1000, 10_000, 4 << 20)
BYTES_A_TIMING = 200_000_000


@njit(cache=True)
def _kernel_loop(buf, size, n, tables):
    x = np.uint32(0)
    for _ in range(n):
        x ^= kernels.crc32c(buf, 0, size, tables)
    return x


@njit(cache=True)
def _tables_loop(buf, size, n, tables):
    x = np.uint32(0)
    for _ in range(n):
        x ^= kernels.crc32c_tables(buf, 0, size, tables)
    return x


def _package_loop(buf, size, n, tables):
    from crc32c import crc32c

    view = memoryview(buf)[:size]
    x = 0
    for _ in range(n):
        x ^= crc32c(view)
    return x


ROWS = (("kernels.crc32c", _kernel_loop), ("kernels.crc32c_tables", _tables_loop), ("crc32c package", _package_loop))


def best_us(loop, buf, size: int, rounds: int) -> float:
    """µs a call: the best of `rounds` timings of a loop over about BYTES_A_TIMING bytes (a tenth for the
    tables)."""
    n = max(10, BYTES_A_TIMING // size // (10 if loop is _tables_loop else 1))
    loop(buf, size, 1, kernels.CRC_TABLES)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        loop(buf, size, n, kernels.CRC_TABLES)
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def table(sizes, rounds: int) -> list[str]:
    buf = np.random.default_rng(1).integers(0, 256, max(sizes), dtype=np.uint8)
    expected = {size: _package_loop(buf, size, 1, None) for size in sizes}
    lines = ["| bytes | " + " | ".join(f"{name} µs (GB/s)" for name, _ in ROWS) + " |", "|---:|" + "---:|" * len(ROWS)]
    for size in sizes:
        for name, loop in ROWS:
            if loop(buf, size, 1, kernels.CRC_TABLES) != expected[size]:
                raise AssertionError(f"{name} disagrees with the crc32c package over {size} bytes")
        cells = [best_us(loop, buf, size, rounds) for _, loop in ROWS]
        lines.append(f"| {size:,} | " + " | ".join(f"{us:.3f} ({size / us / 1e3:.1f})" for us in cells) + " |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes a call, comma-separated")
    ap.add_argument("--rounds", type=int, default=5, help="timings of each row, the best kept")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error("--sizes: whole numbers of bytes, comma-separated")
    if not sizes or min(sizes) <= 0 or args.rounds <= 0:
        ap.error("sizes and rounds must be positive")
    command = " ".join(["python tools/bench_crc.py", *(sys.argv[1:] if argv is None else argv)])
    print(f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, SSE4.2: {kernels.cpu.HAS_SSE42}):\n")
    print("\n".join(table(sizes, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

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


@njit
def _compiled_loop(crc, buf, size, n, tables):
    """n calls of the compiled CRC `crc` over buf[:size], in compiled code (numba specialises on `crc`)."""
    x = np.uint32(0)
    for _ in range(n):
        x ^= crc(buf, 0, size, tables)
    return x


def _package_loop(crc, buf, size, n, tables):
    """n calls of the crc32c package from Python."""
    from crc32c import crc32c

    view = memoryview(buf)[:size]
    x = 0
    for _ in range(n):
        x ^= crc32c(view)
    return x


# (row, the CRC, how it is called n times); the tables' loop runs a tenth as many bytes
ROWS = (("kernels.crc32c", kernels.crc32c, _compiled_loop),
        ("kernels.crc32c_tables", kernels.crc32c_tables, _compiled_loop),
        ("crc32c package", None, _package_loop))


def best_us(crc, loop, buf, size: int, rounds: int) -> float:
    """µs a call: the best of `rounds` timings of a loop over about BYTES_A_TIMING bytes."""
    n = max(10, BYTES_A_TIMING // size // (10 if crc is kernels.crc32c_tables else 1))
    loop(crc, buf, size, 1, kernels.CRC_TABLES)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        loop(crc, buf, size, n, kernels.CRC_TABLES)
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def table(sizes, rounds: int) -> list[str]:
    buf = np.random.default_rng(1).integers(0, 256, max(sizes), dtype=np.uint8)
    lines = ["| bytes | " + " | ".join(f"{name} µs (GB/s)" for name, _, _ in ROWS) + " |",
             "|---:|" + "---:|" * len(ROWS)]
    for size in sizes:
        expected = _package_loop(None, buf, size, 1, None)
        for name, crc, loop in ROWS:
            if loop(crc, buf, size, 1, kernels.CRC_TABLES) != expected:
                raise AssertionError(f"{name} disagrees with the crc32c package over {size} bytes")
        cells = [best_us(crc, loop, buf, size, rounds) for _, crc, loop in ROWS]
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

"""Time per append of one record through the compiled append (log/append_kernel.py) against
`Partition.append_many`, on tmpfs and on disk, in one run.

    python tools/bench_append_kernel.py [--appends N] [--size BYTES] [--rounds R] [--dirs DIR ...]

Each way appends N batches of one BYTES-byte record (keyed, built beforehand) to a fresh partition
(default topic config: no flush, no roll): `python` calls Partition.append_many([buf]) per record;
`kernel` calls append_kernel.append per record from Python (the buffers laid out in one receive
buffer); `kernel loop` calls it N times from a compiled loop; `kernel group of 8` appends 8 records
(apart in the buffer: one pwritev) per call from the compiled loop, a connection's pipelined produces.
Rounds alternate the ways; prints the median microseconds per record of each and the ratios against
`python`, per directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from mmlog.config.settings import LogConfig  # noqa: E402
from mmlog.log import append_kernel as ak  # noqa: E402
from mmlog.log import partition_table as pt  # noqa: E402
from mmlog.log.partition import Partition  # noqa: E402
from mmlog.log.partition_table import PartitionTable  # noqa: E402
from mmlog.protocol import records as rec  # noqa: E402
from mmlog.system import libc  # noqa: E402

GROUP = 8


@njit(cache=True, nogil=True)
def _loop(rows, row, buf, spans, group, out):
    """The spans appended `group` at a time (one lock hold, one write), as a processor's loop would: the
    clock read per append."""
    failed = 0
    for i in range(0, spans.shape[0], group):
        n = min(group, spans.shape[0] - i)
        failed += ak.append(rows, row, buf, spans[i:i + n], n, libc.wall_ms(), 1, out)
    return failed


def batches(n: int, size: int, gap: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One receive buffer of n one-record batches (`gap` bytes between them, as request headers would
    be: a group is then written with pwritev), and their spans."""
    one = rec.build_batch([(b"key-0001", os.urandom(size))])
    data = np.frombuffer((bytes(one) + b"\0" * gap) * n, dtype=np.uint8).copy()
    step = len(one) + gap
    spans = np.stack([np.arange(n, dtype=np.int64) * step, np.full(n, len(one), dtype=np.int64)], axis=1)
    return data, spans


def run(way: str, directory: Path, n: int, size: int) -> float:
    """Seconds per append."""
    shutil.rmtree(directory, ignore_errors=True)
    part = Partition(directory, LogConfig())
    try:
        data, spans = batches(n, size, 40 if way.startswith("kernel group") else 0)
        if way == "python":
            bufs = [bytearray(data[s:s + k].tobytes()) for s, k in spans]
            append_many = part.append_many
            started = time.perf_counter()
            for buf in bufs:
                append_many([buf])
            return (time.perf_counter() - started) / n
        table = PartitionTable()
        row = table.fill("bench", 0, part)
        rows = table.rows
        append = ak.append
        out = np.zeros((GROUP, 3), dtype=np.int64)
        if way != "kernel":
            group = GROUP if way.startswith("kernel group") else 1
            append(rows, row, data, spans[:1], 1, libc.wall_ms(), 1, out)  # the first: groups never go first
            started = time.perf_counter()
            failed = _loop(rows, row, data, spans[1:], group, out)
            elapsed = (time.perf_counter() - started) * n / (n - 1)
        else:
            wall_ms = libc.wall_ms
            one = [spans[i:i + 1] for i in range(n)]
            started = time.perf_counter()
            failed = 0
            for span in one:
                failed += append(rows, row, data, span, 1, wall_ms(), 1, out)
            elapsed = time.perf_counter() - started
        if failed:
            raise SystemExit(f"{way}: {failed} appends fell back ({ak.REASONS[rows[row, pt.FALLBACK_REASON]]})")
        assert part.log_end_offset == n
        return elapsed / n
    finally:
        part.close(clean=False)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dirs", nargs="*", default=["/dev/shm", tempfile.gettempdir()])
    args = parser.parse_args()
    ak.warm()
    data, spans = batches(4, args.size)
    _loop(np.zeros((1, 32), dtype=np.int64), 0, data, spans, 1, np.zeros((1, 3), dtype=np.int64))
    ways = ("python", "kernel", "kernel loop", f"kernel group of {GROUP}")
    for base in args.dirs:
        work = Path(tempfile.mkdtemp(prefix="bench-append-", dir=base))
        times: dict[str, list[float]] = {way: [] for way in ways}
        try:
            for r in range(args.rounds):
                for way in (ways if r % 2 == 0 else ways[::-1]):
                    times[way].append(run(way, work / "bench-0", args.appends, args.size))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        python = statistics.median(times["python"])
        print(f"{base} ({args.appends} appends of one {args.size}-byte record, median of {args.rounds}):")
        for way in ways:
            us = statistics.median(times[way]) * 1e6
            print(f"  {way:18s} {us:7.2f} us/record   x{python * 1e6 / us:5.1f} vs python")


if __name__ == "__main__":
    main()

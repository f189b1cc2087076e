#!/usr/bin/env python3
"""Benchmark of the partition log: appends, offset lookups and sequential reads, beside raw I/O.

    python tools/bench_log.py [--records N] [--quick] [--dir DIR]

Prints a table; nothing is asserted (figures depend on the machine; tests never check
them). MB = 10^6 bytes. Every figure comes from this one run, on one Partition per
case in a fresh temporary directory (`--dir` picks the file system), with the page
cache warm: it measures the log's CPU cost, not the disk.

Appends: batches of 200-byte records (values; no keys) are built before any timer
starts, as a producer would have built them. `Partition.append` rewrites baseOffset
in place, so each append needs a fresh writable copy: the copies of a round (64 MB)
are made before the round's timer starts, and their cost is reported beside the table,
not inside the figures. Two untimed appends come first (index preallocation, first faults). The raw baseline is `os.write` of the same batch bytes to a
plain file in the same directory, timed in the same rounds, alternating which of the
two goes first. Two segment sizes: the largest allowed (2^31-1, so no roll) and the
default (1 GiB, which rolls once more than 1 GiB has been appended).

Lookups: random offsets over the 50-record-batch partition (the one with the most
batches, so the most index entries): (a) `Partition.read(offset, 1)`, the whole read
path; (b) `OffsetIndex.lookup`, the kernel with its Python wrapper; (c) the
`kernels.index_floor` kernel called once per lookup from Python; (d)
`kernels.index_floor_many` over a numpy array of targets (checked against
np.searchsorted).

Sequential reads: `Partition.read(offset, 1 MiB)` from offset 0 to the high watermark,
the bytes moved either by `os.pread` of the slice or by `os.sendfile` of the slice to
a loopback TCP connection drained by a thread; beside the same two over the raw file,
1 MiB at a time. A consumer learns the next offset by parsing the fetched bytes; here
it comes from a table made at append time, so no parsing is counted.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import os
import platform
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from mmlog.config.settings import LogConfig
from mmlog.log import Partition, kernels
from mmlog.protocol import records
from mmlog.cli.demo import value_for

MB = 1_000_000
RECORD_SIZE = 200
ROUND_BYTES = 8 * MB  # bytes appended per timed round; figures are medians over rounds
REPEATS = 5  # lookup and read figures are medians of this many repetitions
POOL_BYTES = 32 * MB  # distinct pre-built batches, cycled: content does not change the cost
FETCH_BYTES = 1 << 20
MAX_SEGMENT = 2**31 - 1
DEFAULT_SEGMENT = LogConfig().segment_bytes


def ns() -> int:
    return time.perf_counter_ns()


# ---------------------------------------------------------------- appends


@dataclass
class AppendResult:
    batch_records: int
    segment_bytes: int
    batches: int
    records: int
    bytes: int
    append_ns: list[int]  # per round
    raw_ns: list[int]
    round_bytes: list[int]
    copy_ns: int
    segments: int
    sizes: np.ndarray  # bytes of each appended batch, in order
    counts: np.ndarray  # records of each appended batch

    # Medians over rounds: another process stealing the CPU or the disk for a moment
    # (a shared machine) moves a mean; it rarely moves a median.
    @property
    def mb_s(self) -> float:
        return float(np.median([b / t for b, t in zip(self.round_bytes, self.append_ns)])) * 1e9 / MB

    @property
    def raw_mb_s(self) -> float:
        return float(np.median([b / t for b, t in zip(self.round_bytes, self.raw_ns)])) * 1e9 / MB

    @property
    def ratio(self) -> float:
        """Append rate / raw write rate, the median of the rounds' ratios."""
        return float(np.median([r / a for r, a in zip(self.raw_ns, self.append_ns)]))

    @property
    def msg_s(self) -> float:
        return self.mb_s * MB * self.records / self.bytes

    @property
    def us_per_append(self) -> float:
        return self.bytes / self.batches / (self.mb_s * MB) * 1e6


def build_pool(batch_records: int, batches: int) -> list[bytes]:
    """Distinct batches to cycle through: at most POOL_BYTES of them, at most `batches`."""
    pool: list[bytes] = []
    total = 0
    offset = 0
    while len(pool) < batches and total < POOL_BYTES:
        batch = bytes(records.build_batch([(None, value_for(offset + i, RECORD_SIZE)) for i in range(batch_records)]))
        pool.append(batch)
        total += len(batch)
        offset += batch_records
    return pool


def bench_append(directory: Path, batch_records: int, total_records: int,
                 segment_bytes: int) -> tuple[AppendResult, Partition]:
    batches = max(total_records // batch_records, 1)
    pool = build_pool(batch_records, batches)
    part = Partition(directory, LogConfig(segment_bytes=segment_bytes))
    raw_fd = os.open(directory.with_name(directory.name + ".raw"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    append_ns, raw_ns, round_bytes = [], [], []
    copy_ns = 0
    per_round = max(ROUND_BYTES // len(pool[0]), 1)
    # Two untimed appends first: the first preallocates and maps the segment's indexes
    # (2 x 10 MiB, sparse), the second writes their first entries (first-touch faults,
    # ~5 ms here); costs a log pays once per segment, not per append.
    for _ in range(2):
        part.append(bytearray(pool[0]))
        os.write(raw_fd, pool[0])
    done = 0
    sizes, counts = [len(pool[0])] * 2, [batch_records] * 2
    try:
        while done < batches:
            todo = [pool[(done + i) % len(pool)] for i in range(min(per_round, batches - done))]
            gc.collect()
            start = ns()
            copies = [bytearray(b) for b in todo]  # append writes baseOffset into its argument
            copy_ns += ns() - start
            for turn in ((0, 1) if (done // per_round) % 2 == 0 else (1, 0)):
                if turn == 0:
                    start = ns()
                    for b in todo:
                        os.write(raw_fd, b)
                    raw_ns.append(ns() - start)
                else:
                    append = part.append
                    start = ns()
                    for b in copies:
                        append(b)
                    append_ns.append(ns() - start)
            round_bytes.append(sum(len(b) for b in todo))
            sizes += [len(b) for b in todo]
            counts += [batch_records] * len(todo)
            done += len(todo)
    finally:
        os.close(raw_fd)
        os.unlink(directory.with_name(directory.name + ".raw"))  # no dirty pages left to write back
    sizes_a = np.array(sizes, dtype=np.int64)
    return AppendResult(
        batch_records, segment_bytes, batches, batches * batch_records, sum(round_bytes),
        append_ns, raw_ns, round_bytes, copy_ns, len(part.segment_bases()), sizes_a, np.array(counts, dtype=np.int64),
    ), part


# ---------------------------------------------------------------- lookups


@dataclass
class Rate:
    """A measurement repeated REPEATS times: ops (and bytes) per repetition, the time of each."""

    what: str
    ops: int
    elapsed_ns: list[int]
    bytes: int = 0
    moved: int = 0  # bytes sent, when a fetch re-sends the partial batch it ended with

    @property
    def median_ns(self) -> float:
        return float(np.median(self.elapsed_ns))

    @property
    def per_s(self) -> float:
        return self.ops / (self.median_ns / 1e9)

    @property
    def mb_s(self) -> float:
        return self.bytes / MB / (self.median_ns / 1e9)


def timed(fn, repeats: int = REPEATS) -> list[int]:
    """Run fn() `repeats` times; the nanoseconds each took."""
    out = []
    for _ in range(repeats):
        gc.collect()
        start = ns()
        fn()
        out.append(ns() - start)
    return out


def bench_lookups(part: Partition, n_read: int, n_kernel: int, n_bulk: int, seed: int = 1) -> tuple[list[Rate], str]:
    rng = np.random.default_rng(seed)
    snap = part.snapshot()
    read = part.read
    offsets = rng.integers(snap.log_start, snap.log_end, n_read).tolist()

    def full_path():
        for offset in offsets:
            read(offset, 1)

    rates = [Rate("Partition.read(offset, 1): snapshot, bisect, index, header scan", n_read, timed(full_path))]

    # The kernels over the active segment's index (the one every segment but the last is like).
    segment = part._segments[snap.active_base]  # a benchmark may look inside
    entries, n = segment.offset_index.flat, snap.index_entries
    span = snap.log_end - snap.active_base
    lookup = segment.offset_index.lookup
    absolute = (snap.active_base + rng.integers(0, span, n_kernel)).tolist()

    def wrapped():
        for offset in absolute:
            lookup(offset, n)

    rates.append(Rate("OffsetIndex.lookup: kernel + Python wrapper", n_kernel, timed(wrapped)))

    floor = kernels.index_floor
    relative = rng.integers(0, span, n_kernel).tolist()

    def per_call():
        for target in relative:
            floor(entries, n, target)

    rates.append(Rate("kernels.index_floor, one call per lookup", n_kernel, timed(per_call)))

    targets = rng.integers(0, span, n_bulk).astype(np.int64)
    out = np.empty(n_bulk, dtype=np.int64)
    rates.append(Rate(f"kernels.index_floor_many, {n_bulk:,} targets in one call", n_bulk,
                      timed(lambda: kernels.index_floor_many(entries, n, targets, out))))
    want = np.searchsorted(entries[: 2 * n : 2], targets, side="right") - 1
    agree = "agrees" if np.array_equal(out, want) else "DISAGREES"
    about = (f"{n_read:,} random offsets over {snap.log_end:,} records of the 50-record-batch log; "
             f"its index: {n:,} entries, one per {segment.file_size() // max(n, 1):,} bytes; "
             f"index_floor_many {agree} with np.searchsorted; medians of {REPEATS} runs")
    return rates, about


# ---------------------------------------------------------------- sequential reads


class OffsetTable:
    """Where each appended batch ends in the stream of all segments, and the offset after it."""

    def __init__(self, result: AppendResult, bases: list[int]) -> None:
        self.ends = np.cumsum(result.sizes)
        self.next_offsets = np.cumsum(result.counts)
        self.bases = bases
        self.starts = {b: 0 if b == 0 else int(self.ends[np.searchsorted(self.next_offsets, b)]) for b in bases}

    def next_offset(self, offset: int, position: int, size: int) -> int:
        """The offset after the last whole batch of a slice read at `offset`."""
        base = self.bases[bisect.bisect_right(self.bases, offset) - 1]
        k = int(np.searchsorted(self.ends, self.starts[base] + position + size, side="right")) - 1
        return int(self.next_offsets[k])


class Drain:
    """A loopback TCP connection whose far end a thread reads and discards."""

    def __init__(self) -> None:
        server = socket.create_server(("127.0.0.1", 0))
        self.sender = socket.create_connection(server.getsockname())
        self.receiver, _ = server.accept()
        server.close()
        self.received = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        buf = bytearray(1 << 20)
        while n := self.receiver.recv_into(buf):
            self.received += n

    def send_file(self, fd: int, position: int, size: int) -> None:
        """Resumable os.sendfile of a whole file range."""
        out = self.sender.fileno()
        while size:
            n = os.sendfile(out, fd, position, size)
            position += n
            size -= n

    def finish(self) -> int:
        self.sender.shutdown(socket.SHUT_WR)
        self.thread.join()
        self.sender.close()
        self.receiver.close()
        return self.received


def bench_reads(part: Partition, table: OffsetTable, log_bytes: int) -> list[Rate]:
    """Sequential passes over the whole log; MB/s counts each log byte once, `moved` every byte sent."""
    hw = part.high_watermark
    logs = [part.directory / f"{b:020d}.log" for b in part.segment_bases()]

    def through_partition(drain: Drain | None) -> tuple[int, int]:
        offset = fetches = moved = 0
        while offset < hw:
            s = part.read(offset, FETCH_BYTES).slice
            if drain is None:
                moved += len(s.read())
            else:
                drain.send_file(s.fileno(), s.position, s.size)
                moved += s.size
            offset = table.next_offset(offset, s.position, s.size)
            fetches += 1
        return fetches, moved

    def raw(drain: Drain | None) -> tuple[int, int]:
        fetches = moved = 0
        for path in logs:
            fd = os.open(path, os.O_RDONLY)
            size = os.fstat(fd).st_size
            for position in range(0, size, FETCH_BYTES):
                n = min(FETCH_BYTES, size - position)
                if drain is None:
                    moved += len(os.pread(fd, n, position))
                else:
                    drain.send_file(fd, position, n)
                    moved += n
                fetches += 1
            os.close(fd)
        return fetches, moved

    rates = []
    for what, walk in (("Partition.read(offset, 1 MiB) +", through_partition), ("raw", raw)):
        for how in ("os.pread", "os.sendfile to 127.0.0.1 TCP"):
            times, counted = [], (0, 0)
            for _ in range(REPEATS):
                drain = Drain() if "sendfile" in how else None
                gc.collect()
                start = ns()
                counted = walk(drain)
                if drain is not None:
                    received = drain.finish()
                    assert received == counted[1], (received, counted)
                times.append(ns() - start)
            label = f"{what} {how}" + (" of the .log files, 1 MiB at a time" if what == "raw" else " of the slice")
            rates.append(Rate(label, counted[0], times, log_bytes, moved=counted[1]))
    return rates


# ---------------------------------------------------------------- the table


def print_table(title: str, header: list[str], rows: list[list[str]], note: str = "") -> None:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print(f"\n{title}")
    if note:
        print(f"  ({note})")
    line = "  " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))
    print(line)
    print("  " + "-" * (len(line) - 2))
    for r in rows:
        print("  " + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))


def segment_label(nbytes: int) -> str:
    return {MAX_SEGMENT: "2^31-1 (max)", DEFAULT_SEGMENT: "1 GiB (default)"}.get(nbytes, str(nbytes))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None,
                        help="records per append case (default 1,000,000; 200,000 with --quick)")
    parser.add_argument("--quick", action="store_true", help="fewer records and lookups (a few seconds)")
    parser.add_argument("--dir", type=Path, default=None, help="where to make the temporary data directory")
    args = parser.parse_args(argv)
    total = args.records or (200_000 if args.quick else 1_000_000)
    n_read, n_kernel, n_bulk = (20_000, 200_000, 1_000_000) if args.quick else (100_000, 1_000_000, 4_000_000)

    kernels.warm()
    root = Path(tempfile.mkdtemp(prefix="mmlog-bench-", dir=args.dir))
    print(f"mmlog log benchmark: {total:,} records of {RECORD_SIZE} bytes per append case; "
          f"Python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; data in {root}")
    print(f"command: {' '.join([Path(sys.executable).name] + sys.argv)}")
    kept: dict[int, tuple[AppendResult, Partition]] = {}
    try:
        rows = []
        copy_ns = append_ns = copied = 0
        for segment_bytes in (MAX_SEGMENT, DEFAULT_SEGMENT):
            for batch_records in (50, 1000):
                directory = root / f"b{batch_records}-s{segment_bytes}-0"
                r, part = bench_append(directory, batch_records, total, segment_bytes)
                rows.append([
                    f"{batch_records:,} records ({r.bytes // r.batches:,} B)", segment_label(segment_bytes),
                    r.segments, len(r.round_bytes), f"{r.msg_s:,.0f}", f"{r.mb_s:,.1f}", f"{r.raw_mb_s:,.1f}",
                    f"{r.ratio:.2f}", f"{r.us_per_append:,.1f}",
                ])
                copy_ns += r.copy_ns
                append_ns += sum(r.append_ns)
                copied += r.bytes
                if segment_bytes == MAX_SEGMENT:
                    kept[batch_records] = (r, part)  # for the lookups and reads
                else:
                    part.delete()  # free the page cache before the next case
        print_table(
            "APPEND  Partition.append of pre-built batches vs os.write of the same bytes to a plain file",
            ["batch", "segment.bytes", "segments", "rounds", "msg/s", "MB/s", "raw MB/s", "append/raw", "us/append"],
            rows,
            f"medians over rounds of ~{ROUND_BYTES // MB} MB, raw and append alternating first; the fresh bytearray "
            f"copies append needs were made outside the timers ({copied / MB / (copy_ns / 1e9):,.0f} MB/s): "
            f"counting them would add {copy_ns / append_ns:.0%} to the append time",
        )

        rates, about = bench_lookups(kept[50][1], n_read, n_kernel, n_bulk)
        print_table("OFFSET LOOKUPS", ["what", "lookups/s", "ns/lookup"],
                    [[r.what, f"{r.per_s:,.0f}", f"{r.median_ns / r.ops:,.0f}"] for r in rates], about)

        read_rows = []
        for batch_records, (result, part) in kept.items():
            table = OffsetTable(result, part.segment_bases())
            for r in bench_reads(part, table, int(result.sizes.sum())):
                read_rows.append([r.what, f"{batch_records:,}", f"{r.bytes / MB:,.0f}", f"{r.moved / MB:,.0f}",
                                  f"{r.mb_s:,.0f}", f"{r.per_s:,.0f}"])
        print_table("SEQUENTIAL READS", ["what", "batch", "log MB", "sent MB", "MB/s", "fetches/s"], read_rows,
                    f"page cache warm; MB/s counts each log byte once, 'sent' also the partial batch a 1 MiB fetch "
                    f"ends with and the next one sends again; medians of {REPEATS} passes")

        ratio = kept[1000][0].ratio
        full, per_call, bulk = rates[0], rates[2], rates[3]
        print("\nTARGETS")
        print(f"  append of 1,000-record batches >= 50% of raw os.write: {ratio:.0%} "
              f"({'met' if ratio >= 0.5 else 'MISSED'})")
        for label, r in (("Partition.read, the full read path", full), ("kernels.index_floor, one call each", per_call),
                         ("kernels.index_floor_many, bulk", bulk)):
            print(f"  >= 1,000,000 lookups/s, {label}: {r.per_s:,.0f}/s ({'met' if r.per_s >= 1e6 else 'MISSED'})")
    finally:
        for _, part in kept.values():
            part.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

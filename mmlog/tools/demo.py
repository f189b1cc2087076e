"""Append records to a partition log in a temporary directory, read them all back, check every byte.

The first thing to run after `pip install -e .`: it creates a topic through the log
manager, appends RECORDS records of RECORD_SIZE bytes in batches of BATCH (the batches
are built before the clock starts: building is the producer's work, not the log's),
reads everything back through `Partition.read` one fetch of at most 1 MiB at a time,
checks the bytes against what was appended and every record's offset and value, and
prints the rates. The directory is removed afterwards unless --keep is given (then
try `mmlog dump-log` on it). Until the broker lands, this exercises the storage engine.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from mmlog.tools import CommandError

MB = 1_000_000
FETCH_BYTES = 1 << 20  # Kafka's default max.partition.fetch.bytes
# Small segments, so that the demo rolls a few and reads across segment boundaries.
DEMO_SEGMENT_BYTES = 8 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=100_000, help="records to append (default 100000)")
    parser.add_argument("--record-size", type=int, default=200, help="bytes of each record's value (default 200)")
    parser.add_argument("--batch", type=int, default=1000, help="records per batch (default 1000)")
    parser.add_argument("--segment-bytes", type=int, default=DEMO_SEGMENT_BYTES,
                        help=f"the topic's segment.bytes (default {DEMO_SEGMENT_BYTES})")
    parser.add_argument("--keep", action="store_true", help="keep the data directory and print its path")


_PATTERN = bytes(range(ord("a"), ord("z") + 1)) * 64


def value_for(offset: int, size: int) -> bytes:
    """The value of the record at `offset`: its offset in ten digits, then a pattern shifted by it."""
    head = b"%010d" % offset
    start = offset % 26
    return (head + _PATTERN[start : start + max(size - len(head), 0)])[:size]


def run(args: argparse.Namespace) -> int:
    for name in ("records", "record_size", "batch"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be at least 1", 2)
    if args.record_size > len(_PATTERN):
        raise CommandError(f"--record-size must be at most {len(_PATTERN)}", 2)

    from mmlog.log.manager import LogManager
    from mmlog.protocol import records

    data_dir = Path(tempfile.mkdtemp(prefix="mmlog-demo-"))
    manager = None
    try:
        manager = LogManager(data_dir)  # also compiles (or loads) the numba kernels
        manager.create_topic("demo", 1, {"segment.bytes": args.segment_bytes})
        part = manager.partition("demo", 0)

        batches = []
        for first in range(0, args.records, args.batch):
            count = min(args.batch, args.records - first)
            batches.append(records.build_batch([(None, value_for(first + i, args.record_size)) for i in range(count)]))
        appended = sum(len(b) for b in batches)

        start = time.perf_counter()
        for batch in batches:
            part.append(batch)  # assigns offsets in place: `batches` now holds the log's bytes
        append_s = time.perf_counter() - start

        start = time.perf_counter()
        chunks, fetches, offset = [], 0, 0
        while offset < part.high_watermark:
            got = part.read(offset, FETCH_BYTES)
            data = got.slice.read()
            whole = list(records.iter_batches(data))  # a fetch may end in part of a batch
            if not whole:
                raise CommandError(f"read at offset {offset} returned no whole batch")
            pos, last = whole[-1]
            chunks.append(memoryview(data)[: pos + last.size])
            offset = last.next_offset
            fetches += 1
        read_s = time.perf_counter() - start

        check(b"".join(chunks), b"".join(batches), args.records, args.record_size)
        segments = len(part.segment_bases())
        print(f"mmlog demo: topic 'demo' partition 0 in {data_dir} (segment.bytes {args.segment_bytes})")
        print(f"  appended {args.records} records of {args.record_size} bytes "
              f"in {_count(len(batches), 'batch', 'batches')}: "
              f"{appended / MB:.1f} MB in {append_s:.3f} s = {appended / MB / append_s:.0f} MB/s, "
              f"{args.records / append_s:,.0f} records/s")
        print(f"  read back in {_count(fetches, 'fetch', 'fetches')} of <= {FETCH_BYTES >> 20} MiB "
              f"across {_count(segments, 'segment', 'segments')}: "
              f"{read_s:.3f} s = {appended / MB / read_s:.0f} MB/s")
        print(f"  checked every byte, and every record's offset and value: ok")
    finally:
        if manager is not None:
            manager.close()
        if args.keep:
            print(f"  kept {data_dir}: try 'mmlog dump-log {data_dir / 'demo-0'}'")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    return 0


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def check(read: bytes, appended: bytes, count: int, record_size: int) -> None:
    """The log gave back exactly the appended bytes, with offsets 0..count-1 in order."""
    from mmlog.protocol import records

    if read != appended:
        at = next((i for i, (a, b) in enumerate(zip(read, appended)) if a != b), min(len(read), len(appended)))
        raise CommandError(f"read back {len(read)} bytes, appended {len(appended)}: first difference at byte {at}")
    expected = 0
    for pos, _ in records.iter_batches(read):
        for record in records.decode_records(read, pos):
            if record.offset != expected or record.value != value_for(expected, record_size):
                raise CommandError(f"record at offset {record.offset} is not the one appended as {expected}")
            expected += 1
    if expected != count:
        raise CommandError(f"read back {expected} records, appended {count}")

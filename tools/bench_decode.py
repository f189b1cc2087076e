"""The consumer's decode kernel against the floor of walking every record's varint headers twice.

    python tools/bench_decode.py [--records 1000000] [--size 200] [--batch-records 500] [--rounds 7]
    python tools/bench_decode.py --record        # and writes its section of docs/benchmarks.md
    python tools/bench_decode.py --chunk-bytes 4194304   # as fetched: 4 MiB chunks (the Spark source's)

The same fetched bytes for every row: `--records` records of `--size`-byte values (no keys, no
headers) in uncompressed v2 batches of `--batch-records` records, back to back as a Fetch answer
carries them: one chunk of them all, or (`--chunk-bytes`) chunks of whole batches of at most that
size, each decoded by its own call as a consumer decodes each fetch. Rows, each the best of `--rounds`
(the machine is shared):

  * floor: a numba kernel that walks every record's fields (length, attributes, timestamp and offset
    deltas, key, value, header count) twice over with the decoders' own record reader
    (`record_fields.at`), writing nothing: what any decoder that finds the records and then fills
    columns in a second pass costs at least;
  * decode kernel: `bulk._decode`, the one pass that fills the columns (`bulk.columns`, made for the
    scan's capacity: their allocation is counted);
  * decode_chunk: the consumer's whole call (batch-header scan, the kernel, the RecordArrays),
    without CRCs;
  * with CRCs: the same with check_crcs=True, as the consumer and the Spark source call it;
  * Spark's one pass: `direct.decode_columns`, the Spark source's decode of a chunk straight into
    Arrow's buffers (keys and values copied), in kept buffers as the source reads, CRCs not checked.

The ratio column is each row's time over the floor's: the decode kernel is meant to stay at or
below 1.0.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_decode.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from mmlog.client import bulk  # noqa: E402
from mmlog.protocol import record_fields  # noqa: E402
from mmlog.protocol import records as rec  # noqa: E402
from mmlog.protocol.wire_kernels import be_i32  # noqa: E402
from mmlog.spark import direct  # noqa: E402
from tools.bench.page import show  # noqa: E402

SECTION = "bench_decode"


@njit(cache=True, nogil=True)
def _walk(buf, end):
    """One pass over every record's fields (`record_fields.at`, as the decoders read them); a sum of what it
    read (so nothing is optimised away)."""
    total = 0
    p = 0
    while p < end:
        stop = p + 12 + be_i32(buf, p + 8)
        count = be_i32(buf, p + 57)
        q = p + rec.HEADER_SIZE
        for _ in range(count):
            q, ts_delta, off_delta, klen, _, vlen, _, hcount, _ = record_fields.at(buf, q, stop)
            if q < 0:  # as a decoder stops at a record that does not parse
                return -1
            total += ts_delta + off_delta + vlen + klen + hcount
        p = stop
    return total


@njit(cache=True, nogil=True)
def floor_kernel(buf, end):
    """The floor: every record's varint headers walked twice."""
    return _walk(buf, end) + _walk(buf, end)


def chunk(records: int, size: int, per_batch: int) -> bytes:
    """`records` values of `size` bytes in v2 batches of `per_batch` records, offsets 0.. in order."""
    value = (bytes(range(256)) * (size // 256 + 1))[:size]
    one = bytes(rec.build_batch([(None, value)] * per_batch, base_timestamp=1_700_000_000_000))
    whole, rest = divmod(records, per_batch)
    out = bytearray(one * whole)
    for i in range(whole):  # each batch its own base offset (CRCs are left as built: not checked here)
        out[i * len(one):i * len(one) + 8] = (i * per_batch).to_bytes(8, "big")
    if rest:
        out += rec.build_batch([(None, value)] * rest, base_offset=whole * per_batch,
                               base_timestamp=1_700_000_000_000)
    return bytes(out)


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200, help="value bytes per record")
    ap.add_argument("--batch-records", type=int, default=500, help="records per v2 batch")
    ap.add_argument("--rounds", type=int, default=7, help="timings per row; the best is shown")
    ap.add_argument("--chunk-bytes", type=int, default=0, help="decode chunks of at most this many bytes "
                                                               "(default: one chunk of every record)")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    command = " ".join(["python tools/bench_decode.py", *(sys.argv[1:] if argv is None else argv)])
    data = chunk(args.records, args.size, args.batch_records)
    batch_bytes = len(chunk(args.batch_records, args.size, args.batch_records))
    per = max(1, args.chunk_bytes // batch_bytes) * batch_bytes if args.chunk_bytes else len(data)
    chunks = [data[i:i + per] for i in range(0, len(data), per)]
    bufs = [np.frombuffer(c, np.uint8) for c in chunks]
    scans = [bulk.scan_chunk(c, 0) for c in chunks]
    assert all(s.status == bulk.OK and s.end == len(c) for s, c in zip(scans, chunks))
    assert sum(s.capacity for s in scans) == args.records
    skip = np.empty(0, np.int64)
    bulk.warm()
    arrays = [bulk.decode_chunk(c, 0, check_crcs=False) for c in chunks]
    assert sum(map(len, arrays)) == args.records and int(arrays[-1].offsets[-1]) == args.records - 1
    assert min(int(a.value_lengths.min()) for a in arrays) == args.size
    del arrays

    kept = direct.Kept.new()

    def each(fn):
        """Every chunk through fn, each result dropped before the next call, as a reader drops a chunk's
        columns once it has handed them on (kept buffers are then taken again, not made afresh)."""
        def run():
            for i in range(len(chunks)):
                fn(i)
        return run

    rows = [
        ("floor: every record's fields walked twice", each(lambda i: floor_kernel(bufs[i], len(bufs[i])))),
        ("decode kernel (`bulk._decode`, its columns made)",
         each(lambda i: bulk._decode(bufs[i], 0, len(bufs[i]), 0, skip, *bulk.columns(scans[i].capacity)))),
        ("decode_chunk (scan, kernel, RecordArrays)", each(lambda i: bulk.decode_chunk(chunks[i], 0))),
        ("decode_chunk with CRCs", each(lambda i: bulk.decode_chunk(chunks[i], 0, check_crcs=True))),
        ("Spark's one pass (`direct.decode_columns`, values copied)",
         each(lambda i: direct.decode_columns(chunks[i], 0, 1 << 62, scans[i], None, kept))),
    ]
    floor_kernel(bufs[0], len(bufs[0]))
    times = {}
    for r in range(args.rounds):  # interleaved rounds: a busy moment hits every row alike
        for name, fn in rows:
            times[name] = min(times.get(name, float("inf")), best(fn, 1))
    floor = times[rows[0][0]]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "## The consumer's decode kernel against its floor", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end {load}): "
        f"{args.records:,} records of {args.size} bytes in uncompressed v2 batches of {args.batch_records:,} "
        f"({len(data) / 1e6:,.1f} MB) in {len(chunks):,} chunk(s) of up to {per / 1e6:,.1f} MB, the same bytes "
        f"for every row; best of {args.rounds} interleaved rounds.", "",
        "| row | ms | ns / record | M records/s | / floor |",
        "| --- | ---: | ---: | ---: | ---: |"]
    for name, _ in rows:
        t = times[name]
        lines.append(f"| {name} | {t * 1e3:.2f} | {t * 1e9 / args.records:.2f} | {args.records / t / 1e6:.1f} "
                     f"| {t / floor:.2f} |")
    show("\n".join(lines), SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

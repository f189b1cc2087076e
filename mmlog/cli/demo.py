"""Start a broker on the embedded default, produce records, consume them back, check every byte.

The first thing to run after `pip install -e .`: it starts `mmlog broker` (no
ZooKeeper, a temporary data directory, a free port on 127.0.0.1, two processors),
creates a topic over the Kafka protocol, produces RECORDS records of RECORD_SIZE
bytes in batches of BATCH with acks=1 (batches are built before the clock starts:
building is the producer's work), fetches everything back at most 1 MiB at a time,
checks the bytes against what was produced and every record's offset and value,
prints the rates and stops the broker (SIGTERM; it must exit 0). The directory is
removed afterwards unless --keep is given (then try `mmlog dump-log` on it).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from mmlog.cli import CommandError

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
    parser.add_argument("--schemas", action="store_true",
                        help="also serve the schema registry and round-trip Avro records through it")


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

    from mmlog.client.connection import BrokerConnection
    from mmlog.protocol import records
    from mmlog.testing import EmbeddedBroker

    data_dir = Path(tempfile.mkdtemp(prefix="mmlog-demo-"))
    # A fresh install's first broker compiles the numba kernels into their cache (about 40 s of CPU;
    # minutes on a busy machine): wait that out rather than fail the new user's first command.
    config = {"schema.registry.listeners": "http://127.0.0.1:0"} if args.schemas else None
    broker = EmbeddedBroker(data_dir / "data", processors=2, ready_timeout=600, config=config)
    try:
        started = time.perf_counter()
        broker.start()
        print(f"mmlog demo: broker on {broker.bootstrap} (embedded default, data in {broker.data_dir}), "
              f"ready in {time.perf_counter() - started:.1f} s")
        host, port = broker.bootstrap.rsplit(":", 1)
        with BrokerConnection(host, int(port), client_id="mmlog-demo") as conn:
            create_topic(conn, args.segment_bytes)
            batches = [records.build_batch([(None, value_for(first + i, args.record_size))
                                            for i in range(min(args.batch, args.records - first))])
                       for first in range(0, args.records, args.batch)]
            produced = sum(len(b) for b in batches)
            start = time.perf_counter()
            produce_all(conn, batches)
            produce_s = time.perf_counter() - start
            start = time.perf_counter()
            read, fetches = fetch_all(conn, args.records)
            fetch_s = time.perf_counter() - start
        check(read, b"".join(batches), args.records, args.record_size)
        print(f"  produced {args.records} records of {args.record_size} bytes "
              f"in {_count(len(batches), 'batch', 'batches')} (acks=1): "
              f"{produced / MB:.1f} MB in {produce_s:.3f} s = {args.records / produce_s:,.0f} records/s")
        print(f"  consumed them in {_count(fetches, 'fetch', 'fetches')} of <= {FETCH_BYTES >> 20} MiB: "
              f"{fetch_s:.3f} s = {produced / MB / fetch_s:.0f} MB/s")
        print("  checked every byte, and every record's offset and value: ok")
        if args.schemas:
            from mmlog.cli.demo_schemas import round_trip
            round_trip(broker.bootstrap, broker.registry_urls[0])
    finally:
        code = broker.stop()
        if args.keep:
            print(f"  kept {data_dir}: try 'mmlog dump-log {broker.data_dir / 'demo-0'}'")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    if code != 0:
        raise CommandError(f"the broker exited with {code}")
    print("  broker stopped cleanly")
    return 0


def create_topic(conn, segment_bytes: int) -> None:
    from mmlog.protocol.messages import create_topics

    body = conn.request(create_topics.API_KEY, 4, create_topics.REQUEST(timeout_ms=30000, topics=[{
        "name": "demo", "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": "segment.bytes", "value": str(segment_bytes)}]}]))
    if body.topics[0].error_code:
        raise CommandError(f"CreateTopics failed: error {body.topics[0].error_code} {body.topics[0].error_message}")


def produce_all(conn, batches: list, window: int = 8) -> None:
    """Produce every batch (pipelined, `window` in flight); write the assigned base offsets into our copies."""
    from mmlog.protocol import records
    from mmlog.protocol.messages import produce

    def settle(batch) -> None:
        result = conn.receive().responses[0].partition_responses[0]
        if result.error_code:
            raise CommandError(f"produce failed: error {result.error_code} {result.error_message or ''}")
        records.set_base_offset(batch, result.base_offset)

    inflight = []
    for batch in batches:
        conn.send(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=30000, topic_data=[
            {"name": "demo", "partition_data": [{"index": 0, "records": batch}]}]))
        inflight.append(batch)
        if len(inflight) >= window:
            settle(inflight.pop(0))
    for batch in inflight:
        settle(batch)


def fetch_all(conn, count: int) -> tuple[bytes, int]:
    """Fetch offsets 0..count-1; return the whole batches' bytes and how many fetches it took."""
    from mmlog.protocol import records
    from mmlog.protocol.messages import fetch

    chunks, fetches, offset = [], 0, 0
    while offset < count:
        body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
            max_wait_ms=500, min_bytes=1, max_bytes=FETCH_BYTES, topics=[{"topic": "demo", "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": FETCH_BYTES}]}]))
        part = body.responses[0].partitions[0]
        if part.error_code:
            raise CommandError(f"fetch at offset {offset} failed: error {part.error_code}")
        data = bytes(part.records)
        whole = list(records.iter_batches(data))  # a fetch may end in part of a batch
        if not whole:
            raise CommandError(f"fetch at offset {offset} returned no whole batch")
        pos, last = whole[-1]
        chunks.append(data[: pos + last.size])
        offset = last.next_offset
        fetches += 1
    return b"".join(chunks), fetches


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

"""`mmlog perf consume`: read a topic from the beginning as fast as the consumer can, and report the rate.

Assigns every partition of --topic (the consumer's own fetch pipeline: one Fetch
in flight per broker), seeks to the beginning and reads --records records (by
default, everything the topic held when the run started). `--api iter` counts
records through the per-record iterator (a ConsumerRecord per record, its value
touched); `--api bulk` through `poll_batch` (numpy columns per fetched chunk, no
object per record). MB are key and value bytes.
"""

from __future__ import annotations

import argparse
import threading
import time

from mmlog.cli import CommandError, client_security

MiB = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument("--records", type=int, metavar="N",
                        help="records to read (default: all the topic holds at the start)")
    parser.add_argument("--api", choices=["iter", "bulk"], default="iter",
                        help="iter: a ConsumerRecord per record; bulk: numpy arrays per chunk (default iter)")
    parser.add_argument("--fetch-max-bytes", type=int, default=50 * MiB, metavar="BYTES",
                        help="max bytes per fetch response (default 50 MiB)")
    parser.add_argument("--max-partition-fetch-bytes", type=int, default=1 * MiB, metavar="BYTES",
                        help="max bytes per partition per fetch (default 1 MiB)")
    parser.add_argument("--no-check-crcs", dest="check_crcs", action="store_false",
                        help="skip the CRC-32C check of every batch (the consumer's default is to check)")
    parser.add_argument("--timeout-ms", type=int, default=10_000, metavar="MS",
                        help="fail when no record arrives for MS milliseconds (default 10000)")


def run(args: argparse.Namespace) -> int:
    for name in ("fetch_max_bytes", "max_partition_fetch_bytes", "timeout_ms"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 1", 2)
    if args.records is not None and args.records < 1:
        raise CommandError("--records must be >= 1", 2)

    from mmlog.client.consumer import Consumer
    from mmlog.cli.progress import Progress, summary

    # Consumer() loads (or compiles) the bulk kernels: before the clock starts
    with Consumer(args.bootstrap, auto_offset_reset="earliest", client_id="mmlog-perf",
                  fetch_max_bytes=args.fetch_max_bytes, max_partition_fetch_bytes=args.max_partition_fetch_bytes,
                  check_crcs=args.check_crcs, request_timeout_ms=args.timeout_ms, **client_security(args)) as consumer:
        tps = [(args.topic, p) for p in sorted(consumer.partitions_for(args.topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        target = args.records
        if target is None:
            starts = consumer.beginning_offsets(tps)
            target = sum(end - starts[tp] for tp, end in consumer.end_offsets(tps).items())
            if target == 0:
                raise CommandError(f"topic {args.topic!r} is empty (give --records to wait for new ones)")
        progress = Progress(f"consume {args.api}")
        step = bulk_step if args.api == "bulk" else iter_step
        records, nbytes = step(consumer, target, progress, args.timeout_ms / 1000)
        seconds = progress.done()
    print(summary(f"consumed ({args.api})", records, nbytes, seconds))
    return 0


def bulk_step(consumer, target: int, progress, idle: float) -> tuple[int, int]:
    records = nbytes = 0
    last = time.monotonic()
    while records < target:
        chunks = consumer.poll_batch(0.5)
        if not chunks:
            _check_idle(last, idle, records, target)
            continue
        last = time.monotonic()
        for arrays in chunks:
            take = min(len(arrays), target - records)  # the last chunk may hold more than asked for
            records += take
            nbytes += arrays.nbytes if take == len(arrays) else int(
                arrays.value_lengths[:take].clip(0).sum() + arrays.key_lengths[:take].clip(0).sum())
            if records >= target:
                break
        progress.update(records, nbytes)
    progress.update(records, nbytes, force=True)
    return records, nbytes


def iter_step(consumer, target: int, progress, idle: float) -> tuple[int, int]:
    from mmlog.client.consumer import WakeupError

    records = nbytes = 0
    seen = [0]  # records at the last progress update, read by the watchdog
    stop = threading.Event()

    def watchdog() -> None:  # the iterator blocks for ever: wake it if the stream stalls
        last, at = -1, time.monotonic()
        while not stop.wait(min(idle, 0.5)):
            if seen[0] != last:
                last, at = seen[0], time.monotonic()
            elif time.monotonic() - at > idle:
                consumer.wakeup()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        for record in consumer:
            records += 1
            value = record.value
            if value is not None:
                nbytes += len(value)
            if record.key is not None:
                nbytes += len(record.key)
            if records & 0x3FFF == 0:
                progress.update(records, nbytes)
                seen[0] = records
            if records >= target:
                break
    except WakeupError:
        _check_idle(float("-inf"), idle, records, target)
    finally:
        stop.set()
    progress.update(records, nbytes, force=True)
    return records, nbytes


def _check_idle(last: float, idle: float, records: int, target: int) -> None:
    if time.monotonic() - last > idle:
        raise CommandError(f"no record for {idle:g} s after {records:,} of {target:,}")

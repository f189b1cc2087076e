"""Produce records as fast as possible (or at --rate) and report msg/s, MB/s and latency.

    mmlog perf produce --topic T --records N [--record-size 200] [--batch-size 50] [--acks 1]
                       [--rate R] [--api send|send_many] [--await-each] [--bootstrap HOST:PORT]

--batch-size counts records, as in the Kafka paper's experiments: "batch 1" puts
every record in a request of its own, "batch 50" fifty records in each. With
--api send, records go one `Producer.send()` call at a time (the producer closes a
batch at --batch-size records, or after --linger-ms); with --api send_many, in
calls of --chunk records built from one numpy array (batches still cut at
--batch-size records).

With --acks 0 (the paper's producer test: its Kafka producer did not wait for
acknowledgements) nothing is acknowledged, so the clock stops only when ListOffsets
shows the topic's end offsets grown by every record sent (exit 1 if they do not
within --timeout), not when the last request left the socket.

With --await-each, every `send()` is awaited (`get()`) before the next: one record a request, one
request in flight, linger 0 unless --linger-ms says otherwise; the rate is then one synchronous
produce's round trip, and latency is timed for every record.

Latency is send -> acknowledgement: for --api send, of one record in every
`records / 10,000` (a timestamp per record would slow the loop it measures); for
send_many, of each call, counted once per record. Without --rate the producer is
kept as busy as its buffer allows, so latency then includes time queued in it.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from mmlog.cli import TIMEOUT, CommandError, client_security

SAMPLES = 10_000  # latency samples at most, for --api send (each keeps a future, and its batch, alive)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="topic to produce to (auto-created if the broker allows it)")
    parser.add_argument("--records", type=int, default=1_000_000, metavar="N", help="records to send (default 1,000,000)")
    parser.add_argument("--record-size", type=int, default=200, metavar="BYTES", help="value size (default 200)")
    parser.add_argument("--batch-size", type=int, default=50, metavar="RECORDS",
                        help="records per batch, i.e. per produce request for one partition (default 50)")
    parser.add_argument("--batch-bytes", type=int, default=None, metavar="BYTES",
                        help="close batches at this size too (default: room for exactly --batch-size records)")
    parser.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"],
                        help="acknowledgements (default 1; 0 is the paper's producer, and the run then "
                             "lasts until ListOffsets shows every record in the log)")
    parser.add_argument("--rate", type=float, default=0, metavar="MSG/S", help="target rate (default: as fast as possible)")
    parser.add_argument("--api", default="send", choices=["send", "send_many"],
                        help="one Producer.send() per record (default), or send_many() of --chunk records")
    parser.add_argument("--chunk", type=int, default=10_000, metavar="RECORDS",
                        help="records per send_many call (default 10,000)")
    parser.add_argument("--await-each", action="store_true",
                        help="await every send() before the next (one record a request; --api send only)")
    parser.add_argument("--linger-ms", type=float, default=None, metavar="MS",
                        help="producer linger (default 5; 0 with --await-each)")
    parser.add_argument("--max-in-flight", type=int, default=5, metavar="N", help="requests in flight per connection (default 5)")
    parser.add_argument("--partition", type=int, default=None, metavar="P", help="send to one partition (default: sticky)")
    TIMEOUT.add(parser)
    parser.add_argument("--quiet", action="store_true", help="no live progress")


def run(args: argparse.Namespace) -> int:
    for name in ("records", "record_size", "batch_size", "chunk", "max_in_flight", "batch_bytes"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 1", 2)
    if args.rate < 0:
        raise CommandError("--rate must be >= 0", 2)
    if args.await_each and args.api != "send":
        raise CommandError("--await-each takes --api send", 2)
    if args.linger_ms is None:
        args.linger_ms = 0.0 if args.await_each else 5.0
    import io

    from mmlog.cli.progress import Progress, summary
    from mmlog.client.producer import Producer

    # batch_size in bytes: room for exactly --batch-size records (the producer counts 12 bytes a record)
    batch_bytes = args.batch_bytes or min(args.batch_size * (args.record_size + 32) + 61, 1_000_000)
    try:
        producer = Producer(args.bootstrap, acks=args.acks, linger_ms=args.linger_ms, batch_size=batch_bytes,
                            max_batch_records=args.batch_size, max_in_flight=args.max_in_flight,
                            request_timeout_ms=args.timeout * 1000, max_block_ms=args.timeout * 1000,
                            client_id="mmlog-perf", **client_security(args))
    except ValueError as exc:
        raise CommandError(str(exc), 2) from None
    with producer:
        producer.partitions_for(args.topic)  # metadata (and auto-creation) before the clock starts
        # warm up: load the kernels and open the connection
        producer.send(args.topic, b"w" * args.record_size, partition=args.partition).get(args.timeout)
        if args.api == "send_many":
            from mmlog.client import encode

            encode.warm(bulk=True)
        stored = _StoredCount(args) if args.acks == "0" else None  # acks=0: the log is the only witness
        # What is allocated so far (numba's and the interpreter's 100,000+ objects) outlives the
        # measurement: keep the garbage collector from scanning it again at every full collection
        # (45 ms each, several a run) while it measures.
        gc.freeze()
        try:
            progress = Progress("produce", stream=None if not args.quiet else io.StringIO())
            run_fn = _run_awaited if args.await_each else _run_send if args.api == "send" else _run_send_many
            latencies = run_fn(producer, args, progress)  # flushed: every record acknowledged (or written)
            landed = stored.wait_for(args.records, args.timeout) if stored else None  # the clock runs on
            progress.update(args.records, args.records * args.record_size, force=True)
            seconds = progress.done()
        finally:
            gc.unfreeze()
            if stored:
                stored.close()
    print(f"produce {args.records:,} x {args.record_size} B to {args.topic}: api {args.api}"
          + (", each awaited" if args.await_each else "") + ", batch "
          f"{args.batch_size} records / {batch_bytes:,} bytes, linger {args.linger_ms:g} ms, acks {args.acks}, "
          f"max in flight {args.max_in_flight}"
          + (f", rate {args.rate:,.0f}/s" if args.rate else ""))
    print(summary("produce", args.records, args.records * args.record_size, seconds,
                  latencies if args.acks != "0" else None))
    if landed is not None:
        if landed < args.records:
            print(f"  acks 0: only {landed:,} of {args.records:,} records reached the log")
            return 1
        print(f"  acks 0: all {args.records:,} records reached the log (end offsets grew by {landed:,}; "
              "the time above runs until they had)")
    return 0


class _StoredCount:
    """Records appended to the topic (--partition alone, if given) since this was made, by ListOffsets."""

    def __init__(self, args) -> None:
        from mmlog.client.admin import Admin

        self.admin = Admin(args.bootstrap, client_id="mmlog-perf", **client_security(args))
        self.topic, self.partition = args.topic, args.partition
        self.before = self._end()

    def _end(self) -> int:
        ends = self.admin.latest_offsets(self.topic)
        return ends[self.partition] if self.partition is not None else sum(ends.values())

    def wait_for(self, count: int, timeout: float) -> int:
        """Poll until `count` records are there or `timeout` passes; how many are."""
        deadline = time.monotonic() + timeout
        while (landed := self._end() - self.before) < count and time.monotonic() < deadline:
            time.sleep(0.002)
        return landed

    def close(self) -> None:
        self.admin.close()


def _pace(args, progress, sent: int) -> None:
    """Sleep while ahead of --rate; update the progress line."""
    if args.rate:
        ahead = sent / args.rate - (time.perf_counter() - progress.start)
        if ahead > 0:
            time.sleep(ahead)
    progress.update(sent, sent * args.record_size)


def _run_send(producer, args, progress) -> np.ndarray:
    value = b"x" * args.record_size
    topic, partition, n = args.topic, args.partition, args.records
    every = max(1, n // SAMPLES)
    step = every if not args.rate else max(1, min(every, int(args.rate // 1000) or 1))
    send = producer.send
    sampled = []
    monotonic = time.monotonic
    sent = 0
    while sent < n:
        m = min(step, n - sent)
        t = monotonic()
        sampled.append((t, send(topic, value, partition=partition)))
        for _ in range(m - 1):
            send(topic, value, partition=partition)
        sent += m
        _pace(args, progress, sent)
    producer.flush()
    return np.array([(f.acked_at - t) * 1000 for t, f in sampled if f.acked_at is not None])


def _run_awaited(producer, args, progress) -> np.ndarray:
    """Each record's send() awaited before the next: what one synchronous produce costs, every one timed."""
    value = b"x" * args.record_size
    topic, partition, timeout = args.topic, args.partition, args.timeout
    send, monotonic = producer.send, time.monotonic
    took = np.empty(args.records)
    for i in range(args.records):
        t = monotonic()
        send(topic, value, partition=partition).get(timeout)
        took[i] = monotonic() - t
        if args.rate or i % 1000 == 999:  # paced record by record; else the progress line now and then
            _pace(args, progress, i + 1)
    return took * 1000


def _run_send_many(producer, args, progress) -> np.ndarray:
    chunk = min(args.chunk, args.records)
    values = np.frombuffer(b"x" * (args.record_size * chunk), dtype=np.uint8).reshape(chunk, args.record_size)
    calls = []
    sent = 0
    monotonic = time.monotonic
    while sent < args.records:
        m = min(chunk, args.records - sent)
        t = monotonic()
        future = producer.send_many(args.topic, values[:m], partition=args.partition)
        calls.append((t, m, future))
        sent += m
        _pace(args, progress, sent)
    producer.flush()
    lat = np.array([(f.acked_at - t) * 1000 for t, _, f in calls if f.acked_at is not None])
    counts = np.array([m for _, m, f in calls if f.acked_at is not None])
    return np.repeat(lat, counts)

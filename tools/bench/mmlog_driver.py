"""mmlog under the paper's tests: its own Producer and Consumer against an EmbeddedBroker.

Producer: `Producer.send()` one record a call, every request closed at exactly
`batch` records (`max_batch_records`; batch 1 = one record per Produce request),
up to 5 requests in flight, `flush()` at the end; batch 50 also through
`send_many()` (numpy columns, 10,000 records a call). Each batch size runs with
acks=1 (every request answered after its append: the baseline) and acks=0, the
paper's configuration ("the Kafka producer currently doesn't wait for
acknowledgements from the broker") and RabbitMQ's without confirms. An acks=0 run
ends, as RabbitMQ's does, only when the broker holds every record (ListOffsets
polled after the flush), not when the last one left the socket. The figure plots
acknowledgements (the futures' `acked_at`), not records queued in the
producer's 32 MB buffer. The broker (2 processors) fsyncs every
second (`log.flush.interval.ms=1000`), the "asynchronous flush" of the paper and
of Redis's appendfsync everysec. Consumer: one `Consumer` reading the batch-50
topic from the beginning with 200 KB fetches (about 950 records), record by
record through the iterator and in numpy columns through `poll_batch()`.
"""

from __future__ import annotations

import struct
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tools.bench.common import MESSAGE_SIZE, ClientProcess, Meter, Result, Rows, payload, timed

SYSTEM = "mmlog"
PAPER_ACKS = "acks=0 (the paper's)"  # the variant text of the runs configured as the paper's producer
CHUNK = 1000  # send() calls between two looks at the clock
BULK_CHUNK = 10_000  # records per send_many() call


# A first run from a fresh clone compiles the kernels before the broker is ready (about a minute on 2 cores)
COLD_START_S = 300.0


def server(workdir: Path, processors: int = 2, flush_ms: int | None = 1000):
    """An EmbeddedBroker in `workdir/mmlog`, fsyncing every `flush_ms` (None: the broker's default, no
    time-based fsync, as Kafka's)."""
    from mmlog.testing import EmbeddedBroker

    return EmbeddedBroker(Path(workdir) / "mmlog", processors=processors, ready_timeout=COLD_START_S,
                          config={} if flush_ms is None else {"log.flush.interval.ms": flush_ms})


def _producer(bootstrap: str, batch: int, acks, linger_ms: float = 5.0, max_in_flight: int = 5):
    from mmlog.client.producer import Producer

    # batch_size in bytes: room for exactly `batch` records (as `mmlog perf produce` sizes it)
    batch_bytes = min(batch * (MESSAGE_SIZE + 32) + 61, 1 << 20)
    return Producer(bootstrap, acks=acks, linger_ms=linger_ms, batch_size=batch_bytes, max_batch_records=batch,
                    max_in_flight=max_in_flight, client_id="mmlog-bench")


def produce(bootstrap: str, topic: str, messages: int, batch: int, api: str = "send", acks: int = 1,
            ready=None, go=None) -> dict:
    """Client process: `messages` records of MESSAGE_SIZE bytes to `topic` as fast as the producer takes them.
    Warmed up, it sets `ready` and waits for `go` (so that a profiler attaches to the measured part only)."""
    value = payload()
    with _producer(bootstrap, batch, acks) as producer:
        producer.partitions_for(topic)  # metadata and auto-creation before the clock starts
        producer.send(topic, value).get(30)  # and a connection, and the encoder's kernels
        if api == "send_many":
            from mmlog.client import encode

            encode.warm(bulk=True)
            values = np.frombuffer(value * BULK_CHUNK, np.uint8).reshape(BULK_CHUNK, MESSAGE_SIZE)
        if ready is not None:
            ready.set()
            go.wait()
        meter = Meter()
        send, send_many, sent, last, marks = producer.send, producer.send_many, 0, None, []
        while sent < messages:
            if api == "send_many":
                m = min(BULK_CHUNK, messages - sent)
                last = send_many(topic, values[:m])
            else:
                m = min(CHUNK, messages - sent)
                for _ in range(m):  # the per-record API is what this test measures
                    last = send(topic, value)
            sent += m
            marks.append((last, sent))
        producer.flush()
        (last.result if api == "send_many" else last.get)(30)  # raises if the last batch failed
        if acks == 0:
            _wait_until_stored(bootstrap, topic, messages + 1)  # and the warm-up record
        result = meter.result(messages)
        # the figure's points: when the last record of every chunk was acknowledged, not when it was queued
        result["samples"] = [(0.0, 0)] + sorted((f.acked_at - meter.start, n) for f, n in marks)
        return result


def produce_awaited(bootstrap: str, topic: str, messages: int, ready, go, acks: int = 1) -> dict:
    """Client process: `messages` records to `topic`, each `send()` awaited before the next (one record a
    request, one request in flight): the cost of one request, end to end."""
    return timed(awaited(bootstrap, topic, acks), messages, ready, go)


@contextmanager
def awaited(bootstrap: str, topic: str, acks: int = 1):
    """mmlog's producer at linger 0 and one request in flight (connected, the topic's metadata known):
    `send(n)` sends n records, each `send().get()` before the next."""
    value = payload()
    with _producer(bootstrap, 1, acks, linger_ms=0, max_in_flight=1) as producer:
        producer.partitions_for(topic)

        def send(n: int) -> None:
            send_ = producer.send
            for _ in range(n):
                send_(topic, value).get(30)

        send(1)
        yield send


def _wait_until_stored(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> None:
    """acks=0: poll the topic's end offsets until they add up to `count` (ClientFailed after `timeout`)."""
    from mmlog.client.admin import Admin

    deadline = time.monotonic() + timeout
    with Admin(bootstrap, client_id="mmlog-bench") as admin:
        while (stored := sum(admin.latest_offsets(topic).values())) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"acks=0: {topic} holds {stored:,} of {count:,} records after {timeout:g} s")
            time.sleep(0.002)


def consume(bootstrap: str, topic: str, messages: int, api: str, fetch_bytes: int, ready=None, go=None) -> dict:
    """Client process: read `messages` records of `topic` from the beginning, `fetch_bytes` a fetch (connected,
    it sets `ready` and waits for `go`, when given)."""
    from mmlog.client.consumer import Consumer

    with Consumer(bootstrap, auto_offset_reset="earliest", client_id="mmlog-bench", fetch_max_bytes=fetch_bytes,
                  max_partition_fetch_bytes=fetch_bytes) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        consumer.position((topic, 0))
        if ready is not None:
            ready.set()
            go.wait()
        n = nbytes = 0
        meter = Meter()
        if api == "bulk":
            while n < messages:
                for arrays in consumer.poll_batch(1.0):
                    n += len(arrays)
                    nbytes += arrays.nbytes
                meter.tick(n)
        else:
            for record in consumer:  # the record-by-record path, each value touched
                n += 1
                nbytes += len(record.value)
                if not n & 1023:
                    meter.tick(n)
                if n >= messages:
                    break
        return meter.result(n, nbytes)


def _timestamps(arrays) -> np.ndarray:
    """The send times (monotonic ns) in the first 8 bytes of every value of a chunk, without a loop."""
    buf = np.frombuffer(arrays.buffer, np.uint8)
    at = arrays.value_starts[:, None] + np.arange(8)
    return buf[at].copy().view("<i8").ravel()


def latency_producer(bootstrap: str, topic: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` records at `rate` a second, acks=1, linger 0, each stamped with its send time."""
    from tools.bench.latency import paced

    pad = payload(MESSAGE_SIZE - 8)
    with _producer(bootstrap, 1000, 1, linger_ms=0) as producer:
        producer.send(topic, bytes(8) + pad).get(30)  # stamp 0: the consumer's sign of life
        created.set()
        go.wait()
        stamp, now, send = struct.Struct("<q").pack, time.monotonic_ns, producer.send

        def burst(n: int) -> None:
            for _ in range(n):
                send(topic, stamp(now()) + pad)

        achieved = paced(burst, rate, count)
        producer.flush()
    return {"achieved": achieved}


def latency_consumer(bootstrap: str, topic: str, count: int, ready) -> np.ndarray:
    """Client process: long-poll `topic` and return send -> receipt in ms for `count` stamped records."""
    from mmlog.client.consumer import Consumer
    from tools.bench.latency import elapsed_ms

    got, out = 0, []
    with Consumer(bootstrap, auto_offset_reset="earliest", client_id="mmlog-bench-latency",
                  fetch_max_wait_ms=500) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        while got < count:
            for arrays in consumer.poll_batch(1.0):
                out.append(elapsed_ms(time.monotonic_ns(), _timestamps(arrays)))
                got += len(out[-1])
                ready.set()
    return np.concatenate(out)[:count]


def bench(cfg, workdir: Path, log) -> tuple[list[Result], list]:
    """Every mmlog test of the run, against one broker."""
    from tools.bench import latency, profile

    results = Rows(SYSTEM, log)
    with server(workdir) as broker:
        boot = broker.bootstrap
        # (variant, batch, api, messages, acks, baseline); the consumer test reads "produce-send-50"
        runs = [("send(), batch 1, acks=1", 1, "send", cfg.batch1_messages, 1, True),
                (f"send(), batch 1, {PAPER_ACKS}", 1, "send", cfg.batch1_messages, 0, False),
                ("send(), batch 50, acks=1", 50, "send", cfg.messages, 1, True),
                (f"send(), batch 50, {PAPER_ACKS}", 50, "send", cfg.messages, 0, False),
                ("send_many(), batch 50, acks=1", 50, "send_many", cfg.messages, 1, False)]
        for variant, batch, api, n, acks, baseline in runs:
            ready, go = ClientProcess._ctx.Event(), ClientProcess._ctx.Event()
            topic = f"produce-{api}-{batch}" + ("-acks0" if acks == 0 else "")
            client = ClientProcess(produce, boot, topic, n, batch, api, acks, ready, go)
            client.wait_for(ready, 120, "warm-up")
            with profile.maybe(cfg, f"mmlog-{topic}", client.pid, broker.processor_pids(), log):
                go.set()
                r = client.result(cfg.timeout(n))
            results.add("produce", variant, batch, r, baseline=baseline)
        for variant, api, baseline in (("iterator", "iter", True), ("poll_batch() bulk", "bulk", False)):
            r = ClientProcess(consume, boot, "produce-send-50", cfg.messages, api, cfg.fetch_bytes).result(
                cfg.timeout(cfg.messages))
            results.add("consume", f"{variant}, {cfg.fetch_bytes // 1000} KB fetches", None, r, baseline=baseline)
        lat = latency.measure(SYSTEM, "acks=1, linger 0; poll_batch() long poll", latency_producer,
                              latency_consumer, (boot, "latency"), cfg, log)
    return results, [lat]

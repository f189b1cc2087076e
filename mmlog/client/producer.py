"""The producer: records in, batches out, futures back.

    from mmlog import Producer

    with Producer("127.0.0.1:9092", linger_ms=5) as producer:
        future = producer.send("clicks", b"payload", key=b"user-42")
        producer.send("clicks", "text is sent as utf-8", headers=[("trace", b"abc")],
                      callback=lambda md, exc: print(md or exc))
        print(future.get(timeout=10))      # RecordMetadata(topic, partition, offset, timestamp)

        values = numpy.zeros((100_000, 200), dtype=numpy.uint8)   # 100,000 values of 200 bytes
        producer.send_many("clicks", values).result(timeout=30)   # BulkMetadata: partitions, offsets

How it works (each piece has its own module):

- `send()` picks the partition (`partitioner.py`: Java's murmur2 of the key, or the
  topic's sticky partition for a null key), then appends the record to that
  partition's open batch (`accumulator.py`). Nothing is encoded yet; a record costs
  a few list appends. The first record for a topic waits for its metadata.
- A batch closes at `batch_size` bytes (or `max_batch_records`), or after
  `linger_ms`, or on `flush()`. The sender (`sender.py`) encodes it with a numba
  kernel (`encode.py`: no Python code per record) and sends Produce v8 requests,
  one per leader broker with one batch per partition, up to `max_in_flight` per
  connection, pipelined. The I/O thread runs it, and so does a `send()` that closes a
  batch when it can (`producer_io.py`).
- `send_many()` takes whole columns of values (and keys): partitions them with the
  vectorised murmur2, groups by partition with a stable sort, cuts batches and
  encodes them all in one kernel call, and queues them ready to send (`bulk_send.py`).
- Responses resolve batches; retriable errors (`exc.retriable`: lost connection,
  not leader, unknown partition, timeouts) are retried after `retry_backoff_ms`,
  up to `retries` times and within `delivery_timeout_ms`, refreshing metadata as
  needed, without ever reordering a partition (see `sender.py`). Delivery is
  at-least-once: a batch in flight when a connection dies is sent again, and may
  then be stored twice.

With a `transactional_id`, the transaction methods (`transactions.py`) make what is
sent between begin and commit visible to read_committed consumers as one.

Bounded waits: the first `send()` to a topic waits at most `max_block_ms`
(default: `request_timeout_ms`) for metadata and raises `ConnectionClosed` if no
broker answers; a full buffer (`buffer_memory`) blocks `send()` as long, then
raises `ProducerTimeout`; every error is a `KafkaError` subclass carrying the
Kafka error code.
"""

from __future__ import annotations

import atexit
import collections
import logging
import numbers
import threading
import time
import weakref

from mmlog.security.client import ClientSecurity
from mmlog.client import encode
from mmlog.client.accumulator import RECORD_OVERHEAD, RecordAccumulator
from mmlog.client.bulk_send import BulkSend, to_bytes
from mmlog.client.cluster import Cluster
from mmlog.client.connection import ConnectionClosed, parse_bootstrap
from mmlog.client.futures import (BulkFuture, BulkMetadata, ProducerClosed, ProducerTimeout, RecordFuture,
                                  RecordMetadata)
from mmlog.client.partitioner import resolve as resolve_partitioner
from mmlog.client.producer_io import ProducerIO
from mmlog.client.sender import Sender
from mmlog.client.transactions import IN_TRANSACTION, TransactionalProducer, TransactionManager
from mmlog.errors import MessageTooLarge, UnknownTopicOrPartition
from mmlog.protocol import compression

__all__ = ["Producer", "RecordMetadata", "RecordFuture", "BulkFuture", "BulkMetadata", "ProducerTimeout",
           "ProducerClosed"]

log = logging.getLogger("mmlog.producer")

_time_ns = time.time_ns
_monotonic = time.monotonic
_ACKS = {0: 0, 1: 1, -1: -1, "0": 0, "1": 1, "-1": -1, "all": -1}


class Producer(BulkSend, ProducerIO, TransactionalProducer):
    """A Kafka-protocol producer for mmlog (and any Kafka broker speaking Produce v3-8).

    Parameters mirror the Java client's (`linger.ms`, `batch.size`, ...):

    acks                 0 (no answer; offsets are -1), 1 (the leader wrote it), -1 / "all" (every
                         in-sync replica has it; the default, as in Kafka 3 clients)
    enable_idempotence   retries never duplicate a record (producer id and sequences; the broker
                         answers a batch it already holds with its offsets). Default: on with
                         acks="all" and max_in_flight <= 5, as in Kafka 3 clients; asking for it
                         with acks other than "all" or more in flight is a ValueError
    linger_ms            how long a batch may wait for more records before it is sent
    batch_size           bytes per batch (estimated) before it closes
    max_batch_records    records per batch before it closes (None: no limit); for benchmarks
                         that want exactly N records a request
    partitioner          "murmur2" (Java's; default), "crc32" (librdkafka's default) or a
                         callable(key: bytes, partitions: int) -> int
    max_in_flight        requests outstanding per broker connection
    retries              sends of a batch after its first, for retriable errors
    retry_backoff_ms     wait before resending a failed batch
    request_timeout_ms   answer time of a request before its connection is dropped and its
                         batches retried; also the broker's own produce timeout
    delivery_timeout_ms  from a batch's first record to its failure, retries included
    max_block_ms         longest `send()` blocks for metadata or buffer room (default:
                         request_timeout_ms)
    buffer_memory        bytes of records that may wait to be sent before `send()` blocks
    max_request_size     bytes of batches grouped into one request (a bigger batch goes alone)
    compression_type     "none" (default), "gzip", "snappy", "lz4" or "zstd": each batch's records
                         compressed as Kafka clients do (protocol/compression.py)
    compression_level    the codec's level (gzip 1-9, lz4 1-17, zstd -131072-22); None: its default
    """

    def __init__(self, bootstrap: str = "127.0.0.1:9092", *, acks: int | str = "all", linger_ms: float = 5,
                 batch_size: int = 16384, max_batch_records: int | None = None, partitioner="murmur2",
                 max_in_flight: int = 5, retries: int = 5, retry_backoff_ms: float = 100,
                 request_timeout_ms: float = 30000, delivery_timeout_ms: float = 120000,
                 max_block_ms: float | None = None, buffer_memory: int = 32 * 1024 * 1024,
                 max_request_size: int = 1048576, client_id: str = "mmlog", compression_type: str = "none",
                 compression_level: int | None = None, enable_idempotence: bool | None = None,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60_000, **security) -> None:
        if transactional_id is not None and (enable_idempotence is False or _ACKS.get(acks) != -1):
            raise ValueError("a transactional producer is idempotent: it needs acks='all' and enable_idempotence")
        if transactional_id is not None:
            enable_idempotence = True
        if acks not in _ACKS:
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if enable_idempotence and (_ACKS[acks] != -1 or not 1 <= max_in_flight <= 5):
            raise ValueError("enable_idempotence needs acks='all' and max_in_flight <= 5 (Kafka's rule), "
                             f"not acks={acks!r}, max_in_flight={max_in_flight!r}")
        for name, value, low in (("batch_size", batch_size, 1), ("max_in_flight", max_in_flight, 1),
                                 ("retries", retries, 0), ("buffer_memory", buffer_memory, 1),
                                 ("max_request_size", max_request_size, 1),
                                 ("max_batch_records", max_batch_records or 1, 1)):
            if not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")
        for name, value in (("linger_ms", linger_ms), ("retry_backoff_ms", retry_backoff_ms),
                            ("request_timeout_ms", request_timeout_ms), ("delivery_timeout_ms", delivery_timeout_ms),
                            ("max_block_ms", 0 if max_block_ms is None else max_block_ms)):
            if not isinstance(value, numbers.Real) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, not {value!r}")
        self.codec = compression.codec_of(compression_type)
        self.compression_level = compression.check_level(self.codec, compression_level) if self.codec else None
        self.bootstrap = bootstrap
        parse_bootstrap(bootstrap)  # ValueError now, not at the first send
        self.acks = _ACKS[acks]
        self.idempotent = (self.acks == -1 and max_in_flight <= 5) if enable_idempotence is None \
            else bool(enable_idempotence)
        self.linger = linger_ms / 1000
        self.batch_size = int(batch_size)
        self.max_batch_records = int(max_batch_records) if max_batch_records else 1 << 30
        self.max_in_flight = int(max_in_flight)
        self.retries = int(retries)
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.max_block = (request_timeout_ms if max_block_ms is None else max_block_ms) / 1000
        self.max_request_size = int(max_request_size)
        self.client_id = client_id
        self._key_partition, self._keys_partitions = resolve_partitioner(partitioner)
        # Each metadata attempt is short (the sender must not stall long); callers loop to their deadline.
        self._cluster = Cluster(bootstrap, client_id=client_id, timeout=min(self.request_timeout, 0.5),
                                security=ClientSecurity.from_options(**security))
        self._partition_counts: dict[str, int] = {}
        self._acc = RecordAccumulator(batch_size=self.batch_size, linger=self.linger,
                                      max_records=self.max_batch_records, buffer_memory=int(buffer_memory),
                                      partition_counts=self._partition_counts,
                                      max_record_size=self.max_request_size)
        self._acc.on_close = self._kick
        self._txn = None if transactional_id is None else TransactionManager(
            self._cluster, transactional_id, transaction_timeout_ms, self.retry_backoff, self.request_timeout)
        self._completions: collections.deque = collections.deque()
        self._callback_lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._driving = threading.Lock()  # held by the thread waiting for a batch that does the I/O (producer_io)
        self._sender = Sender(self)
        self._acc.on_wait = self._wait_on  # a thread waits for a batch: it drives, or the I/O thread does
        self._closed = False
        self._stop = False
        self._abort = False
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"mmlog-producer-{client_id}", daemon=True)
        self._thread.start()
        # A script that ends without close() still delivers what it sent (bounded wait).
        atexit.register(_close_at_exit, weakref.ref(self))

    # ------------------------------------------------------------ sending

    def send(self, topic: str, value=None, key=None, headers=None, partition: int | None = None,
             timestamp: int | None = None, callback=None) -> RecordFuture:
        """Queue one record; return its future. value/key: bytes-like, str (utf-8) or None.

        headers: a list of (str key, bytes-like or None value). timestamp: ms since the
        epoch (default now). callback(metadata, exc) runs once the record is acknowledged
        or has failed.
        """
        if self._txn is not None and self._txn.state != IN_TRANSACTION:
            self._txn.begin_check("send()")
        if value.__class__ is bytes and key is None and headers is None and callback is None and timestamp is None \
                and self.linger and not self._closed:
            future = self._acc.try_append(topic, partition, value, _time_ns() // 1_000_000)
            if future is not None:  # the usual record, into an open batch: the short way
                return future
        if value.__class__ is not bytes and value is not None:
            value = to_bytes(value, "value")
        if self._closed:
            raise ProducerClosed("send() on a closed producer")
        partitions = self._partition_counts.get(topic)
        if partitions is None:
            partitions = self._fetch_partitions(topic)
        size = RECORD_OVERHEAD if value is None else RECORD_OVERHEAD + len(value)
        if key is not None:
            if key.__class__ is not bytes:
                key = to_bytes(key, "key")
            size += len(key)
            if partition is None:
                partition = self._key_partition(key, partitions)
        if partition is not None and not 0 <= partition < partitions:
            raise UnknownTopicOrPartition(f"{topic} has {partitions} partitions, not partition {partition}")
        header = None
        if headers:
            header = encode.encode_header_section(headers)
            size += len(header)
        if size > self.max_request_size:
            raise MessageTooLarge(f"a record of about {size} bytes is larger than max_request_size "
                                  f"{self.max_request_size}")
        acc = self._acc
        if acc.appended - acc.released + size > acc.buffer_memory and acc.appended != acc.released:
            self._wait_for_space(size)
        future, closed, opened = acc.append(
            topic, partition, value, key, _time_ns() // 1_000_000 if timestamp is None else int(timestamp),
            header, size, callback)
        if closed or not self.linger:
            self._kick()
        elif opened and self._sender.planned > future._batch.created + self.linger:
            self._sender.wake()  # the I/O thread sleeps past this batch's linger (it was idle)
        return future

    # ------------------------------------------------------------ waiting

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it is acknowledged (or failed).

        Raises ProducerTimeout if that takes longer than `timeout` seconds.
        """
        acc = self._acc
        deadline = None if timeout is None else _monotonic() + timeout
        with acc.lock:
            acc.flushing += 1
        try:
            pending = acc.close_all_open()
            if not pending:
                return
            self._sender.hand_over(wake=True)
            # Newest first: a partition's batches complete in order, so once its newest is
            # done the rest are too, and this thread wakes about once per partition, not per
            # batch (every wake-up takes the GIL from the I/O thread).
            pending.sort(key=lambda b: b.created, reverse=True)
            for batch in pending:
                left = None if deadline is None else max(0.0, deadline - _monotonic())
                if not batch.wait(left):
                    waiting = sum(b.count for b in pending if not b.done)
                    raise ProducerTimeout(f"flush: {waiting} records not acknowledged within {timeout:g} s")
        finally:
            with acc.lock:
                acc.flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to `timeout` seconds), then stop the I/O thread; what is left fails."""
        if self._closed and not self._thread.is_alive():
            return
        self._closed = True
        try:
            if self._failure is None:
                self.flush(timeout)
        except ProducerTimeout:
            self._abort = True
        finally:
            self._stop = True
            self._sender.wake()
            self._thread.join(None if timeout is None else max(timeout, 1.0))
            if self._thread.is_alive():  # cannot happen unless a callback blocks the I/O thread
                log.warning("msg=producer_thread_still_running")
                return
            self._sender.close()
            if self._txn is not None:
                self._txn.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def partitions_for(self, topic: str) -> int:
        """How many partitions `topic` has (fetching metadata if needed)."""
        n = self._partition_counts.get(topic)
        return n if n is not None else self._fetch_partitions(topic)

    def metrics(self) -> dict:
        """A few counters: batches not done, bytes waiting, open connections, and the throttle_time_ms of
        a broker's client quota (in the last answer, and the most so far)."""
        return {"pending_batches": self._acc.pending(), "buffered_bytes": self._acc.buffered,
                "connections": len(self._sender.channels), "throttle_time_ms": self._sender.throttle_ms,
                "throttle_time_ms_max": self._sender.throttle_ms_max}

    # ------------------------------------------------------------ internals

    def _fetch_partitions(self, topic: str) -> int:
        """Wait (up to max_block) for the topic's metadata; auto-creates it if the broker does."""
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, not {topic!r}")
        deadline = _monotonic() + self.max_block
        last = "no answer"
        while True:
            try:
                info = self._cluster.topic(topic, wait=max(0.0, deadline - _monotonic()))
                self._acc.learn(topic, info.leaders, self._cluster.brokers)
                return info.partitions
            except ConnectionClosed as exc:
                last = str(exc)
                if last.startswith("no broker reachable") and last.endswith(")") and " (" in last:
                    last = last[last.index(" (") + 2:-1]  # the cause, without the inner attempt's preamble
            if _monotonic() >= deadline:
                where = ",".join(f"{h}:{p}" for h, p in self._cluster.bootstrap)
                raise ConnectionClosed(f"no broker reachable at {where} within {self.max_block:g} s ({last})")
            time.sleep(min(0.1, max(0.0, deadline - _monotonic())))

    def _wait_for_space(self, size: int) -> None:
        """The buffer is full: let the I/O thread drain it, and wait for room."""
        self._sender.hand_over(wake=True)
        if not self._acc.wait_for_space(size, _monotonic() + self.max_block):
            raise ProducerTimeout(f"buffer full ({self._acc.buffered} bytes waiting) for {self.max_block:g} s")


def _close_at_exit(ref) -> None:
    producer = ref()
    if producer is not None and not producer._closed:
        try:
            producer.close(producer.request_timeout)
        except Exception:  # noqa: BLE001 - nothing to report to at exit but the log
            log.exception("msg=producer_close_at_exit_failed")

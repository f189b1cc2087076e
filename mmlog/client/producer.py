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
  connection, pipelined.
- `send_many()` takes whole columns of values (and keys): partitions them with the
  vectorised murmur2, groups by partition with a stable sort, cuts batches and
  encodes them all in one kernel call, and queues them ready to send.
- Responses resolve batches; retriable errors (`exc.retriable`: lost connection,
  not leader, unknown partition, timeouts) are retried after `retry_backoff_ms`,
  up to `retries` times and within `delivery_timeout_ms`, refreshing metadata as
  needed, without ever reordering a partition (see `sender.py`). Delivery is
  at-least-once: a batch in flight when a connection dies is sent again, and may
  then be stored twice.

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

import numpy as np

from mmlog.security.client import ClientSecurity
from mmlog.client import encode
from mmlog.client.accumulator import RECORD_OVERHEAD, RecordAccumulator
from mmlog.client.cluster import Cluster
from mmlog.client.connection import ConnectionClosed, parse_bootstrap
from mmlog.client.futures import BulkFuture, BulkMetadata, ProducerTimeout, RecordFuture, RecordMetadata
from mmlog.client.partitioner import resolve as resolve_partitioner
from mmlog.client.sender import INF, Sender
from mmlog.client.transactions import ABORTABLE, IN_TRANSACTION, TransactionError, TransactionManager
from mmlog.errors import KafkaError, MessageTooLarge, UnknownTopicOrPartition
from mmlog.protocol import compression

__all__ = ["Producer", "RecordMetadata", "RecordFuture", "BulkFuture", "BulkMetadata", "ProducerTimeout",
           "ProducerClosed"]

log = logging.getLogger("mmlog.producer")

_time_ns = time.time_ns
_monotonic = time.monotonic
# A send() that closes a batch does the I/O itself at most this often while requests are in
# flight: one step then writes every batch closed meanwhile with one sendmsg and reads every
# answer with one recv, instead of a step, a recv and a send per batch (a batch of one record
# closes every 2 µs).
KICK_INTERVAL = 0.0001
# While send() has done a step within this long, the I/O thread leaves the sockets to it (see
# Sender.park); a thread that blocks (flush, get, a full buffer) hands them back at once.
DRIVE_WINDOW = 0.002
KICK_WAIT = 0.001  # longest a send() closing a batch waits for the I/O thread's step (see _kick)
_ACKS = {0: 0, 1: 1, -1: -1, "0": 0, "1": 1, "-1": -1, "all": -1}


class ProducerClosed(KafkaError):
    """The producer was closed (or its I/O thread failed) before the record could be sent."""

    code = -1


class Producer:
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
        self._sender = Sender(self)
        self._acc.on_wait = self._sender.hand_over  # a thread waits for a batch: the I/O thread must drive
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
            value = _to_bytes(value, "value")
        if self._closed:
            raise ProducerClosed("send() on a closed producer")
        partitions = self._partition_counts.get(topic)
        if partitions is None:
            partitions = self._fetch_partitions(topic)
        size = RECORD_OVERHEAD if value is None else RECORD_OVERHEAD + len(value)
        if key is not None:
            if key.__class__ is not bytes:
                key = _to_bytes(key, "key")
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

    def send_many(self, topic: str, values, keys=None, partition=None, timestamps=None) -> BulkFuture:
        """Queue many records at once, encoded without a Python loop per record; return one BulkFuture.

        values: a sequence of bytes-like (or str, or None), a 2-D uint8 numpy array (one
        fixed-size value per row), or a (buffer, offsets) pair with n+1 offsets. keys: the
        same forms, or None (every key null). partition: one partition for all, an array
        of one per record, or None (keys hashed with the producer's partitioner; null keys
        fill batches of one sticky partition after another). timestamps: ms, one per
        record, or None (now). Headers are not supported here (use send()).

        The future's result() is a BulkMetadata of numpy arrays in the order given:
        partitions, offsets, timestamps. Batches are queued ready to send (no linger).
        """
        if self._closed:
            raise ProducerClosed("send_many() on a closed producer")
        if self._txn is not None and self._txn.state != IN_TRANSACTION:
            self._txn.begin_check("send_many()")
        values = _column(values, "values", null_column=True)
        n = len(values)
        keys = _column(keys, "keys") if keys is not None else None
        if keys is not None and len(keys) != n:
            raise ValueError(f"{len(keys)} keys for {n} values")
        partitions = self._partition_counts.get(topic)
        if partitions is None:
            partitions = self._fetch_partitions(topic)
        if timestamps is None:
            stamps = np.full(n, _time_ns() // 1_000_000, dtype=np.int64)
        else:
            stamps = np.ascontiguousarray(timestamps, dtype=np.int64)
            if stamps.shape != (n,):
                raise ValueError(f"{stamps.shape[0] if stamps.ndim else 'no'} timestamps for {n} values")
        sizes = np.maximum(values.lengths, 0) + RECORD_OVERHEAD
        if keys is not None:
            sizes += np.maximum(keys.lengths, 0)
        if n and int(sizes.max()) > self.max_request_size:
            raise MessageTooLarge(f"a record of about {int(sizes.max())} bytes is larger than max_request_size "
                                  f"{self.max_request_size}")
        parts = self._partitions_for(topic, partition, keys, sizes, n, partitions)
        order = np.argsort(parts, kind="stable")
        sorted_parts = parts[order]
        groups = np.concatenate(([0], np.flatnonzero(np.diff(sorted_parts)) + 1, [n])).astype(np.int64) \
            if n else np.zeros(1, dtype=np.int64)
        bounds = encode.cut_batches(sizes[order], groups, self.batch_size, self.max_batch_records)
        batches = []
        if n:
            buf, positions = encode.build(values, keys, None, stamps, order.astype(np.int64), bounds)
            view = memoryview(buf)
            acc = self._acc
            total = int(positions[-1])
            if acc.buffered + total > acc.buffer_memory and acc.buffered:
                self._wait_for_space(total)
            starts = positions.tolist()
            cuts = bounds.tolist()
            created = _monotonic()
            queue = None
            group: list = []
            for j in range(len(cuts) - 1):
                p = int(sorted_parts[cuts[j]])
                if queue is None or queue.partition != p:
                    if group:
                        acc.append_built(queue, group)
                    queue, group = acc.queue_for(topic, p), []
                data = view[starts[j]:starts[j + 1]]
                if self.codec:
                    data = compression.compress_batch(data, self.codec, self.compression_level)
                batch = acc.built_batch(queue, data, cuts[j + 1] - cuts[j], created)
                batches.append(batch)
                group.append(batch)
            if group:
                acc.append_built(queue, group)
        future = BulkFuture(topic, batches, order, bounds, parts, stamps)
        if batches:
            self._kick()
            # The caller's next call (encoding, in a kernel that lets the GIL go) is a while
            # away: the I/O thread drives the sockets meanwhile, rather than wait for it.
            self._sender.hand_over()
        return future

    def _partitions_for(self, topic, partition, keys, sizes, n, partitions) -> np.ndarray:
        """The partition of each record of a send_many call (int32)."""
        if partition is not None:
            if isinstance(partition, numbers.Integral):
                parts = np.full(n, int(partition), dtype=np.int32)
            else:
                parts = np.ascontiguousarray(partition, dtype=np.int32)
                if parts.shape != (n,):
                    raise ValueError(f"partition must be one int or one per record ({n})")
            if n and (parts.min() < 0 or parts.max() >= partitions):
                raise UnknownTopicOrPartition(f"{topic} has {partitions} partitions")
            return parts
        if keys is not None:
            parts = np.asarray(self._keys_partitions(keys.buf, keys.starts, keys.lengths, partitions), dtype=np.int32)
            nulls = np.flatnonzero(parts < 0)
        else:
            parts = np.empty(n, dtype=np.int32)
            nulls = None
        # Null keys: cut the run into batches and give them sticky partitions one after another.
        null_sizes = sizes if nulls is None else sizes[nulls]
        if len(null_sizes):
            cuts = encode.cut_batches(null_sizes, np.array([0, len(null_sizes)], dtype=np.int64),
                                      self.batch_size, self.max_batch_records)
            chunk = np.repeat(np.arange(len(cuts) - 1, dtype=np.int64), np.diff(cuts))
            # Round-robin from the sticky partition over those with a live leader (see accumulator.py).
            acc = self._acc
            with acc.lock:
                choices = np.array(acc.available.get(topic) or range(partitions), dtype=np.int32)
                sticky = acc.sticky.get(topic)
                hits = np.flatnonzero(choices == sticky) if sticky is not None else ()
                first = int(hits[0]) if len(hits) else int(np.random.randint(len(choices)))
                acc.sticky[topic] = int(choices[(first + len(cuts) - 1) % len(choices)])
            chosen = choices[(first + chunk) % len(choices)]
            if nulls is None:
                parts = chosen
            else:
                parts[nulls] = chosen
        return parts

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

    # ------------------------------------------------------------ transactions (transactional_id set)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional id's producer id and epoch, fencing any older producer of the id and
        aborting the transaction it left open. Call once, before the first transaction."""
        pid, epoch = self._transactions().init(self.max_block if timeout is None else timeout)
        with self._io_lock:
            self._sender.producer_id, self._sender.producer_epoch = pid, epoch

    def begin_transaction(self) -> None:
        """Start a transaction: what is sent until commit or abort is committed or aborted as one."""
        self._transactions().begin()

    def send_offsets_to_transaction(self, offsets: dict, group_id, timeout: float | None = None) -> None:
        """Commit consumer positions ({(topic, partition): next offset to read}) with the transaction:
        a consume-transform-produce loop's input and output become visible together. `group_id` is the
        consumer group's id (or a consumer, whose group id is used)."""
        group = getattr(group_id, "group_id", group_id)
        self._transactions().send_offsets(offsets, group, self.max_block if timeout is None else timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: read_committed consumers see the transaction's records from now on.
        Raises if a record of the transaction failed (abort it then)."""
        txn = self._transactions()
        deadline = _monotonic() + (self.delivery_timeout if timeout is None else timeout)
        self.flush(max(0.0, deadline - _monotonic()))
        txn.end(True, max(0.0, deadline - _monotonic()))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: the transaction's records stay in the log, but read_committed consumers never see them."""
        txn = self._transactions()
        deadline = _monotonic() + (self.delivery_timeout if timeout is None else timeout)
        try:
            self.flush(max(0.0, deadline - _monotonic()))
        except ProducerTimeout:
            pass  # what is still in flight is aborted with the rest
        failed = txn.state == ABORTABLE
        txn.end(False, max(0.0, deadline - _monotonic()))
        if failed:  # a batch lost inside the transaction left a gap in a sequence: start the next epoch
            self.init_transactions(max(0.0, deadline - _monotonic()))

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise TransactionError("transactions need Producer(transactional_id=...)")
        return self._txn

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
        """A few counters: batches not done, bytes waiting, open connections."""
        return {"pending_batches": self._acc.pending(), "buffered_bytes": self._acc.buffered,
                "connections": len(self._sender.channels)}

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

    def _kick(self) -> None:
        """A batch closed: send it from this thread if the I/O lock is free (see sender.py: the GIL),
        unless requests are in flight and this thread did the I/O less than KICK_INTERVAL ago."""
        sender = self._sender
        now = _monotonic()
        if now < sender.next_kick:
            return  # the batch goes with the next step's others, soon, in the same sendmsg
        if not self._io_lock.acquire(False):
            # The I/O thread has it. Mid-step, back from a syscall, it may be waiting for the GIL
            # this thread holds: it would get it only at the 5 ms switch interval, while this thread
            # appends and cannot send (measured: half the time of a batch-50 run in such stalls).
            # Waiting for the lock hands it the GIL; it finishes its step, and this one follows.
            # Not while it connects or fetches metadata: that blocks for long, and send() must not.
            # Not with acks=0 either: no answers wait to be read, and the I/O thread's step is
            # writing, which can take long (batch 50 measured 6% slower with the wait: mean of 3 pairs).
            if sender.blocking or not self.acks or not self._io_lock.acquire(timeout=KICK_WAIT):
                return  # the holder will see acc.ready_hint before it sleeps
        sender.next_kick = now + KICK_INTERVAL
        sender.last_kick = now
        try:
            wanted = sender.needs_io_thread
            due = sender.step(io_thread=False)
            if (sender.needs_io_thread and not wanted) or due < sender.planned:
                sender.wake()  # a connection or metadata to fetch: blocking work for the I/O thread
        finally:
            self._io_lock.release()
        if self._completions:
            self._fire_callbacks()

    def _fire_callbacks(self) -> None:
        """Run the callbacks of resolved batches, in order, on one thread at a time."""
        completions = self._completions
        lock = self._callback_lock
        while completions:
            if not lock.acquire(False):
                return  # the holder loops until the queue is empty
            try:
                while True:
                    try:
                        batch = completions.popleft()
                    except IndexError:
                        break
                    batch.fire()
            finally:
                lock.release()

    def _run(self) -> None:
        """The I/O thread: step, sleep in the selector, handle events; see sender.py."""
        sender = self._sender
        acc = self._acc
        try:
            encode.warm()  # compile or load the kernel now, not at the first batch
            while True:
                with self._io_lock:
                    if self._abort or (self._stop and not acc.incomplete):
                        break
                    now = _monotonic()
                    if now - sender.last_kick < DRIVE_WINDOW and not sender.needs_io_thread and not self._closed:
                        sender.park()  # send() drives the sockets (see Sender.park); look again later
                        due = sender.planned = sender.last_kick + DRIVE_WINDOW
                    else:
                        sender.unpark()
                        sender.planned = 0.0  # awake: a batch opened during this step is seen after it
                        sender.needs_io_thread = False
                        sender.closing = self._closed
                        due = sender.step(io_thread=True)
                        if acc.ready_hint or sender.needs_io_thread:
                            due = 0.0
                        elif acc.incomplete:
                            # Busy: wake at least every linger, so that a batch opened meanwhile is
                            # sent on time without send() having to wake this thread (a syscall).
                            due = min(due, _monotonic() + max(self.linger, 0.001))
                        sender.planned = due
                if self._completions:
                    self._fire_callbacks()
                timeout = None if due == INF else max(0.0, due - _monotonic())
                events = sender.selector.select(timeout)
                if events:
                    with self._io_lock:
                        for key, mask in events:
                            sender.try_read(key.data, mask)
            if self._abort:
                with self._io_lock:
                    sender.abort(ProducerClosed("producer closed before these records were delivered"))
        except BaseException as exc:  # noqa: BLE001 - a bug here must fail the records, not hang them
            log.exception("msg=producer_io_thread_failed")
            self._failure = exc
            self._closed = True
            with self._io_lock:
                sender.abort(ProducerClosed(f"producer I/O thread failed: {exc!r}"))
        self._fire_callbacks()


def _close_at_exit(ref) -> None:
    producer = ref()
    if producer is not None and not producer._closed:
        try:
            producer.close(producer.request_timeout)
        except Exception:  # noqa: BLE001 - nothing to report to at exit but the log
            log.exception("msg=producer_close_at_exit_failed")


# ---------------------------------------------------------------- input conversion


def _to_bytes(value, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    try:
        return bytes(memoryview(value))
    except TypeError:
        raise TypeError(f"{what} must be bytes-like, str or None, not {type(value).__name__}") from None


def _column(items, what: str, null_column: bool = False) -> encode.Column:
    """send_many's values/keys in any accepted form as an encode.Column."""
    if isinstance(items, np.ndarray) and items.ndim == 2:
        if items.dtype != np.uint8:
            raise TypeError(f"a 2-D {what} array must be uint8, not {items.dtype}")
        return encode.Column.from_fixed(items)
    if isinstance(items, tuple) and len(items) == 2 and not isinstance(items[1], (bytes, str, type(None))) \
            and _is_buffer(items[0]):
        return encode.Column.from_offsets(items[0], items[1])
    if isinstance(items, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"send_many takes a sequence of {what}, not one {type(items).__name__}")
    if isinstance(items, np.ndarray):
        items = items.tolist()
    elif not isinstance(items, list):
        items = list(items)
    try:
        return encode.Column.from_list(items, all_null_ok=null_column)  # None: every key null
    except TypeError:
        return encode.Column.from_list([_to_bytes(x, what) if x is not None else None for x in items],
                                       all_null_ok=null_column)


def _is_buffer(obj) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False

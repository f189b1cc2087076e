"""Where records wait to be sent: one queue of batches per partition.

`Producer.send` appends a record to its partition's *open* batch: two list
appends, no encoding. A batch closes when it reaches `batch_size` bytes (an
estimate: payload + 12 bytes a record, close to the real record overhead of
8-11 bytes for small records) or `max_records` records; it also closes when the
sender finds it older than `linger`, or when `flush()`/`close()` ask for
everything now. Closed batches wait in their partition's queue, in order, for the
sender, which encodes each one (numba kernel, `encode.py`) just before sending it.
`send_many` instead appends batches it has already encoded.

Partition queue states. Whoever holds the producer's I/O lock (the I/O thread, or
a `send()` doing the I/O itself) alone pops from `closed` and touches `inflight`,
`held` and `node`; `open` changes, and batches join the tail of `closed`, under
the accumulator lock, which `send()` takes for every record and the sender only to
close a lingering batch::

    open -> closed (queued, in order) -> inflight (sent to `node`, in order)
               ^                            |  retriable error / connection lost
               +------ held (in order) <----+  (requeued at the front once nothing
                                               of the partition is in flight)

Null keys use sticky partitioning (KIP-480): a topic's null-keyed records go to
one partition until a batch of that partition closes, then to another, chosen at
random among the others. As in Kafka, only partitions with a live leader are
chosen while there are any (`learn`): in a cluster with a broker down, null-keyed
records keep flowing to the others instead of waiting out the delivery timeout.

Memory is bounded: `buffer_memory` bytes of records may wait (estimated as above);
`send` blocks (up to `max_block`) beyond it, while the sender drains, until a
quarter of the buffer is free again (a wake-up per batch freed would cost two
thread switches each).
"""

from __future__ import annotations

import collections
import random
import threading
import time

from mmlog.client.futures import BatchOutcome, RecordFuture, RecordMetadata

_monotonic = time.monotonic
RECORD_OVERHEAD = 12  # estimated bytes of varints + attributes per record, for batch_size


def _nothing(batch, timeout) -> None:
    return None


class PartitionQueue:
    """The batches of one (topic, partition), from open to in flight."""

    __slots__ = ("topic", "partition", "open", "closed", "inflight", "held", "node", "wire", "on_wait",
                 "sequence_of", "next_sequence")

    def __init__(self, topic: str, partition: int, on_wait=None) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.closed: collections.deque[ProducerBatch] = collections.deque()
        self.inflight: collections.deque[ProducerBatch] = collections.deque()
        self.held: list[ProducerBatch] = []
        self.node = -1  # broker the in-flight batches went to
        self.wire = None  # the sender's request and answer templates for this partition
        self.on_wait = on_wait or _nothing  # on_wait(batch, timeout) before a thread blocks on one of its batches
        self.sequence_of = None  # the (producer id, epoch) the sequence below counts for (idempotence)
        self.next_sequence = 0  # the sequence of this partition's next new batch

    def __repr__(self) -> str:
        return (f"<PartitionQueue {self.topic}-{self.partition} open={self.open is not None} "
                f"closed={len(self.closed)} inflight={len(self.inflight)} held={len(self.held)}>")


class ProducerBatch(BatchOutcome):
    """Records of one partition sent (and acknowledged) together.

    Before it is encoded it holds its records as lists (`values`, `keys` or None if
    every key is None so far, `headers` as encoded header sections or None,
    `stamps`); `data` is the encoded v2 batch once the sender built it (or from the
    start, for `send_many`).
    """

    __slots__ = ("topic", "partition", "queue", "values", "keys", "headers", "stamps", "count", "size",
                 "created", "data", "attempts", "retry_at", "last_error", "stamped",
                 "base_offset", "error", "resolved", "fired", "done", "done_at", "callbacks", "_event")

    def __init__(self, queue: PartitionQueue, created: float) -> None:
        self.topic = queue.topic
        self.partition = queue.partition
        self.queue = queue
        self.values: list | None = []
        self.keys: list | None = None
        self.headers: list | None = None
        self.stamps: list | None = []
        self.count = 0
        self.size = 0
        self.created = created
        self.data = None
        self.stamped = None  # the (producer id, epoch) its data carries (idempotence; None: none yet)
        self.attempts = 0
        self.retry_at = 0.0
        self.last_error: BaseException | None = None
        self.base_offset = -1
        self.error: BaseException | None = None
        self.resolved = False
        self.fired = False
        self.done = False
        self.done_at = 0.0
        self.callbacks: list | None = None
        self._event = None

    def _before_wait(self, timeout: float | None) -> bool | None:
        return self.queue.on_wait(self, timeout)

    def metadata(self, index: int) -> RecordMetadata:
        base = self.base_offset
        stamps = self.stamps
        return RecordMetadata(self.topic, self.partition, base + index if base >= 0 else -1,
                              stamps[index] if stamps is not None else -1)

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.topic}-{self.partition} {self.count} records, {self.size} B>"


class RecordAccumulator:
    """Open and closed batches of every partition; memory accounting; flush bookkeeping."""

    def __init__(self, *, batch_size: int, linger: float, max_records: int, buffer_memory: int,
                 partition_counts: dict[str, int], max_record_size: int = 1 << 62) -> None:
        self.batch_size = batch_size
        self.max_record_size = max_record_size  # bigger records take `append`, which refuses them
        self.on_close = _nothing  # try_append calls it when a batch closed (the producer's kick)
        self.on_wait = _nothing  # a thread is about to block on a batch (the producer's driving wait)
        self.linger = linger
        self.max_records = max_records
        self.buffer_memory = buffer_memory
        self.partition_counts = partition_counts
        self.lock = threading.Lock()
        self.space = threading.Condition(self.lock)  # signalled when buffered memory is freed
        self.queue_list: list[PartitionQueue] = []  # every partition's queue, in creation order (only appended to)
        self.by_topic: dict[str, list] = {}  # the same by topic: queue per partition (None: not yet made)
        self.sticky: dict[str, int] = {}
        self.available: dict[str, tuple[int, ...]] = {}  # partitions with a live leader (absent: all)
        self.incomplete: set[ProducerBatch] = set()
        # Bytes waiting = appended - released. Two counters with one writer each (appended under
        # the lock, released by the I/O lock's holder), so the sender frees memory without
        # taking the lock the application's send() takes for every record.
        self.appended = 0
        self.released = 0
        self.low_water = buffer_memory * 3 // 4  # a blocked send() waits until this little is left
        self.flushing = 0
        self.waiting_for_space = 0
        self.ready_hint = False  # a batch closed since the sender last looked

    # ------------------------------------------------------------ the application side

    def try_append(self, topic: str, partition: int | None, value: bytes, stamp: int) -> RecordFuture | None:
        """`append` for the usual record (a value, no key, headers or callback) to the open batch of a
        known partition with room for it, or alone in a batch that closes at once: its future, after
        calling `on_close` if the batch closed; None when any of that does not hold (the caller then
        calls `append`). 0.3 µs less."""
        size = len(value) + RECORD_OVERHEAD
        lock = self.lock
        lock.acquire()
        try:
            if partition is None:
                partition = self.sticky.get(topic)
                if partition is None:
                    return None
            elif partition < 0:
                return None
            try:
                queue = self.by_topic[topic][partition]
            except (KeyError, IndexError):
                return None
            if queue is None:
                return None
            if size > self.max_record_size or self.appended - self.released + size > self.buffer_memory:
                return None
            batch = queue.open
            if batch is None:
                if self.max_records > 1 and size < self.batch_size:
                    return None  # it would open a batch that lingers: `append` (which may wake the I/O thread)
                # A batch of this record alone (batch 1): open, fill and close it at once.
                batch = queue.open = ProducerBatch(queue, _monotonic())
                self.incomplete.add(batch)
            elif batch.keys is not None or batch.headers is not None or batch.size + size > self.batch_size:
                return None
            index = batch.count
            batch.values.append(value)
            batch.stamps.append(stamp)
            batch.count = count = index + 1
            batch.size = total = batch.size + size
            self.appended += size
            if total < self.batch_size and count < self.max_records:
                return RecordFuture(batch, index)
            self._close(queue)
        finally:
            lock.release()
        self.on_close()
        return RecordFuture(batch, index)

    def append(self, topic: str, partition: int | None, value, key, stamp: int, header, size: int,
               callback) -> tuple[RecordFuture, bool, bool]:
        """Add a record; return (its future, its batch is now closed, a new batch was opened).

        The hot path of `Producer.send`: about 0.5 µs (a lock, two list appends; keys,
        headers and callbacks, when there are any, a few more).
        """
        lock = self.lock
        lock.acquire()
        try:
            if partition is None:
                partition = self.sticky.get(topic)
                if partition is None:
                    partition = self.sticky[topic] = self.pick(topic)
            try:
                queue = self.by_topic[topic][partition]
            except (KeyError, IndexError):
                queue = None
            if queue is None:
                queue = self._queue(topic, partition)
            batch = queue.open
            opened = batch is None or (batch.size + size > self.batch_size and batch.count)
            if opened:
                if batch is not None:
                    self._close(queue)
                batch = queue.open = ProducerBatch(queue, _monotonic())
                self.incomplete.add(batch)
            index = batch.count
            batch.values.append(value)
            batch.stamps.append(stamp)
            if key is not None or header is not None or callback is not None or batch.keys is not None \
                    or batch.headers is not None:
                self._extras(batch, index, key, header, callback)
            batch.count = count = index + 1
            batch.size = total = batch.size + size
            self.appended += size
            closed = total >= self.batch_size or count >= self.max_records
            if closed:
                self._close(queue)
        finally:
            lock.release()
        return RecordFuture(batch, index), closed, opened

    @staticmethod
    def _extras(batch: ProducerBatch, index: int, key, header, callback) -> None:
        """A record's key, header section and callback, in lists made on first need (lock held)."""
        if key is not None or batch.keys is not None:
            if batch.keys is None:
                batch.keys = [None] * index
            batch.keys.append(key)
        if header is not None or batch.headers is not None:
            if batch.headers is None:
                batch.headers = [b"\x00"] * index
            batch.headers.append(header if header is not None else b"\x00")
        if callback is not None:
            if batch.callbacks is None:
                batch.callbacks = []
            batch.callbacks.append((index, callback))

    def _queue(self, topic: str, partition: int) -> PartitionQueue:
        """The partition's queue, made on first use (lock held)."""
        row = self.by_topic.setdefault(topic, [])
        if partition >= len(row):
            row.extend([None] * (partition + 1 - len(row)))
        queue = row[partition]
        if queue is None:
            queue = row[partition] = PartitionQueue(topic, partition, self.on_wait)
            self.queue_list.append(queue)
        return queue

    def queue_for(self, topic: str, partition: int) -> PartitionQueue:
        with self.lock:
            return self._queue(topic, partition)

    def append_built(self, queue: PartitionQueue, batches: list) -> None:
        """Queue batches `send_many` encoded (see `built_batch`), behind what the partition holds."""
        with self.lock:
            if queue.open is not None:
                self._close(queue)
            for batch in batches:
                self.incomplete.add(batch)
                self.appended += batch.size
            queue.closed.extend(batches)
            self.ready_hint = True

    @staticmethod
    def built_batch(queue: PartitionQueue, data, count: int, created: float) -> ProducerBatch:
        """A batch already encoded (send_many): no record lists, `data` ready to send."""
        batch = ProducerBatch(queue, created)
        batch.values = batch.stamps = None
        batch.data = data
        batch.count = count
        batch.size = len(data)
        return batch

    @property
    def buffered(self) -> int:
        """Bytes of records not yet acknowledged (estimated as in batch_size)."""
        return self.appended - self.released

    def wait_for_space(self, size: int, deadline: float) -> bool:
        """Block while the buffer is full (True once there is room, False at the deadline).

        Wakes when the buffer has drained to `low_water` (or is empty), not at the first
        freed batch: one wake-up per quarter of the buffer instead of one per batch.
        """
        with self.lock:
            self.waiting_for_space += 1
            try:
                while True:
                    buffered = self.appended - self.released
                    if not buffered or buffered + size <= self.low_water:
                        return True
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self.space.wait(min(left, 0.1))
            finally:
                self.waiting_for_space -= 1

    def close_all_open(self) -> list[ProducerBatch]:
        """Close every open batch (flush); return every batch not done yet."""
        with self.lock:
            for queue in self.queue_list:
                if queue.open is not None:
                    self._close(queue)
            return list(self.incomplete)

    # ------------------------------------------------------------ shared

    def _close(self, queue: PartitionQueue) -> None:
        """Move the open batch to the closed queue (lock held); move the sticky partition on."""
        queue.closed.append(queue.open)
        queue.open = None
        self.ready_hint = True
        topic = queue.topic
        if self.sticky.get(topic) == queue.partition:
            self.sticky[topic] = self.pick(topic, queue.partition)

    def pick(self, topic: str, leaving: int | None = None) -> int:
        """A sticky partition for `topic`: at random among those with a live leader (all, if none
        has one), other than `leaving` when there is another."""
        choices = self.available.get(topic) or range(self.partition_counts[topic])
        if leaving is not None and len(choices) > 1 and leaving in choices:
            nxt = random.randrange(len(choices) - 1)
            chosen = choices[nxt]
            return choices[-1] if chosen == leaving else chosen
        return choices[random.randrange(len(choices))]

    def learn(self, topic: str, leaders: tuple[int, ...], live) -> None:
        """Metadata for `topic`: its partition count, and which partitions' leaders are in `live`
        (node ids). A sticky partition that lost its leader is given up for another."""
        available = tuple(p for p, node in enumerate(leaders) if node >= 0 and node in live)
        with self.lock:
            self.partition_counts[topic] = len(leaders)
            if len(available) == len(leaders):
                self.available.pop(topic, None)
            else:
                self.available[topic] = available
            sticky = self.sticky.get(topic)
            if sticky is not None and available and sticky not in available:
                del self.sticky[topic]  # the next null-keyed record picks again

    # ------------------------------------------------------------ the sender side

    def release(self, batch: ProducerBatch) -> None:
        """A batch is resolved: forget it and free its memory (I/O lock held; no accumulator lock)."""
        self.incomplete.discard(batch)
        self.released += batch.size
        if self.waiting_for_space and self.appended - self.released <= self.low_water:
            with self.lock:
                self.space.notify_all()

    def pending(self) -> int:
        return len(self.incomplete)

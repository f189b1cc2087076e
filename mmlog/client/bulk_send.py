"""`Producer.send_many`: many records encoded at once, without a Python loop per record.

A mixin of `Producer` (producer.py), with the conversion of what send() and send_many() accept
(bytes-like, str, numpy arrays, a buffer with offsets) into what the encoder takes."""

from __future__ import annotations

import numbers
import time

import numpy as np

from mmlog.client import encode
from mmlog.client.accumulator import RECORD_OVERHEAD
from mmlog.client.futures import BulkFuture, ProducerClosed
from mmlog.client.transactions import IN_TRANSACTION
from mmlog.errors import MessageTooLarge, UnknownTopicOrPartition
from mmlog.protocol import compression

_time_ns = time.time_ns
_monotonic = time.monotonic


class BulkSend:
    """Queues a whole column of records as ready batches, partitioned by numpy."""

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


def to_bytes(value, what: str) -> bytes:
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
        return encode.Column.from_list([to_bytes(x, what) if x is not None else None for x in items],
                                       all_null_ok=null_column)


def _is_buffer(obj) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False

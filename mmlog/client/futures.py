"""What `Producer.send` and `Producer.send_many` hand back: futures of delivery.

A record's fate is its batch's fate: the broker appends a batch whole, at one base
offset, or not at all. So a `RecordFuture` is just (batch, index); the batch holds
the outcome once, and a record's offset is ``base_offset + index``. Completing a
batch of 50 records is one assignment, not 50.

A batch is *resolved* when its outcome is known, and *done* once the callbacks
registered on it have run (as in Kafka's Java client, `flush()` and `get()`
return only after the callbacks). `get()`/`result()` wait for done.

Callbacks take ``(metadata, exception)``, exactly one of them None. They run on
the producer's I/O thread, or on a thread calling `send()`, `get()` or `flush()`
that happened to do the I/O; callbacks of one partition run in the order of its
records. They must not block (no `flush()` inside a callback).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from mmlog.errors import KafkaError, RequestTimedOut


class ProducerTimeout(RequestTimedOut, TimeoutError):
    """A wait of the producer ran out: `get(timeout)`, `flush(timeout)`, a full buffer, delivery timeout."""


class ProducerClosed(KafkaError):
    """The producer was closed (or its I/O thread failed) before the record could be sent."""

    code = -1


class RecordMetadata(NamedTuple):
    """Where a record was written. offset is -1 with acks=0 (the broker does not answer)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms since the epoch (CreateTime, as sent)


_monotonic = time.monotonic
log = logging.getLogger("mmlog.producer")

# One lock for the state transitions of every batch: contention is nil (one
# transition per batch), and it spares each batch a Lock of its own.
STATE_LOCK = threading.Lock()


class BatchOutcome:
    """The outcome part of a producer batch: resolved -> callbacks fired -> done."""

    __slots__ = ()

    # Subclasses (ProducerBatch) define these slots:
    #   base_offset, error, resolved, fired, done, done_at, callbacks, _event

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        start = _monotonic()
        driven = self._before_wait(timeout)
        if driven is not None:
            return driven
        with STATE_LOCK:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(None if timeout is None else max(0.0, timeout - (_monotonic() - start)))

    def add_callback(self, index: int | None, fn: Callable) -> None:
        """Register fn(metadata, exc) for record `index` (None: the whole batch); call it now if fired."""
        with STATE_LOCK:
            if not self.fired:
                if self.callbacks is None:
                    self.callbacks = []
                self.callbacks.append((index, fn))
                return
        _call(fn, self.metadata(index) if index is not None else self, self.error)

    def resolve(self, base_offset: int, error: BaseException | None) -> bool:
        """Record the outcome; True if callbacks wait to be fired (else the batch is done now)."""
        self.base_offset = base_offset
        self.error = error
        self.done_at = _monotonic()
        self.resolved = True
        with STATE_LOCK:
            if self.callbacks:
                return True
            self.fired = self.done = True  # no callback to run: done at once (one lock, not three)
            event = self._event
        if event is not None:
            event.set()
        return False

    def fire(self) -> None:
        """Run the callbacks (in registration order), then mark the batch done."""
        with STATE_LOCK:
            callbacks, self.callbacks = self.callbacks, None
            self.fired = True
        if callbacks:
            error = self.error
            for index, fn in callbacks:
                _call(fn, self.metadata(index) if index is not None else self, error if index is not None else None)
        with STATE_LOCK:
            self.done = True
            event = self._event
        if event is not None:
            event.set()

    def _before_wait(self, timeout: float | None) -> bool | None:
        """Called before a thread blocks on the outcome: the producer's waiting thread may do the I/O
        itself until the batch is done (True) or the timeout passes (False); None: block and wait."""
        return None

    def metadata(self, index: int) -> RecordMetadata:
        raise NotImplementedError


def _call(fn, metadata, error) -> None:
    try:
        if error is not None:
            fn(None, error)
        else:
            fn(metadata, None)
    except Exception:  # noqa: BLE001 - a callback's bug must not stop delivery
        log.exception("producer callback raised")


class RecordFuture:
    """The delivery of one record: `get(timeout)` (= `result`) returns its RecordMetadata or raises."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def get(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise ProducerTimeout(f"record not acknowledged within {timeout} s")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    result = get

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise ProducerTimeout(f"record not acknowledged within {timeout} s")
        return batch.error

    def add_callback(self, fn: Callable[[RecordMetadata | None, BaseException | None], Any]) -> "RecordFuture":
        """fn(metadata, exc) once the record is acknowledged or has failed (at once if it already has)."""
        self._batch.add_callback(self._index, fn)
        return self

    @property
    def sent_at(self) -> float:
        """time.monotonic() when the record's batch was opened (for latency measurements)."""
        return self._batch.created

    @property
    def acked_at(self) -> float | None:
        """time.monotonic() when the outcome arrived (None before)."""
        return self._batch.done_at if self._batch.resolved else None

    def __repr__(self) -> str:
        b = self._batch
        state = "pending" if not b.done else ("failed" if b.error is not None else "done")
        return f"<RecordFuture {b.topic}-{b.partition}#{self._index} {state}>"


class BulkMetadata(NamedTuple):
    """Where each record of a `send_many` call went, in the order the records were given."""

    topic: str
    partitions: np.ndarray  # int32, one per record
    offsets: np.ndarray  # int64, one per record (-1 with acks=0)
    timestamps: np.ndarray  # int64 ms, one per record


class BulkFuture:
    """The delivery of every record of one `send_many` call (its batches, in any partitions).

    `result(timeout)` waits for all of them and returns a BulkMetadata (numpy arrays,
    input order), or raises the first batch error; `errors()` lists every failed
    batch's exception; `add_callback(fn)` calls fn(bulk_metadata, exc) once all are done.
    """

    def __init__(self, topic: str, batches: list, order: np.ndarray, bounds: np.ndarray,
                 partitions: np.ndarray, stamps: np.ndarray) -> None:
        self.topic = topic
        self.batches = batches
        self._order = order
        self._bounds = bounds
        self._partitions = partitions
        self._stamps = stamps
        self._lock = threading.Lock()
        self._left = len(batches)
        self._callbacks: list | None = []
        self.created = time.monotonic()
        for batch in batches:
            batch.add_callback(None, self._batch_done)

    def __len__(self) -> int:
        return len(self._order)

    def _batch_done(self, batch, _exc) -> None:
        with self._lock:
            self._left -= 1
            if self._left:
                return
            callbacks, self._callbacks = self._callbacks, None
        for fn in callbacks:
            self._call(fn)

    def _call(self, fn) -> None:
        errors = self.errors()
        if errors:
            _call(fn, None, errors[0])
        else:
            _call(fn, self._metadata(), None)

    def done(self) -> bool:
        return all(b.done for b in self.batches)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch in self.batches:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not batch.wait(left):
                return False
        return True

    def errors(self) -> list[BaseException]:
        return [b.error for b in self.batches if b.resolved and b.error is not None]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.wait(timeout):
            raise ProducerTimeout(f"{len(self)} records not acknowledged within {timeout} s")
        errors = self.errors()
        return errors[0] if errors else None

    def result(self, timeout: float | None = None) -> BulkMetadata:
        error = self.exception(timeout)
        if error is not None:
            raise error
        return self._metadata()

    get = result

    def _metadata(self) -> BulkMetadata:
        offsets = np.full(len(self._order), -1, dtype=np.int64)
        order, bounds = self._order, self._bounds
        for j, batch in enumerate(self.batches):
            if batch.base_offset >= 0:
                a, b = int(bounds[j]), int(bounds[j + 1])
                offsets[order[a:b]] = np.arange(batch.base_offset, batch.base_offset + (b - a), dtype=np.int64)
        return BulkMetadata(self.topic, self._partitions, offsets, self._stamps)

    def add_callback(self, fn: Callable[[BulkMetadata | None, BaseException | None], Any]) -> "BulkFuture":
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append(fn)
                return self
        self._call(fn)
        return self

    @property
    def acked_at(self) -> float | None:
        if not all(b.resolved for b in self.batches):
            return None
        return max((b.done_at for b in self.batches), default=self.created)

    def __repr__(self) -> str:
        return f"<BulkFuture {self.topic} {len(self)} records in {len(self.batches)} batches>"

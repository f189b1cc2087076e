"""What becomes of a sent batch: its answer read, then success, a retry held in order, or failure.

A mixin of `Sender` (sender.py), whose docstring tells why a failed batch is held until nothing
of its partition is in flight (ordering) and how idempotence restamps after a gap."""

from __future__ import annotations

import logging
import time

from mmlog.client.channel import Channel
from mmlog.client.connection import ConnectionClosed
from mmlog.client.produce_requests import PRODUCE_VERSION
from mmlog.errors import (KafkaError, KafkaStorageError, LeaderNotAvailable, NotLeaderOrFollower,
                          OutOfOrderSequenceNumber, UnknownServerError, UnknownTopicOrPartition, error_for_code)
from mmlog.protocol import ProtocolError, decode_response
from mmlog.protocol.messages import produce

log = logging.getLogger("mmlog.producer")

# Errors after which the leader may have moved (Java's InvalidMetadataException: a failed log dir too).
METADATA_ERRORS = frozenset({NotLeaderOrFollower.code, UnknownTopicOrPartition.code, LeaderNotAvailable.code,
                             KafkaStorageError.code})


class ProduceOutcomes:
    """Reads Produce answers and resolves, retries or fails each batch."""

    def _on_response(self, channel: Channel, batches: list, frame, exc) -> None:
        """A response frame (None with acks=0, once written), or the exception that lost it."""
        if exc is None and frame is not None:
            if len(batches) == 1:
                batch = batches[0]
                template = self._wire(batch.queue)[1]
                values = template.read(frame) if template is not None else None
                if values is not None and values[1] == 0:  # (correlation id, error code, base offset, ...)
                    self._throttled(values[5])
                    self._succeeded(batch, values[2])
                    return
            try:
                _, frame = decode_response(produce.API_KEY, PRODUCE_VERSION, frame)
            except ProtocolError as bad:
                channel.fail(ConnectionClosed(f"{channel.host}:{channel.port}: bad response: {bad}"))
                exc = bad
        self._on_answer(channel, batches, frame, exc)

    def _on_answer(self, channel: Channel, batches: list, response, exc) -> None:
        if exc is not None:
            if not isinstance(exc, KafkaError):
                exc = ConnectionClosed(f"{channel.host}:{channel.port}: {exc}")
            self._need_metadata()
            for batch in batches:
                self._failed(batch, exc)
            return
        if response is None:  # acks=0: written to the socket, no answer will come
            for batch in batches:
                self._succeeded(batch, -1)
            return
        self._throttled(response.throttle_time_ms)
        results = {}
        for topic in response.responses:
            for part in topic.partition_responses:
                results[(topic.name, part.index)] = part
        for batch in batches:
            self._outcome(batch, results.get((batch.topic, batch.partition)))

    def _throttled(self, ms: int) -> None:
        """Keep the throttle time a broker's client quota put in an answer (the broker mutes us meanwhile)."""
        self.throttle_ms = ms
        if ms > self.throttle_ms_max:
            self.throttle_ms_max = ms

    def _outcome(self, batch, part) -> None:
        """Resolve or retry a batch after its partition's answer (None: the response left it out)."""
        if part is None:
            self._failed(batch, UnknownServerError(
                f"no answer for {batch.topic}-{batch.partition} in the produce response"))
        elif part.error_code == 0:
            self._succeeded(batch, part.base_offset)
        else:
            if part.error_code in METADATA_ERRORS:
                self._need_metadata()
            message = f"{batch.topic}-{batch.partition}"
            if part.error_message:
                message += f": {part.error_message}"
            self._failed(batch, error_for_code(part.error_code, message))

    def _succeeded(self, batch, base_offset: int) -> None:
        queue = batch.queue
        _pop_inflight(queue, batch)
        if queue.held:
            # A later batch is written; retrying the held ones would reorder the partition.
            held, queue.held = queue.held, []
            for earlier in held:
                exc = earlier.last_error
                self._resolve(earlier, -1, type(exc)(
                    f"{exc} (not retried: a later batch of {queue.topic}-{queue.partition} was written, "
                    f"and a retry would reorder the partition)") if isinstance(exc, KafkaError) else exc)
        self._resolve(batch, base_offset, None)

    def _failed(self, batch, exc: BaseException) -> None:
        queue = batch.queue
        _pop_inflight(queue, batch)
        batch.last_error = exc
        now = time.monotonic()
        retriable = getattr(exc, "retriable", False) or (
            self.idempotent and isinstance(exc, OutOfOrderSequenceNumber) and bool(queue.held))  # behind a retry
        if retriable and batch.attempts <= self.retries and now < batch.created + self.delivery_timeout:
            queue.held.append(batch)
            log.debug("msg=retry topic=%s partition=%d attempt=%d error=%r", batch.topic, batch.partition,
                      batch.attempts, exc)
        else:
            self._resolve(batch, -1, exc)
            if self.txn is not None:
                self.txn.fail(exc)  # the transaction can only abort now (the abort starts a new epoch)
            elif self.idempotent and self.producer_id >= 0 and batch.stamped == (self.producer_id, self.producer_epoch):
                # Its partition's sequence has a gap now: a new producer id, sequences from 0.
                log.warning("msg=new_producer_id reason=%r", exc)
                self.producer_id = -1
        if queue.held and not queue.inflight:
            held, queue.held = queue.held, []
            held[0].retry_at = now + self.retry_backoff
            queue.closed.extendleft(reversed(held))
            self.needs_io_thread = True

    def _resolve(self, batch, base_offset: int, exc: BaseException | None) -> None:
        self.acc.release(batch)
        batch.data = batch.values = batch.keys = batch.headers = None  # futures may outlive the bytes
        if batch.resolve(base_offset, exc):
            self.completions.append(batch)


def _pop_inflight(queue, batch) -> None:
    if queue.inflight and queue.inflight[0] is batch:
        queue.inflight.popleft()
    else:  # responses of one partition arrive in order; this is only defensive
        try:
            queue.inflight.remove(batch)
        except ValueError:
            pass

"""The sender's side of idempotence and transactions: the producer id, sequence stamps, partitions added.

A mixin of `Sender` (sender.py), whose docstring tells when a batch is stamped and why a gap in a
partition's sequence means a new producer id."""

from __future__ import annotations

import logging
import time

from mmlog.client.connection import ConnectionClosed
from mmlog.errors import KafkaError
from mmlog.protocol.messages import init_producer_id
from mmlog.protocol.records import set_producer

log = logging.getLogger("mmlog.producer")


class Idempotence:
    """Gets the producer id, stamps batches with their sequences, adds partitions to the transaction."""

    def _init_producer_id(self) -> None:
        """Idempotence: a producer id and epoch from any broker (I/O thread; bounded blocking)."""
        self.blocking = True
        try:
            body = self.cluster.request_any(init_producer_id.API_KEY, 1, init_producer_id.REQUEST(
                transactional_id=None, transaction_timeout_ms=60_000), self.cluster.timeout)
            if body.error_code == 0:
                self.producer_id, self.producer_epoch = body.producer_id, body.producer_epoch
                log.debug("msg=producer_id id=%d epoch=%d", self.producer_id, self.producer_epoch)
                return
            log.debug("msg=init_producer_id_failed error_code=%d", body.error_code)
        except (ConnectionClosed, KafkaError) as exc:
            log.debug("msg=init_producer_id_failed error=%r", exc)
        finally:
            self.blocking = False
        self._producer_id_next = time.monotonic() + self.retry_backoff

    def _in_transaction(self, ready: dict, io_thread: bool) -> dict:
        """The queues whose partitions are in the transaction: new ones are added first (AddPartitionsToTxn,
        on the I/O thread); those that cannot be added yet wait, and fail if the coordinator refuses."""
        txn = self.txn
        new = {(q.topic, q.partition) for queues in ready.values() for q in queues} - txn.added
        if new and io_thread:
            self.blocking = True
            try:
                txn.add_partitions(new, self.request_timeout)
            except KafkaError as exc:
                log.debug("msg=add_partitions_failed error=%r", exc)
                txn.fail(exc)
                for queues in ready.values():
                    for queue in queues:
                        if (queue.topic, queue.partition) in new:
                            for batch in list(queue.closed):
                                self._resolve(batch, -1, exc)
                            queue.closed.clear()
            finally:
                self.blocking = False
        elif new:
            self.needs_io_thread = True
        return {node: kept for node, queues in ready.items()
                if (kept := [q for q in queues if (q.topic, q.partition) in txn.added])}

    def _stamp(self, queue, batch) -> None:
        """Idempotence: the producer id, epoch and the partition's next sequence into a batch's header
        (sequences start at 0 for each producer id and epoch)."""
        if queue.sequence_of != (self.producer_id, self.producer_epoch):
            queue.sequence_of, queue.next_sequence = (self.producer_id, self.producer_epoch), 0
        set_producer(batch.data, self.producer_id, self.producer_epoch, queue.next_sequence,
                     transactional=self.txn is not None)
        batch.stamped = (self.producer_id, self.producer_epoch)
        queue.next_sequence = (queue.next_sequence + batch.count) & 0x7FFFFFFF

"""A transactional producer's half of Kafka's transaction protocol: its coordinator and its state.

    producer = Producer(bootstrap, transactional_id="orders-writer-1")
    producer.init_transactions()                 # fences older producers of the same id
    producer.begin_transaction()
    producer.send("orders", b"...")
    producer.send_offsets_to_transaction({("input", 0): 42}, "my-group")
    producer.commit_transaction()                # or abort_transaction()

States (Kafka's TransactionManager, simplified): UNINITIALIZED → READY ⇄
IN_TRANSACTION → (commit | abort) → READY; a batch that fails inside a
transaction makes it ABORTABLE (commit raises, abort is allowed); being fenced
(another producer initialised the same id, or the coordinator aborted a
transaction past its timeout) is FATAL: the producer must be closed.

Partitions are added to the transaction by the sender before the first batch for
them goes out (`add_partitions`, on the producer's I/O thread, bounded), so the
coordinator always knows every partition that may hold the transaction's data.
Requests to the coordinator go over one connection of this manager's own,
found with FindCoordinator (key type 1) and looked up again on NOT_COORDINATOR.
Retriable answers (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, ...)
are retried with back-off until the call's deadline.

The producer's transaction methods above (`init_transactions`, ...) are `TransactionalProducer`,
a mixin of `Producer`, at the end of this module.
"""

from __future__ import annotations

import threading
import time

from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.futures import ProducerTimeout
from mmlog.errors import (
    ConcurrentTransactions,
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    InvalidProducerEpoch,
    KafkaError,
    NotCoordinator,
    ProducerFenced,
    error_for_code,
)
from mmlog.protocol.messages import (add_offsets_to_txn, add_partitions_to_txn, end_txn, find_coordinator,
                                     init_producer_id, txn_offset_commit)

UNINITIALIZED, READY, IN_TRANSACTION, ABORTABLE, FATAL = "uninitialized", "ready", "in transaction", \
    "abortable error", "fatal error"
TRANSACTION, GROUP = 1, 0  # FindCoordinator key types
CONCURRENT_BACKOFF = 0.005
_LOOK_AGAIN = (NotCoordinator, CoordinatorNotAvailable, ConnectionClosed)
_RETRY = (ConcurrentTransactions, CoordinatorLoadInProgress) + _LOOK_AGAIN
_FENCED = (ProducerFenced, InvalidProducerEpoch)


class TransactionError(KafkaError):
    """A transaction call made in the wrong state (begin twice, commit without begin, ...)."""


class TransactionManager:
    """The transactional id's producer id and epoch, the open transaction's partitions, its coordinator."""

    def __init__(self, cluster, transactional_id: str, timeout_ms: int, retry_backoff: float,
                 request_timeout: float) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must be a non-empty string")
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.timeout_ms = int(timeout_ms)
        self.retry_backoff = retry_backoff
        self.request_timeout = request_timeout
        self.state = UNINITIALIZED
        self.producer_id = self.producer_epoch = -1
        self.added: set[tuple[str, int]] = set()
        self.groups: set[str] = set()  # groups whose offsets the transaction commits
        self.error: BaseException | None = None  # what made the transaction abortable or the producer fatal
        self._lock = threading.Lock()  # one coordinator request at a time (app thread and I/O thread)
        self._conns: dict[tuple[int, str], BrokerConnection] = {}  # (key type, key) -> coordinator connection

    # ------------------------------------------------------------ the calls

    def init(self, timeout: float) -> tuple[int, int]:
        """InitProducerId with the transactional id: (producer id, epoch), fencing older producers."""
        if self.state not in (UNINITIALIZED, READY):
            raise TransactionError(f"init_transactions() in state {self.state}")
        body = self._call(TRANSACTION, self.transactional_id, init_producer_id.API_KEY, 1, init_producer_id.REQUEST(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms), timeout,
            lambda r: r.error_code)
        self.producer_id, self.producer_epoch = body.producer_id, body.producer_epoch
        self.state = READY
        return self.producer_id, self.producer_epoch

    def begin(self) -> None:
        self._check_not_fatal()
        if self.state != READY:
            raise TransactionError(f"begin_transaction() in state {self.state}"
                                   + (" (call init_transactions() first)" if self.state == UNINITIALIZED else ""))
        self.added.clear()
        self.groups.clear()
        self.error = None
        self.state = IN_TRANSACTION

    def begin_check(self, what: str) -> None:
        """Raise the reason `what` (a send) cannot be part of a transaction now."""
        self._check_in_transaction(what)

    def add_partitions(self, keys, timeout: float) -> None:
        """AddPartitionsToTxn for partitions new to the transaction (the sender, before their first batch)."""
        new = sorted(set(keys) - self.added)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for topic, p in new:
            topics.setdefault(topic, []).append(p)

        def code(r) -> int:
            codes = {p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
            return max(codes - {0}, default=0, key=lambda c: c != 55)  # OPERATION_NOT_ATTEMPTED last

        self._call(TRANSACTION, self.transactional_id, add_partitions_to_txn.API_KEY, 2, add_partitions_to_txn.REQUEST(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]), timeout, code)
        self.added.update(new)

    def send_offsets(self, offsets: dict, group_id: str, timeout: float) -> None:
        """The consumer positions to commit with the transaction: AddOffsetsToTxn at the transaction
        coordinator, then TxnOffsetCommit at the group's coordinator (pending until the commit)."""
        self._check_in_transaction("send_offsets_to_transaction()")
        deadline = time.monotonic() + timeout
        self._call(TRANSACTION, self.transactional_id, add_offsets_to_txn.API_KEY, 2, add_offsets_to_txn.REQUEST(
            transactional_id=self.transactional_id, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            group_id=group_id), timeout, lambda r: r.error_code)
        self.groups.add(group_id)
        topics: dict[str, list] = {}
        for (topic, p), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append({"partition_index": p, "committed_offset": int(offset),
                                                 "committed_leader_epoch": -1, "committed_metadata": ""})

        def code(r) -> int:
            return max({p.error_code for t in r.topics for p in t.partitions} - {0}, default=0)

        self._call(GROUP, group_id, txn_offset_commit.API_KEY, 2, txn_offset_commit.REQUEST(
            transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]),
            max(0.0, deadline - time.monotonic()), code)

    def end(self, commit: bool, timeout: float) -> None:
        """EndTxn; afterwards the producer may begin its next transaction."""
        what = "commit_transaction()" if commit else "abort_transaction()"
        self._check_not_fatal()
        if self.state == ABORTABLE and commit:
            raise TransactionError(f"the transaction cannot commit: {self.error!r}; abort it")
        if self.state not in (IN_TRANSACTION, ABORTABLE):
            raise TransactionError(f"{what} in state {self.state}")
        if self.added or self.groups:  # else nothing joined the transaction: nothing for the coordinator to end
            self._call(TRANSACTION, self.transactional_id, end_txn.API_KEY, 2, end_txn.REQUEST(
                transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, committed=commit), timeout, lambda r: r.error_code)
        self.added.clear()
        self.groups.clear()
        self.state = READY

    def fail(self, exc: BaseException) -> None:
        """A batch of the transaction failed: it can only abort now (or the producer is fenced)."""
        if self.state == FATAL:
            return
        self.error = exc
        self.state = FATAL if isinstance(exc, _FENCED) else ABORTABLE if self.state == IN_TRANSACTION else self.state

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # ------------------------------------------------------------ plumbing

    def _check_not_fatal(self) -> None:
        if self.state == FATAL:
            raise self.error if isinstance(self.error, KafkaError) else TransactionError(str(self.error))

    def _check_in_transaction(self, what: str) -> None:
        self._check_not_fatal()
        if self.state != IN_TRANSACTION:
            raise TransactionError(f"{what} outside a transaction (state {self.state})")

    def _call(self, key_type: int, key: str, api_key: int, version: int, body, timeout: float, code_of):
        """Send to the coordinator of `key` until it answers without a retriable error or time runs out."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                try:
                    response = self._coordinator(key_type, key, deadline).request(api_key, version, body)
                    code = code_of(response)
                    if code == 0:
                        return response
                    raise error_for_code(code, f"{type(body).__name__.removesuffix('Request')} for {key!r}")
                except _RETRY as exc:
                    if isinstance(exc, _LOOK_AGAIN):
                        self._forget(key_type, key)
                    # The previous transaction's markers take milliseconds: ask again soon (Kafka's
                    # producer waits 20 ms there, not retry.backoff.ms).
                    pause = CONCURRENT_BACKOFF if isinstance(exc, ConcurrentTransactions) else self.retry_backoff
                    if time.monotonic() + pause >= deadline:
                        raise
                    time.sleep(pause)
                except _FENCED as exc:
                    self.error, self.state = exc, FATAL
                    raise

    def _coordinator(self, key_type: int, key: str, deadline: float) -> BrokerConnection:
        conn = self._conns.get((key_type, key))
        if conn is not None:
            return conn
        found = self.cluster.request_any(find_coordinator.API_KEY, 2, find_coordinator.REQUEST(
            key=key, key_type=key_type), max(0.5, min(self.request_timeout, deadline - time.monotonic())))
        if found.error_code:
            raise error_for_code(found.error_code, found.error_message or "")
        conn = BrokerConnection(found.host, found.port, client_id=self.cluster.client_id,
                                timeout=self.request_timeout, security=self.cluster.security)
        self._conns[(key_type, key)] = conn
        return conn

    def _forget(self, key_type: int, key: str) -> None:
        conn = self._conns.pop((key_type, key), None)
        if conn is not None:
            conn.close()


__all__ = ["TransactionManager", "TransactionError"]


class TransactionalProducer:
    """A mixin of `Producer` (producer.py): its transaction methods, over the `TransactionManager`."""

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
        deadline = time.monotonic() + (self.delivery_timeout if timeout is None else timeout)
        self.flush(max(0.0, deadline - time.monotonic()))
        txn.end(True, max(0.0, deadline - time.monotonic()))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: the transaction's records stay in the log, but read_committed consumers never see them."""
        txn = self._transactions()
        deadline = time.monotonic() + (self.delivery_timeout if timeout is None else timeout)
        try:
            self.flush(max(0.0, deadline - time.monotonic()))
        except ProducerTimeout:
            pass  # what is still in flight is aborted with the rest
        failed = txn.state == ABORTABLE
        txn.end(False, max(0.0, deadline - time.monotonic()))
        if failed:  # a batch lost inside the transaction left a gap in a sequence: start the next epoch
            self.init_transactions(max(0.0, deadline - time.monotonic()))

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise TransactionError("transactions need Producer(transactional_id=...)")
        return self._txn

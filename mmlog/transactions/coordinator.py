"""The transaction coordinator: Kafka's transactional-id protocol, run on the control thread.

Theory of operation
-------------------
A transactional id belongs to partition `transaction_partition(id)` (ipc/cluster_view.py) of `__transaction_state`
(`state_log.py`), and the leader of that partition is its coordinator. Processors
forward InitProducerId (with a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn here as control ops; each op takes the request's
fields as a dict and a `reply` callable, like the group coordinator's.

Ownership. `sync` (at start, when partitions change role here, and when a request
finds its partition not loaded) compares the partitions this broker leads with the
ones it has loaded: a partition newly led (or led in a new leader epoch) is loaded
from its log, and its transactions left half-way (Prepare*) are completed; a
partition lost is dropped, and requests waiting on it are answered NOT_COORDINATOR.
The leader epoch is the coordinator epoch written into every marker, so leaders can
fence a deposed coordinator.

Transitions (`metadata.py`) are written before they take effect: the new state
is appended to the log and becomes current only once the high watermark has
passed it (`writes.py`, polled every WRITE_POLL_S while writes are in flight);
meanwhile the id is pending and other requests for it get CONCURRENT_TRANSACTIONS.
If leadership is lost first, the write's requester gets NOT_COORDINATOR and the
next leader decides from its own log, which holds the write only if it was
replicated.

Ending a transaction: EndTxn writes Prepare{Commit,Abort} and answers the
producer at once; then markers go to the leader of every partition in the
transaction (WriteTxnMarkers, `markers.py`, `completion.py`), retried every MARKER_RETRY_S for
the partitions that failed (leader moved, not available) until all have it;
partitions of deleted topics are dropped. The consumer groups of
`send_offsets_to_transaction` get their marker at their group coordinator (a
topic entry named `__consumer_offsets/<group>`: mmlog's own, since a group here
has no offsets partition). Then Complete* is written and the producer may begin
its next transaction.

Timers: transactions open longer than their timeout are aborted by fencing the
producer (epoch + 1, then abort) every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`; ids idle for
`transactional.id.expiration.ms` are removed (a null record) every
`transaction.remove.expired.transaction.cleanup.interval.ms`.
"""

from __future__ import annotations

import logging

from mmlog.errors import (
    ConcurrentTransactions,
    CoordinatorNotAvailable,
    InvalidProducerIdMapping,
    InvalidRequest,
    InvalidTransactionTimeout,
    KafkaError,
    NotCoordinator,
    OperationNotAttempted,
    ProducerFenced,
    UnknownTopicOrPartition,
)
from mmlog.ipc.cluster_view import transaction_partition
from mmlog.ipc.control_ops import (
    TXN_ADD_OFFSETS,
    TXN_ADD_PARTITIONS,
    TXN_DESCRIBE,
    TXN_END,
    TXN_FIND_COORDINATOR,
    TXN_INIT_PRODUCER_ID,
    TXN_LIST,
)
from mmlog.log.state import LEADER_ROLE as LEADER
from mmlog.security.client import inter_broker
from mmlog.transactions import state_log
from mmlog.transactions.completion import Completion
from mmlog.transactions.markers import MarkerSender
from mmlog.transactions.metadata import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    STATE_NAMES,
    TxnState,
    now_ms,
)
from mmlog.transactions.writes import LoadedPartition

log = logging.getLogger(__name__)

TOPIC = state_log.TOPIC
RETRY_S = 1.0  # a sync that failed (a partition that would not load) is tried again after this


class TransactionCoordinator(Completion):
    """The transactional ids of the `__transaction_state` partitions this broker leads."""

    def __init__(self, config, manager, store, call_later, call_soon) -> None:
        self.config = config
        self.manager = manager
        self.store = store
        self.call_later = call_later
        self.call_soon = call_soon
        self.me = config["broker.id"]
        self.partitions = config["transaction.state.log.num.partitions"]
        self.loaded: dict[int, LoadedPartition] = {}
        self.sender = MarkerSender(f"txn-coordinator-{self.me}", call_soon, security=inter_broker(config))
        self._polling = False
        self._retry_due = False

    # ------------------------------------------------------------ life

    def start(self) -> None:
        self.sender.start()
        self.call_soon(self.sync)  # what this broker leads at start (then: roles_changed, and a request's miss)
        self._every(self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000,
                    self.abort_timed_out)
        self._every(self.config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000,
                    self.remove_expired)

    def stop(self) -> None:
        self.sender.stop()

    def _every(self, seconds: float, fn) -> None:
        def tick() -> None:
            try:
                fn()
            except Exception:  # noqa: BLE001 - a failed round is retried next time
                log.exception("transaction coordinator: %s failed", fn.__name__)
            self.call_later(seconds, tick)

        self.call_later(seconds, tick)

    def ops(self) -> dict:
        return {
            TXN_FIND_COORDINATOR: self.find_coordinator,
            TXN_INIT_PRODUCER_ID: self.init_producer_id,
            TXN_ADD_PARTITIONS: self.add_partitions,
            TXN_ADD_OFFSETS: self.add_offsets,
            TXN_END: self.end_txn,
            TXN_DESCRIBE: self.describe,
            TXN_LIST: self.list,
        }

    # ------------------------------------------------------------ ownership

    def _led_epochs(self) -> dict[int, int]:
        """{partition: leader epoch} of the `__transaction_state` partitions this broker leads now."""
        info = self.manager.topics().get(TOPIC)
        if info is None:
            return {}
        led = {}
        for p in range(info.partitions):
            if info.assignment is not None and self.me not in info.assignment[p]:
                continue
            rep = self.manager.partition(TOPIC, p).replication()
            if info.assignment is None:
                led[p] = 0  # standalone: every partition is ours
            elif rep.role == LEADER and rep.leader_id == self.me:
                led[p] = rep.leader_epoch
        return led

    def sync(self) -> None:
        """Load the partitions newly led, drop the ones lost (their waiting writes fail NOT_COORDINATOR). Run at
        start, when partitions change role here (the control plane's `roles_changed`) and when a request finds
        its partition not loaded; a sync that fails is tried again RETRY_S later."""
        try:
            self._sync()
        except Exception:  # noqa: BLE001 - a partition that will not load now is tried again
            log.exception("transaction coordinator: loading %s failed; again in %.0f s", TOPIC, RETRY_S)
            if not self._retry_due:
                self._retry_due = True
                self.call_later(RETRY_S, self._retry)

    def _retry(self) -> None:
        self._retry_due = False
        self.sync()

    def _sync(self) -> None:
        led = self._led_epochs()
        for p, loaded in list(self.loaded.items()):
            if led.get(p) != loaded.epoch:
                self._unload(p)
        for p, epoch in led.items():
            if p not in self.loaded:
                self._load(p, epoch)

    def _load(self, p: int, epoch: int) -> None:
        part = self.manager.partition(TOPIC, p)
        loaded = LoadedPartition(epoch, state_log.load(part))
        self.loaded[p] = loaded
        unfinished = [t for t, s in loaded.txns.items() if s.preparing]
        log.info("transaction coordinator for %s-%d in epoch %d: %d ids, %d to complete", TOPIC, p, epoch,
                 len(loaded.txns), len(unfinished))
        for txn_id in unfinished:
            self._complete(p, txn_id)

    def _unload(self, p: int) -> None:
        loaded = self.loaded.pop(p)
        for write in loaded.writes:
            write.done(NotCoordinator(f"no longer the coordinator of {TOPIC}-{p}"))
        log.info("transaction coordinator for %s-%d: resigned", TOPIC, p)

    def _owner(self, txn_id: str) -> tuple[int, LoadedPartition]:
        """The loaded partition of an id, or the error that tells the client to look again."""
        if not txn_id:
            raise InvalidRequest("empty transactional id")
        if not self.manager.has_topic(TOPIC):
            raise CoordinatorNotAvailable(f"{TOPIC} does not exist yet")
        p = transaction_partition(txn_id, self.manager.topic(TOPIC).partitions)
        loaded = self.loaded.get(p)
        if loaded is None:
            self.sync()
            loaded = self.loaded.get(p)
        if loaded is None:
            raise NotCoordinator(f"broker {self.me} does not lead {TOPIC}-{p}")
        return p, loaded

    # ------------------------------------------------------------ FindCoordinator

    def find_coordinator(self, args, reply) -> None:
        """Make `__transaction_state` if it does not exist (Kafka does on the first lookup); reply with
        the error code to answer meanwhile, or 0 once the topic exists."""
        if self.manager.has_topic(TOPIC):
            reply({"error_code": 0})
            return
        try:
            self._create_topic()
            reply({"error_code": 0 if self.manager.has_topic(TOPIC) else CoordinatorNotAvailable.code})
        except KafkaError as exc:
            log.warning("cannot create %s: %s", TOPIC, exc)
            reply({"error_code": CoordinatorNotAvailable.code, "error_message": str(exc)})

    def _create_topic(self) -> None:
        replication = self.config["transaction.state.log.replication.factor"]
        live = self.store.live_brokers()
        if not self.store.clustered:
            replication = 1
        elif live < replication:
            raise CoordinatorNotAvailable(f"{TOPIC} needs {replication} live brokers "
                                          f"(transaction.state.log.replication.factor), {live} are live")
        self.store.create_topic(self.manager, TOPIC, self.partitions, state_log.topic_configs(self.config, replication),
                                replication_factor=replication)
        log.info("created %s: %d partitions, replication factor %d", TOPIC, self.partitions, replication)

    # ------------------------------------------------------------ InitProducerId

    def init_producer_id(self, args, reply) -> None:
        txn_id, timeout_ms = args["transactional_id"], args["transaction_timeout_ms"]

        def answer(error=None, state: TxnState | None = None) -> None:
            reply({"error_code": error.code if error else 0,
                   "producer_id": state.producer_id if state else -1,
                   "producer_epoch": state.producer_epoch if state else -1})

        try:
            if not 0 < timeout_ms <= self.config["transaction.max.timeout.ms"]:
                raise InvalidTransactionTimeout(f"transaction timeout {timeout_ms} ms is not in 1 .. "
                                                f"transaction.max.timeout.ms ({self.config['transaction.max.timeout.ms']})")
            p, loaded = self._owner(txn_id)
            self._not_pending(loaded, txn_id)
            now = now_ms()
            current = loaded.txns.get(txn_id)
            expected = args.get("expected")  # (producer id, epoch) an InitProducerId v3+ names (KIP-360)
            if expected is not None and current is not None and expected[0] != current.producer_id:
                raise ProducerFenced(f"producer id {expected[0]} is not {txn_id}'s current one")
            if current is None:
                new = TxnState(self.store.next_producer_id(), 0, timeout_ms, EMPTY, -1, now)
            elif current.state == ONGOING:
                # The previous producer left a transaction open: fence it and abort it; the new one retries.
                self._write(p, txn_id, current.prepare_fence_and_abort(now),
                            lambda error: error or self._complete(p, txn_id))
                raise ConcurrentTransactions("aborting the previous producer's open transaction")
            elif expected is not None and expected[1] != current.producer_epoch:
                raise ProducerFenced(f"epoch {expected[1]} is not {txn_id}'s current epoch {current.producer_epoch}")
            else:
                new = current.prepare_init(timeout_ms, now, self.store.next_producer_id)
        except KafkaError as exc:
            answer(exc)
            return
        self._write(p, txn_id, new, lambda error: answer(error, None if error else new))

    # ------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions(self, args, reply) -> None:
        """Reply {topic: {partition: error code}}."""
        asked = [(t, p) for t, ps in args["topics"] for p in ps]

        def answer(codes: dict) -> None:
            out: dict = {}
            for t, p in asked:
                out.setdefault(t, {})[p] = codes.get((t, p), 0)
            reply(out)

        def fail(error) -> None:
            answer({key: error.code for key in asked})

        try:
            p, loaded, current = self._producer(args, adding=True)
            unknown = {key for key in asked if not self._exists(*key)}
            if unknown:
                answer({key: UnknownTopicOrPartition.code if key in unknown else OperationNotAttempted.code
                        for key in asked})
                return
            new = current.prepare_add(partitions=asked, now_ms=now_ms())
        except KafkaError as exc:
            fail(exc)
            return
        if new is None:
            answer({})
        else:
            self._write(p, args["transactional_id"], new, lambda error: fail(error) if error else answer({}))

    def add_offsets(self, args, reply) -> None:
        def answer(error=None) -> None:
            reply({"error_code": error.code if error else 0})

        try:
            p, loaded, current = self._producer(args, adding=True)
            new = current.prepare_add(groups=[args["group_id"]], now_ms=now_ms())
        except KafkaError as exc:
            answer(exc)
            return
        if new is None:
            answer()
        else:
            self._write(p, args["transactional_id"], new, answer)

    def _producer(self, args, adding: bool = False) -> tuple[int, LoadedPartition, TxnState]:
        """The id's partition and current state, checked against the requesting producer; an add
        (`adding`) while none is Ongoing begins the next transaction, even if refused (metadata.py)."""
        txn_id = args["transactional_id"]
        p, loaded = self._owner(txn_id)
        current = loaded.txns.get(txn_id)
        if current is None:
            raise InvalidProducerIdMapping(f"no producer holds transactional id {txn_id!r}")
        current.check_producer(args["producer_id"], args["producer_epoch"])
        if adding and current.begins_next():
            loaded.next_begun.add(txn_id)
        self._not_pending(loaded, txn_id)
        return p, loaded, current

    def _exists(self, topic: str, p: int) -> bool:
        info = self.manager.topics().get(topic)
        return info is not None and 0 <= p < info.partitions and not topic.startswith("__transaction")

    # ------------------------------------------------------------ EndTxn

    def end_txn(self, args, reply) -> None:
        def answer(error=None) -> None:
            reply({"error_code": error.code if error else 0})

        txn_id = args["transactional_id"]
        try:
            p, loaded, current = self._producer(args)
            new = current.prepare_end(args["committed"], now_ms(), next_begun=txn_id in loaded.next_begun)
        except KafkaError as exc:
            answer(exc)
            return
        if new is None:
            answer()  # a retry of an end already complete, or the abort of a next transaction holding nothing
            return

        def written(error) -> None:
            answer(error)
            if error is None:
                self._complete(p, txn_id)

        self._write(p, txn_id, new, written)

    # ------------------------------------------------------------ timers

    def abort_timed_out(self) -> None:
        """Abort transactions open longer than their timeout, fencing their producers."""
        now = now_ms()
        for p, loaded in list(self.loaded.items()):
            for txn_id, state in list(loaded.txns.items()):
                if (state.state == ONGOING and txn_id not in loaded.pending
                        and state.start_ms + state.timeout_ms < now):
                    log.info("aborting transaction %r of producer %d: open for %d ms (timeout %d ms)", txn_id,
                             state.producer_id, now - state.start_ms, state.timeout_ms)
                    self._write(p, txn_id, state.prepare_fence_and_abort(now),
                                lambda error, p=p, t=txn_id: error or self._complete(p, t))

    def remove_expired(self) -> None:
        """Forget ids whose producers have been idle for transactional.id.expiration.ms."""
        horizon = now_ms() - self.config["transactional.id.expiration.ms"]
        for p, loaded in list(self.loaded.items()):
            for txn_id, state in list(loaded.txns.items()):
                if (state.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and state.update_ms < horizon
                        and txn_id not in loaded.pending):
                    self._write(p, txn_id, None, lambda error: None)

    # ------------------------------------------------------------ DescribeTransactions / ListTransactions

    def describe(self, args, reply) -> None:
        out = []
        for txn_id in args["transactional_ids"]:
            try:
                _, loaded = self._owner(txn_id)
                state = loaded.txns.get(txn_id)
                code = 0 if state is not None else 105  # TRANSACTIONAL_ID_NOT_FOUND
            except KafkaError as exc:
                state, code = None, exc.code
            out.append(_described(txn_id, code, state))
        reply(out)

    def list(self, args, reply) -> None:
        """ListTransactions: the ids of the partitions loaded here; unknown state names are reported back."""
        states = set(args.get("state_filters") or ())
        producers = set(args.get("producer_id_filters") or ())
        older_than = args.get("duration_filter", -1)
        now = now_ms()
        out = []
        for loaded in self.loaded.values():
            for txn_id, state in loaded.txns.items():
                if ((not states or state.state_name in states) and (not producers or state.producer_id in producers)
                        and (older_than < 0 or (state.state == ONGOING and now - state.start_ms > older_than))):
                    out.append({"transactional_id": txn_id, "producer_id": state.producer_id,
                                "transaction_state": state.state_name})
        reply({"error_code": 0, "unknown_state_filters": sorted(states - set(STATE_NAMES)),
               "transaction_states": out})


def _described(txn_id: str, code: int, state: TxnState | None) -> dict:
    topics: dict[str, list] = {}
    for t, p in sorted(state.partitions if state else ()):
        topics.setdefault(t, []).append(p)
    return {"error_code": code, "transactional_id": txn_id,
            "transaction_state": state.state_name if state else "",
            "transaction_timeout_ms": state.timeout_ms if state else 0,
            "transaction_start_time_ms": state.start_ms if state else -1,
            "producer_id": state.producer_id if state else -1,
            "producer_epoch": state.producer_epoch if state else -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}


__all__ = ["TransactionCoordinator", "STATE_NAMES"]

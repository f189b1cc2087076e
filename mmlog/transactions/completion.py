"""Completing a transaction: once its Prepare{Commit,Abort} is written, markers go to the leader of every
partition in it (WriteTxnMarkers through `markers.py`), retried every MARKER_RETRY_S for the partitions
that failed (leader moved, not available) until all have it; partitions of deleted topics are dropped,
and the groups of `send_offsets_to_transaction` get theirs at their group coordinator (a topic entry
named `__consumer_offsets/<group>`). Then Complete* is written. `Completion` is a part of
`TransactionCoordinator`, which holds the state named below."""

from __future__ import annotations

import logging

from mmlog.transactions.markers import MarkerSender
from mmlog.transactions.metadata import PREPARE_COMMIT, TxnState, now_ms
from mmlog.transactions.writes import TransitionWrites

log = logging.getLogger(__name__)

GROUP_MARKER_PREFIX = "__consumer_offsets/"  # a marker topic entry for a group's transactional offsets
FENCED_MARKER = (47, 52)  # INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: stop, do not retry
MARKER_RETRY_S = 0.1


class Completion(TransitionWrites):
    """A prepared transaction's markers sent, then its completion written."""

    store: object  # the broker's metadata store: where each marker goes
    sender: MarkerSender

    def _complete(self, p: int, txn_id: str) -> None:
        """Write the markers of a Prepare* transaction, then its Complete* state."""
        loaded = self.loaded.get(p)
        if loaded is None or txn_id in loaded.completing:
            return
        state = loaded.txns.get(txn_id)
        if state is None or not state.preparing:
            return
        loaded.completing.add(txn_id)
        remaining = set(state.partitions) | {(GROUP_MARKER_PREFIX + g, 0) for g in state.groups}
        self._send_markers(p, loaded.epoch, txn_id, state, remaining)

    def _send_markers(self, p: int, epoch: int, txn_id: str, state: TxnState, remaining: set) -> None:
        loaded = self.loaded.get(p)
        if loaded is None or loaded.epoch != epoch:
            return  # resigned: the next coordinator completes it
        remaining = {key for key in remaining if key[0].startswith(GROUP_MARKER_PREFIX) or self._exists(*key)}
        if not remaining:
            loaded.completing.discard(txn_id)
            self._write(p, txn_id, state.prepare_complete(now_ms()),
                        lambda error: error and self.call_later(MARKER_RETRY_S, lambda: self._complete(p, txn_id)))
            return
        by_broker: dict[tuple[str, int], list] = {}
        unreachable = set()
        for key in remaining:
            address = self.store.marker_address(*key)
            if address is None:
                unreachable.add(key)
            else:
                by_broker.setdefault(address, []).append(key)
        left = set(unreachable)
        outstanding = [len(by_broker)]
        fenced = []

        def answered(keys, answer) -> None:
            if isinstance(answer, Exception):
                log.info("markers for %s to %s: %s", txn_id, keys[0], answer)
                left.update(keys)
            else:
                for marker in answer.markers:
                    for topic in marker.topics:
                        for part in topic.partitions:
                            if part.error_code in FENCED_MARKER:
                                fenced.append((topic.name, part.partition_index, part.error_code))
                            elif part.error_code:
                                left.add((topic.name, part.partition_index))
            outstanding[0] -= 1
            if outstanding[0] == 0:
                again()

        def again() -> None:
            if fenced:
                # A leader has seen a newer producer epoch or coordinator epoch: this coordinator is
                # stale (Kafka stops sending too); the partition's new coordinator completes the transaction.
                log.warning("markers for %r refused by %s: this coordinator is fenced; stopping", txn_id, fenced)
                if self.loaded.get(p) is loaded:
                    loaded.completing.discard(txn_id)
                return
            if left:
                self.call_later(MARKER_RETRY_S, lambda: self._send_markers(p, epoch, txn_id, state, left))
            else:
                self._send_markers(p, epoch, txn_id, state, set())

        if not by_broker:
            again()
            return
        commit = state.state == PREPARE_COMMIT
        for address, keys in by_broker.items():
            topics: dict[str, list] = {}
            for topic, index in keys:
                topics.setdefault(topic, []).append(index)
            marker = {"producer_id": state.producer_id, "producer_epoch": state.producer_epoch,
                      "transaction_result": commit, "coordinator_epoch": epoch,
                      "topics": [{"name": t, "partition_indexes": sorted(ps)} for t, ps in topics.items()]}
            self.sender.send(address, [marker], lambda answer, keys=keys: answered(keys, answer))

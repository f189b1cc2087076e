"""A transaction coordinator's transitions are written before they take effect: the new state is
appended to its `__transaction_state` partition and becomes current only once the high watermark has
passed it, polled every WRITE_POLL_S while writes are in flight; meanwhile the id is pending. Here are
the partitions a coordinator has loaded, and `TransitionWrites`, a part of `TransactionCoordinator`
(which holds the state named below)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from mmlog.errors import (ConcurrentTransactions, CoordinatorNotAvailable, KafkaError, NotCoordinator,
                          NotEnoughReplicas)
from mmlog.log.manager import LogManager
from mmlog.log.state import LEADER_ROLE as LEADER
from mmlog.transactions import state_log
from mmlog.transactions.metadata import COMPLETE_ABORT, COMPLETE_COMMIT, TxnState

log = logging.getLogger(__name__)

TOPIC = state_log.TOPIC
WRITE_POLL_S = 0.002


@dataclass
class Write:
    """A transition appended at `offset`, waiting for the high watermark: done(error or None) then."""

    offset: int
    done: object


@dataclass
class LoadedPartition:
    """A `__transaction_state` partition this broker leads: its ids and their writes in flight."""

    epoch: int
    txns: dict[str, TxnState] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    writes: list[Write] = field(default_factory=list)
    completing: set[str] = field(default_factory=set)  # ids whose markers are being written
    next_begun: set[str] = field(default_factory=set)  # ids whose producer began its next transaction early


class TransitionWrites:
    """Appending transitions and making them current once replicated."""

    manager: LogManager
    call_later: Callable[[float, Callable[[], None]], None]  # on the control thread
    loaded: dict[int, LoadedPartition]
    _polling: bool

    def _not_pending(self, loaded: LoadedPartition, txn_id: str) -> None:
        if txn_id in loaded.pending or txn_id in loaded.completing:
            raise ConcurrentTransactions("a transition of this transactional id is in progress")

    def _write(self, p: int, txn_id: str, state: TxnState | None, done) -> None:
        """Append a transition; once replicated it becomes current and done(None) runs, else done(error)."""
        loaded = self.loaded[p]
        part = self.manager.partition(TOPIC, p)
        try:
            rep = part.replication()
            needed = part.config.min_insync_replicas
            if rep.role == LEADER and len(rep.isr) < needed:
                raise NotEnoughReplicas(f"{TOPIC}-{p} has {len(rep.isr)} in-sync replicas, needs {needed}")
            offset = state_log.append(part, txn_id, state)
        except KafkaError as exc:
            log.warning("transaction log write for %r failed: %s", txn_id, exc)
            done(CoordinatorNotAvailable(str(exc)) if isinstance(exc, NotEnoughReplicas) else
                 NotCoordinator(str(exc)))
            return
        loaded.pending.add(txn_id)

        def finished(error) -> None:
            loaded.pending.discard(txn_id)
            if error is None:
                if state is None or state.state not in (COMPLETE_COMMIT, COMPLETE_ABORT):
                    loaded.next_begun.discard(txn_id)  # any transition but the completion ends it
                if state is None:
                    loaded.txns.pop(txn_id, None)
                else:
                    loaded.txns[txn_id] = state
            done(error)

        loaded.writes.append(Write(offset, finished))
        self._poll_writes()

    def _poll_writes(self) -> None:
        """Finish the writes the high watermark has passed; poll again while any wait."""
        self._polling = False
        waiting = False
        for p, loaded in list(self.loaded.items()):
            if not loaded.writes:
                continue
            hw = self.manager.partition(TOPIC, p).high_watermark
            done = [w for w in loaded.writes if w.offset < hw]
            loaded.writes = [w for w in loaded.writes if w.offset >= hw]
            for write in done:
                write.done(None)
            waiting |= bool(loaded.writes)
        if waiting and not self._polling:
            self._polling = True
            self.call_later(WRITE_POLL_S, self._poll_writes)

"""One transactional id's state, its transitions, and its record in `__transaction_state` (sans-IO).

The state machine is Kafka's TransactionMetadata:

    Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers written──▶ CompleteCommit
      ▲                                   │                 PrepareAbort  ──markers written──▶ CompleteAbort
      └────────── InitProducerId (epoch + 1) ◀──────────────────────────────────────────────────────┘

- InitProducerId on Empty or Complete* bumps the epoch (fencing the previous
  producer of the id) and goes to Empty; on Ongoing it bumps the epoch and
  aborts the open transaction first (the caller retries on CONCURRENT_TRANSACTIONS
  until the abort is complete); on Prepare* it is CONCURRENT_TRANSACTIONS.
- A transaction that outlives its timeout is aborted the same way by the
  coordinator itself (its producer is fenced by the epoch bump).
- The next transaction begun early. A producer may begin its next transaction
  as soon as EndTxn is answered (Prepare* written); its AddPartitionsToTxn then
  gets CONCURRENT_TRANSACTIONS until the markers are written (or any other
  refusal: an unknown topic, a write that failed). librdkafka counts a refused
  request as one sent, so an abort before its retry still sends EndTxn(abort),
  which finds Empty, Complete* or Prepare* of the other outcome: Kafka answers
  INVALID_TXN_STATE, fatal for the producer. Here the coordinator remembers (in
  memory, `next_begun`) that the current producer asked to add while no
  transaction of its was Ongoing, and answers that abort as the abort of an
  empty transaction: CONCURRENT_TRANSACTIONS while Prepare*, then success with
  nothing to write. Without such an add, abort after commit stays
  INVALID_TXN_STATE (the client must learn that its transaction committed).

Every transition is computed here as a new `TxnState` (`prepare_*`), written to
the transaction log, and only once the write is replicated does it replace the
current one (the coordinator's job); while a write is in flight the id is
`pending` and every other request for it answers CONCURRENT_TRANSACTIONS.

Record layout (the value of a record whose key is the transactional id, UTF-8;
a null value removes the id). All integers big-endian; str16 is a uint16 byte
count and UTF-8.

    version int16 (1), producer_id int64, producer_epoch int16, timeout_ms int32,
    state int8, start_ms int64, update_ms int64,
    partitions: int32 count, then (topic str16, partition int32) each,
    groups:     int32 count, then group str16 each
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field, replace

from mmlog.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTxnState,
    ProducerFenced,
)

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD = range(7)
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead")
MAX_EPOCH = 32767 - 1  # Kafka keeps Short.MaxValue out of use: past it the producer gets a new id
NO_PRODUCER = -1

_HEAD = struct.Struct(">hqhibqq")
_VERSION = 1
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


@dataclass(frozen=True)
class TxnState:
    """What the transaction log says about one transactional id."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = EMPTY
    start_ms: int = -1
    update_ms: int = -1
    partitions: frozenset = field(default_factory=frozenset)  # {(topic, partition)}
    groups: frozenset = field(default_factory=frozenset)  # consumer groups whose offsets it commits

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    @property
    def preparing(self) -> bool:
        return self.state in (PREPARE_COMMIT, PREPARE_ABORT)

    # ------------------------------------------------------------ checks

    def check_producer(self, producer_id: int, producer_epoch: int) -> None:
        """The request comes from the producer that holds the id now (Kafka's order of checks)."""
        if producer_id != self.producer_id:
            raise InvalidProducerIdMapping(f"producer id {producer_id} does not hold this transactional id")
        if producer_epoch != self.producer_epoch:
            raise ProducerFenced(f"epoch {producer_epoch} is fenced: the transactional id is at epoch "
                                 f"{self.producer_epoch}")

    # ------------------------------------------------------------ transitions

    def prepare_init(self, timeout_ms: int, now_ms: int, new_producer_id) -> "TxnState":
        """InitProducerId on a finished (or empty) transaction: the next epoch, nothing in it.
        `new_producer_id()` is called when the epoch is exhausted."""
        if self.state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT):
            raise ConcurrentTransactions(f"the transaction is {self.state_name}")
        pid, epoch = self.producer_id, self.producer_epoch + 1
        if epoch > MAX_EPOCH:
            pid, epoch = new_producer_id(), 0
        return replace(self, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms, state=EMPTY,
                       start_ms=-1, update_ms=now_ms, partitions=frozenset(), groups=frozenset())

    def prepare_fence_and_abort(self, now_ms: int) -> "TxnState":
        """An Ongoing transaction whose producer is replaced (or timed out): abort it at epoch + 1,
        so no batch or marker of the old producer is accepted any more."""
        epoch = min(self.producer_epoch + 1, MAX_EPOCH + 1)
        return replace(self, producer_epoch=epoch, state=PREPARE_ABORT, update_ms=now_ms)

    def prepare_add(self, partitions=(), groups=(), now_ms: int = 0) -> "TxnState | None":
        """Partitions (or a group's offsets) join the transaction; None when all are already in it."""
        if self.preparing:
            raise ConcurrentTransactions(f"the previous transaction is {self.state_name}")
        new_parts, new_groups = frozenset(partitions), frozenset(groups)
        if self.state == ONGOING and new_parts <= self.partitions and new_groups <= self.groups:
            return None
        if self.state == ONGOING:
            return replace(self, partitions=self.partitions | new_parts, groups=self.groups | new_groups,
                           update_ms=now_ms)
        return replace(self, state=ONGOING, start_ms=now_ms, update_ms=now_ms, partitions=new_parts,
                       groups=new_groups)

    def begins_next(self) -> bool:
        """An add of the current producer now begins its next transaction: none is Ongoing, and the
        previous one's EndTxn was answered before it (see "The next transaction begun early")."""
        return self.state != ONGOING

    def prepare_end(self, commit: bool, now_ms: int, next_begun: bool = False) -> "TxnState | None":
        """EndTxn: Ongoing goes to Prepare*; a retry of a completed end is answered again (None);
        `next_begun`: an abort is of a next transaction that holds nothing yet (None once complete)."""
        if self.state == ONGOING:
            return replace(self, state=PREPARE_COMMIT if commit else PREPARE_ABORT, update_ms=now_ms)
        if next_begun and not commit:
            if self.preparing:
                raise ConcurrentTransactions(f"the previous transaction is {self.state_name}")
            return None  # Empty or Complete*: nothing of the next transaction reached the coordinator
        done, preparing = (COMPLETE_COMMIT, PREPARE_COMMIT) if commit else (COMPLETE_ABORT, PREPARE_ABORT)
        if self.state == done:
            return None
        if self.state == preparing:
            raise ConcurrentTransactions(f"the transaction is already {self.state_name}")
        raise InvalidTxnState(f"cannot {'commit' if commit else 'abort'} a transaction in state {self.state_name}")

    def prepare_complete(self, now_ms: int) -> "TxnState":
        """Every marker is written: Prepare* becomes Complete*, and the transaction holds nothing."""
        assert self.preparing, self.state
        state = COMPLETE_COMMIT if self.state == PREPARE_COMMIT else COMPLETE_ABORT
        return replace(self, state=state, update_ms=now_ms, partitions=frozenset(), groups=frozenset())


# ------------------------------------------------------------ the record


def encode(state: TxnState) -> bytes:
    out = bytearray(_HEAD.pack(_VERSION, state.producer_id, state.producer_epoch, state.timeout_ms, state.state,
                               state.start_ms, state.update_ms))
    out += _I32.pack(len(state.partitions))
    for topic, p in sorted(state.partitions):
        _str16(out, topic)
        out += _I32.pack(p)
    out += _I32.pack(len(state.groups))
    for group in sorted(state.groups):
        _str16(out, group)
    return bytes(out)


def decode(data: bytes) -> TxnState:
    """A record's value back into a TxnState; ValueError if it is not one."""
    version, pid, epoch, timeout_ms, state, start_ms, update_ms = _HEAD.unpack_from(data, 0)
    if version != _VERSION or not 0 <= state < len(STATE_NAMES):
        raise ValueError(f"unknown transaction record (version {version}, state {state})")
    pos = _HEAD.size
    (n,), pos = _I32.unpack_from(data, pos), pos + 4
    partitions = []
    for _ in range(n):
        topic, pos = _read_str16(data, pos)
        partitions.append((topic, _I32.unpack_from(data, pos)[0]))
        pos += 4
    (n,), pos = _I32.unpack_from(data, pos), pos + 4
    groups = []
    for _ in range(n):
        group, pos = _read_str16(data, pos)
        groups.append(group)
    return TxnState(pid, epoch, timeout_ms, state, start_ms, update_ms, frozenset(partitions), frozenset(groups))


def _str16(out: bytearray, text: str) -> None:
    raw = text.encode()
    out += _U16.pack(len(raw))
    out += raw


def _read_str16(data, pos: int) -> tuple[str, int]:
    (n,) = _U16.unpack_from(data, pos)
    return bytes(data[pos + 2:pos + 2 + n]).decode(), pos + 2 + n


def now_ms() -> int:
    """The wall clock transitions are stamped with, in milliseconds."""
    return int(time.time() * 1000)

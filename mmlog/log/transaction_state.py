"""A partition's producer and transaction state: idempotence checks, transaction markers, the LSO.

Transactions (docs/transactions.md). A transactional producer's batches open its
transaction on the partition; a transaction marker (`append_marker`, the leader's
answer to WriteTxnMarkers) ends it. The producer state (`producer_state.py`) tracks
the open transactions; every append that holds a transactional or control batch
publishes, in the same seqlocked store, the first undecided offset, and for a marker
the decided transaction (state.py: the last stable offset, LSO, is min(HW, first
unstable offset)), and writes an aborted transaction to its segment's transaction
index (`txn_index.py`) before publishing. A follower does the same for the batches it
copies, so its LSO and indexes match the leader's. `read(committed=True)` stops at the
LSO; `aborted_transactions` answers what a read_committed fetch must drop.

On disk: the producer snapshots `<offset>.snapshot` (producer_state.py; written at each
roll and at a clean close, as of that offset), the transaction indexes
`<base>.txnindex` (txn_index.py; only segments with an abort marker have one), and the
transaction slots of `partition.state` (first undecided offset, newest abort, the
decided transactions the HW has not passed). Each process keeps its own producer state
in memory, caught up from the log under the lock (`_catch_up_producers`).

Crash points: an abort's index entry is written after the marker's bytes and before
the append is published: a crash between leaves an entry whose marker is not in the
log, or one torn at the tail; recovery rebuilds the indexes of the segments it
rescanned and cuts the others' to the log end, and publishes the transaction slots
again, all from the producer state replayed from the newest snapshot at or below the
rescan (`_recover_transactions`). A snapshot is written atomically before the roll it
belongs to is published; snapshots above a truncation point or the recovered log end
are removed. A failed append (or one whose checks ran ahead of what was published)
makes the next one reload the producer state (`producers.upto = -1`).
"""

from __future__ import annotations

import bisect

from mmlog.errors import KafkaError, NotLeaderOrFollower
from mmlog.log import producer_state, txn_index
from mmlog.log.append_info import AppendInfo, offsets_taken
from mmlog.log.producer_state import NO_PRODUCER, ProducerState
from mmlog.log.segment_view import SegmentView, now_ms
from mmlog.log.state import Snapshot
from mmlog.protocol import records

# Kafka's producer.id.expiration.ms default: a producer silent this long is forgotten at the next snapshot.
PRODUCER_EXPIRATION_MS = 24 * 3600 * 1000


class TransactionState(SegmentView):
    """Idempotent and transactional producers on a partition (a part of Partition)."""

    producers: ProducerState

    # ------------------------------------------------------------ idempotent producers

    def _check_producers(self, s: Snapshot, items: list, out: list) -> list:
        """The items that may be appended, in order: a duplicate batch gets its first append's
        offsets in `out`, a batch out of sequence or of a fenced epoch its error (producer_state.py).
        Each accepted batch is applied at once, so the next one of the same producer sees it."""
        self._catch_up_producers(s)
        producers = self.producers
        kept = []
        next_offset = s.log_end
        for item in items:
            i, _, headers = item
            h = headers[0]
            if h.producer_id != NO_PRODUCER and not h.is_control:
                try:
                    producers.append(h, next_offset)
                except producer_state.Duplicate as dup:
                    out[i] = AppendInfo(dup.first_offset, dup.last_offset, s.log_start, 1, h.records_count)
                    continue
                except KafkaError as exc:
                    out[i] = exc
                    continue
            next_offset += offsets_taken(headers)
            kept.append(item)
        producers.upto = next_offset
        return kept

    def _catch_up_producers(self, s: Snapshot) -> None:
        """Under the lock: bring this process's producer state to the log end (producer_state.py)."""
        producers = self.producers
        if producers.generation != s.generation or not s.log_start <= producers.upto <= s.log_end:
            producers.load(s.log_end, s.log_start, now_ms(), PRODUCER_EXPIRATION_MS)
            producers.generation = s.generation
            # A load may forget producers (expired, or only in batches below the log start): whoever copied
            # the state (the compiled append's producer region, log/producer_table.py) copies it again.
            self._mappings_changed()
        if producers.upto < s.log_end:
            if self.state.producers_end() > producers.upto:  # else no batch past it has a producer: none to read
                producers.apply_batches(self._stored_batches(s, producers.upto, producers_only=True))
            producers.upto = s.log_end

    # ------------------------------------------------------------ transactions

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> AppendInfo:
        """Leader: end producer_id's transaction here with a marker (a control batch; Kafka's
        WriteTxnMarkers append). Raises NotLeaderOrFollower off the leader, INVALID_PRODUCER_EPOCH
        or TRANSACTION_COORDINATOR_FENCED for a stale marker (producer_state.py). A marker for a
        producer with no open transaction here is appended all the same and ends nothing."""
        buf = records.build_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        header = records.read_header(buf)
        snap = self._begin_write()
        try:
            if not self.state.serves_clients():
                raise NotLeaderOrFollower(f"{self.directory.name}: not the leader here")
            self._catch_up_producers(snap)
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            now = now_ms()
            if self._should_roll(snap, len(buf), 1, 1, now):
                snap = self._roll(snap)
            out: list = [None]
            self._append_locked(snap, [(0, buf, [header])], now, out)
            return out[0]
        finally:
            self.lock.release()

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list:
        """The aborted transactions (txn_index.AbortedTxn) overlapping [fetch_offset, upper_bound):
        the transaction indexes from the segment holding fetch_offset on, until one says no later
        abort can reach below the bound (Kafka's collectAbortedTransactions)."""
        snap = self.snapshot()
        if fetch_offset > snap.last_abort:
            return []
        bases = self._bases
        found = []
        for base in bases[max(bisect.bisect_right(bases, fetch_offset) - 1, 0):]:
            txns, complete = txn_index.collect(txn_index.read(self.directory, base), fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    def last_records_of_producers(self) -> dict[int, tuple[int, int]]:
        """{producer id: (last data offset, -1 if none in its epoch; epoch)} as of the log end (Kafka's
        lastRecordsOfActiveProducers, what the cleaner keeps empty batches for). Built in a private
        ProducerState from the newest snapshot and the batches after it, without the lock."""
        return self._lock_free(self._last_records_of_producers_once)

    def _last_records_of_producers_once(self) -> dict[int, tuple[int, int]]:
        snap = self.snapshot()
        state = ProducerState(self.directory)
        state.load(snap.log_end, snap.log_start, now_ms(), PRODUCER_EXPIRATION_MS)
        state.apply_batches(self._stored_batches(snap, state.upto, lock_free=True, producers_only=True))
        return {pid: (e.batches[-1][3] if e.batches else -1, e.epoch) for pid, e in state.producers.items()}

    @property
    def last_stable_offset(self) -> int:
        return self.snapshot().last_stable_offset

    def _apply_transactions(self, s: Snapshot, batches: list, next_offset: int) -> tuple:
        """Before an append that opens or ends transactions is published (lock held, bytes written):
        bring the producer state to its end, write the aborted transactions its markers end to the
        active segment's index, and return (first undecided offset, newest abort marker or None,
        [(first offset, marker offset)] decided) for the publish.

        The state is already there when the leader's checks applied the batches (`_check_producers`);
        otherwise (a follower's copy, a marker, a group split by a roll) it is caught up to the log
        end and these batches are applied to it. A failure leaves no index entry behind and makes
        the next append reload the state."""
        producers = self.producers
        decided, last_abort, written = [], None, None
        try:
            if producers.upto != next_offset:
                if producers.upto != s.log_end or producers.generation != s.generation:
                    self._catch_up_producers(s)
                for offset, h, buf, pos in batches:
                    marker = records.read_end_txn_marker(buf, pos) if h.is_control else None
                    done = producers.apply_batch(h, offset, marker)
                    if done is None:
                        continue
                    decided.append((done.first_offset, done.last_offset))
                    if done.aborted:
                        size = txn_index.append(self.directory, s.active_base, txn_index.AbortedTxn(
                            done.producer_id, done.first_offset, done.last_offset, producers.stable_after(done)))
                        written = size if written is None else written
                        last_abort = done.last_offset
                producers.upto = next_offset
        except BaseException:
            producers.upto = -1
            if written is not None:
                txn_index.cut(self.directory, s.active_base, written)
            raise
        return producers.first_undecided(), last_abort, decided

    def _recover_transactions(self, scanned_from: int, sync: bool) -> None:
        """After recovery (lock held): rebuild the transaction indexes of the segments from
        scanned_from on, cut the others' to the log end, and publish the transaction slots,
        all from the producer state replayed from the newest snapshot at or below scanned_from."""
        s = self.state.snapshot()
        self._sync(s)
        directory = self.directory
        for base in self._bases:
            if base >= scanned_from:
                txn_index.reset(directory, base)
            else:
                txn_index.truncate(directory, base, s.log_end)
        producers = self.producers
        producers.load(scanned_from, s.log_start, now_ms(), PRODUCER_EXPIRATION_MS)
        hw = s.high_watermark
        decided = []  # (first, marker) of transactions whose marker the HW has not passed
        touched = set()

        def on_complete(done) -> None:
            if done.last_offset >= hw:
                decided.append((done.first_offset, done.last_offset))
            if done.aborted and done.last_offset >= scanned_from:
                base = self._bases[bisect.bisect_right(self._bases, done.last_offset) - 1]
                txn_index.append(directory, base, txn_index.AbortedTxn(
                    done.producer_id, done.first_offset, done.last_offset, producers.stable_after(done)))
                touched.add(base)

        if producers.upto < s.log_end:
            producers.apply_batches(self._stored_batches(s, producers.upto, producers_only=True), on_complete)
        producers.upto = s.log_end
        producers.generation = s.generation
        if sync:
            for base in touched:
                txn_index.flush(directory, base)
        self.state.publish_transactions(producers.first_undecided(), txn_index.last_abort(directory, self._bases),
                                        decided)

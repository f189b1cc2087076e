"""The log cleaner: compaction of logs whose cleanup.policy has `compact` (Kafka's LogCleaner).

Theory (Kafka's design document, "Log Compaction"). A compacted log keeps at
least the last record of every key. Its cleaned head (below the first dirty
offset, `cleaner_checkpoint.py`) has already been compacted; its dirty tail has
not. A cleaning

    1. picks the range [first dirty, first uncleanable): the first uncleanable offset
       is the smallest of the active segment's base (never touched), the high
       watermark, the last stable offset, and the base of the first segment holding a record younger than
       min.compaction.lag.ms; the range ends at a segment boundary;
    2. maps every key of the dirty range to its latest offset (`offset_map.py`): at
       most log.cleaner.dedupe.buffer.size of memory; when the keys do not fit, the
       range ends early (where the map filled) and the rest waits for the next run;
    3. rewrites every segment from the log start to the end of that range, in groups
       that fit one segment (segment.bytes, the index size, int32 relative offsets),
       each into one cleaned segment named after the group's first base. A record
       stays if its key has no later offset in the map, or it lies past where the map
       ended; records without a key go (Kafka's rule). Kept records keep their offsets
       and their order;
    4. swaps each cleaned segment in for its group (`segment_swap.py`: the steps and
       every crash point, finished or rolled back by recovery);
    5. moves the partition's first dirty offset in the checkpoint to the range's end.

Tombstones and delete horizons (KIP-534, Kafka's rule for v2 batches). The first
cleaning that keeps a tombstone (key, null value) in a batch stamps the batch with a
delete horizon: attributes bit 6 set, the base timestamp replaced by now +
delete.retention.ms, every record's timestamp delta rewritten so its timestamp stays
(`compaction_kernels.rewrite`). Cleanings before the horizon keep the tombstone (a
consumer starting within delete.retention.ms of that first cleaning sees the
delete); the first cleaning at or past it removes it. The stamp is in the batch
itself, so it survives swaps, restarts and replication (a follower copies the bytes).

Batches (`compaction_kernels.py`): a batch whose records all stay is copied as is;
one that loses some (or is stamped) is rebuilt with the kept records (baseOffset and
lastOffsetDelta unchanged, so offsets and an idempotent producer's last sequence
survive; a compressed one recompressed with its codec); one that loses all
disappears, except where Kafka keeps it as an empty batch (RETAIN_EMPTY): the batch
holding an active producer's last data offset (its last sequence, so that the
producer is not told OUT_OF_ORDER_SEQUENCE_NUMBER after a restart rebuilds its state
from the log), a producer's marker when it has no data batch in its epoch (its
epoch, so that a restart still fences older ones), and the batch ending just below
the first uncleanable offset. Active producers are the producer state as of the log
end (`Partition.last_records_of_producers`). A group whose records all go becomes
an empty segment, merged away by a later cleaning.

Transactions (Kafka's CleanedTransactionMetadata). Nothing at or above the last
stable offset is cleaned (an undecided transaction's records may not shadow
anything). Committed transactional batches are compacted like any others: their
records enter the offset map and shadow older values. Aborted transactions' batches
(the partition's .txnindex says which) are dropped and their keys never enter the
map, so an aborted write cannot remove the committed value it would have replaced.
A transaction marker (control batch) stays while its transaction has data: a
transactional batch of its producer since that producer's previous marker, in the
log this cleaning reads (`_Transactions`, carried from segment to segment). The
first cleaning that finds a marker without data stamps it with a delete horizon as
above, and the first cleaning past the horizon removes it: two passes at least, so a
read_committed consumer within delete.retention.ms still finds the marker that ends
what it read. A cleaned segment's .txnindex keeps only the entries whose abort
marker stays with its aborted data (Kafka's cleaned transaction index); the others
go with their data.

Memory: a segment is read and rewritten a window at a time, whole batches of at
most WINDOW_BYTES (16 MiB) and WINDOW_RECORDS (262,144 records; a larger batch
alone), in log order: the window's batch table and record rows (about 60 bytes a
record), its compressed batches decompressed (a few times over while they are
rebuilt and recompressed), and its cleaned bytes are held, then dropped before the
next window. What a decision needs from beyond the window is carried in log order
(the offset map, the transactions' open producers) or holds for the whole log
(aborted transactions, the producers' last batches), so the cleaned segment is byte
for byte the one a single pass over the whole segment would write. (Before, a
whole segment was held: a 1 GiB segment of compressed records took a few times its
decompressed size in memory; tools/bench_compaction.py --memory measures it.)

Decompression: each compressed batch is decompressed once per pass (once to map
its keys, once to clean it), lz4 ones a window at a time by numba kernels
(`protocol/lz4_frame.py`), the other codecs one codec call a batch.

Where it runs: its own process under the supervisor (`cleaner_main`, forked like
the replica fetcher and replaced if it dies), never in a processor. It opens the log
manager attached and takes each partition's lock only for the swap, so producers and
consumers go on while it reads and writes. Its I/O is throttled to
log.cleaner.io.max.bytes.per.second. Every `log.cleaner.backoff.ms` with nothing to
do it looks again; it cleans the log with the highest dirty ratio at or above its
min.cleanable.dirty.ratio first, or one whose oldest dirty record is older than
max.compaction.lag.ms.

Test hook: the environment variable MMLOG_CLEANER_CRASH_AT=<point> makes the
cleaner process os._exit(CRASH_EXIT) at that point (`CRASH_POINTS`); only the
crash-point tests set it.

Beside this module: windows.py reads a segment a window at a time, partition_files.py the rest of
a partition's files (the cleaned indexes, the checkpoint's first dirty offset), kernels.py walks and
rewrites batches, segment_swap.py swaps cleaned segments in, manager.py runs the cleaner's process.

What it reports: `cleaner-status.json` in the first log dir (per log: dirty ratio,
first dirty offset, last run and its figures), read by `mmlog topics describe
--log-dirs`; the broker's totals are in its metrics block (docs/metrics.md).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmlog.log.cleaner import checkpoint as cleaner_checkpoint, kernels as ck, segment_swap
from mmlog.log.cleaner.offset_map import OffsetMap
from mmlog.log.cleaner.partition_files import (carry_txnindex, group_segments, segment_max_timestamp, segment_size,
                                               set_first_dirty, write_indexes)
from mmlog.log.cleaner.windows import WINDOW_BYTES, WINDOW_RECORDS, Rows, Source, Window
from mmlog.log.files import LOG_SUFFIX
from mmlog.log.kernels import CRC_TABLES
from mmlog.protocol import compression

log = logging.getLogger(__name__)

CRASH_ENV = "MMLOG_CLEANER_CRASH_AT"
CRASH_EXIT = 77
CRASH_POINTS = ("cleaned-written", "swap-begun", "swap-committed", "old-segments-deleted", "swap-indexes-renamed",
                "swap-renamed", "before-checkpoint")
STATUS_FILE = "cleaner-status.json"
_TRANSACTIONAL, _CONTROL = 0x10, 0x20  # batch attributes (records.TRANSACTIONAL_BIT, CONTROL_BIT)


def now_ms() -> int:
    return int(time.time() * 1000)


class Throttler:
    """At most `rate` bytes a second, averaged from the start (Kafka's Throttler, simply)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.total = 0

    def account(self, nbytes: int) -> None:
        self.total += nbytes
        due = self.total / self.rate
        elapsed = time.monotonic() - self.start
        if due > elapsed:
            time.sleep(due - elapsed)


@dataclass
class CleanStats:
    """What one cleaning did."""

    first_dirty: int = 0
    end_offset: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    segments_swapped: int = 0
    elapsed_s: float = 0.0


class _Transactions:
    """Which transaction markers still have their transaction's data (Kafka's CleanedTransactionMetadata),
    carried through one cleaning's segments in log order, one numpy pass a segment.

    A marker (control batch) "has data" when a transactional data batch of its producer lies
    between the producer's previous control batch and it, in what this cleaning reads (the log
    from its start): for a commit, Kafka's ongoingCommittedTxns; for an abort, its aborted
    transaction's lastObservedBatchOffset (the producer's transactional batches after its previous
    marker are that transaction's). A marker without data may go once its delete horizon passed."""

    def __init__(self) -> None:
        self.open: set[int] = set()  # producers with transactional data since their last control batch

    def markers_with_data(self, batches: np.ndarray) -> np.ndarray:
        """Per batch of this segment: a control batch whose transaction has data here or before."""
        pid, attrs = batches[:, ck.PID], batches[:, ck.ATTRS]
        has = np.zeros(len(batches), np.bool_)
        idx = np.nonzero(((attrs & _TRANSACTIONAL) != 0) & (pid >= 0))[0]  # markers are transactional too
        if not len(idx):
            return has
        order = idx[np.argsort(pid[idx], kind="stable")]  # by producer, in log order within each
        p, ctrl = pid[order], (attrs[order] & _CONTROL) != 0
        first = np.ones(len(order), np.bool_)
        first[1:] = p[1:] != p[:-1]
        last = np.ones(len(order), np.bool_)
        last[:-1] = first[1:]
        starts = first.copy()
        starts[1:] |= ctrl[:-1]  # a run: a producer's batches up to and including its next control batch
        run = np.cumsum(starts) - 1
        data = np.bincount(run, weights=~ctrl, minlength=run[-1] + 1) > 0
        carried = np.fromiter((x in self.open for x in p[first].tolist()), np.bool_, int(first.sum()))
        data[run[first]] |= carried  # a producer's first run here goes on from the previous segment
        has[order[ctrl]] = data[run[ctrl]]
        for producer, ends_with_control in zip(p[last].tolist(), ctrl[last].tolist()):
            if ends_with_control:
                self.open.discard(producer)
            else:
                self.open.add(producer)
        return has


class _Producers:
    """The producers the log end knows, as Kafka's lastRecordsOfActiveProducers: a batch of theirs
    stays as an empty batch if it holds the producer's last data offset (its last sequence), or, for
    a producer with no data batch in its current epoch, if it is a marker of that epoch."""

    def __init__(self, last_records: dict[int, tuple[int, int]]) -> None:
        self.pids = np.array(sorted(last_records), np.int64)
        self.last_data = np.array([last_records[p][0] for p in self.pids.tolist()], np.int64)
        self.epochs = np.array([last_records[p][1] for p in self.pids.tolist()], np.int64)

    def last_batches(self, batches: np.ndarray) -> np.ndarray:
        pid = batches[:, ck.PID]
        if not len(self.pids):
            return np.zeros(len(batches), np.bool_)
        i = np.minimum(np.searchsorted(self.pids, pid), len(self.pids) - 1)
        known = (self.pids[i] == pid) & (pid >= 0)
        last_data, epoch = self.last_data[i], self.epochs[i]
        control = (batches[:, ck.ATTRS] & _CONTROL) != 0
        return known & np.where(last_data >= 0, batches[:, ck.LAST] == last_data,
                                control & (batches[:, ck.EPOCH] == epoch))


@dataclass
class _Round:
    """What one cleaning decides by, beside the offset map."""

    now: int
    delete_retention_ms: int
    map_end: int  # records at or past it were not mapped: they stay (Kafka's pastLatestOffset)
    round_end: int  # the first uncleanable offset: the batch ending just below it stays, if only empty
    aborted: list  # the aborted transactions (txn_index.AbortedTxn) of the cleaned range
    producers: _Producers
    transactions: _Transactions
    live_markers: set  # offsets of markers kept with their transaction's data, in the group at hand


class Cleaner:
    """Cleans one log at a time with one offset map (the body of the cleaner process)."""

    def __init__(self, offset_map: OffsetMap, throttler: Throttler | None = None,
                 crash_at: str | None = None, window: tuple[int, int] = (WINDOW_BYTES, WINDOW_RECORDS)) -> None:
        self.map = offset_map
        self.window = window  # (bytes, records) of a segment held at a time
        self.throttler = throttler
        self.crash_at = crash_at if crash_at is not None else os.environ.get(CRASH_ENV)

    def crash(self, point: str) -> None:
        """The crash-point test hook (module docstring)."""
        if point == self.crash_at:
            os._exit(CRASH_EXIT)

    def _io(self, nbytes: int) -> None:
        if self.throttler is not None:
            self.throttler.account(nbytes)

    # ------------------------------------------------------------ choosing the range

    @staticmethod
    def cleanable_segments(part, now: int) -> tuple[list[int], dict[int, int]]:
        """The segments a cleaning may touch, and each one's next base: those wholly below the active
        segment, the high watermark, the last stable offset and the first segment within
        min.compaction.lag.ms."""
        snap = part.snapshot()
        limit = min(snap.active_base, snap.high_watermark, snap.last_stable_offset)
        lag = part.config.min_compaction_lag_ms
        bases = part.segment_bases()
        out, nxt = [], {}
        for i, base in enumerate(bases[:-1]):
            following = bases[i + 1]
            if following > limit or (lag > 0 and segment_max_timestamp(part, base) > now - lag):
                break
            out.append(base)
            nxt[base] = following
        return out, nxt

    @staticmethod
    def dirty_bytes(part, first_dirty: int, now: int) -> tuple[int, int]:
        """(cleanable dirty bytes, cleanable bytes): the dirty ratio's parts."""
        cleanable, nxt = Cleaner.cleanable_segments(part, now)
        total = dirty = 0
        for base in cleanable:
            size = segment_size(part, base)
            total += size
            if nxt[base] > first_dirty:
                dirty += size
        return dirty, total

    # ------------------------------------------------------------ one cleaning

    def clean(self, part, first_dirty: int, now: int | None = None) -> CleanStats | None:
        """Clean one partition from its first dirty offset; None if nothing is cleanable."""
        started = time.monotonic()
        now = now_ms() if now is None else now
        directory = part.directory
        first_dirty = max(first_dirty, part.snapshot().log_start)
        cleanable, nxt = self.cleanable_segments(part, now)
        dirty = [b for b in cleanable if nxt[b] > first_dirty]
        if not dirty:
            return None
        end = nxt[dirty[-1]]
        stats = CleanStats(first_dirty=first_dirty)
        aborted = part.aborted_transactions(part.snapshot().log_start, end)
        end_offset = self._build_map(directory, dirty, first_dirty, end, aborted)
        if end_offset <= first_dirty:
            log.warning("%s: log.cleaner.dedupe.buffer.size holds no key of the dirty range", directory.name)
            return None
        stats.end_offset = end_offset
        rnd = _Round(now, part.config.delete_retention_ms, end_offset, end, aborted,
                     _Producers(part.last_records_of_producers()), _Transactions(), set())
        self._name_in_checkpoint(directory, first_dirty)
        for group in group_segments(part, [b for b in cleanable if b < end_offset], nxt):
            if self._clean_group(part, group, nxt[group[-1]], rnd, stats):
                stats.segments_swapped += len(group)
        self.crash("before-checkpoint")
        set_first_dirty(directory, end_offset)
        stats.elapsed_s = time.monotonic() - started
        return stats

    @staticmethod
    def _aborted_batches(batches: np.ndarray, aborted: list) -> np.ndarray:
        """Which batches belong to an aborted transaction: its producer's, from its first offset to
        its abort marker (one numpy pass per aborted transaction, none per record)."""
        mask = np.zeros(len(batches), np.bool_)
        for txn in aborted:
            mask |= ((batches[:, ck.PID] == txn.producer_id) & (batches[:, ck.BASE] >= txn.first_offset)
                     & (batches[:, ck.BASE] < txn.last_offset) & ((batches[:, ck.ATTRS] & _CONTROL) == 0))
        return mask

    def _build_map(self, directory: Path, dirty: list[int], first_dirty: int, end: int, aborted: list) -> int:
        """Map the keys of the dirty segments; return the offset the map covers up to (the new first
        dirty): `end`, or just past the last record mapped when the map filled first (Kafka's rule).
        Committed transactions' records are mapped like any; aborted ones' and markers' are not."""
        self.map.clear()
        for base in dirty:
            source = Source(directory, base)
            try:
                for window in source.windows(*self.window):
                    if not self._map_window(window, first_dirty, aborted):
                        return self.map.latest_offset + 1
            finally:
                source.close()
        return end

    def _map_window(self, window: Window, first_dirty: int, aborted: list) -> bool:
        """Put one window's keys in the map; False if it filled first. (Its arrays go at return: the
        next window's are made without them.)"""
        rows = window.rows()
        self._io(window.size)
        bor = rows.batch_of_row()
        control = (rows.batches[bor, ck.ATTRS] & _CONTROL) != 0 if len(bor) else np.zeros(0, np.bool_)
        dropped = self._aborted_batches(rows.batches, aborted)[bor] if len(bor) else np.zeros(0, np.bool_)
        mask = ((rows.flags & ck.HAS_KEY) != 0) & ~control & ~dropped & (rows.offsets >= first_dirty)
        return self.map.put(rows.h1, rows.h2, rows.offsets, mask)

    def _name_in_checkpoint(self, directory: Path, first_dirty: int) -> None:
        """Before a partition's first swap, name it in the checkpoint (recovery then allows gaps)."""
        key = cleaner_checkpoint.partition_key(directory)
        entries = cleaner_checkpoint.read(directory.parent)
        if key not in entries:
            entries[key] = first_dirty
            cleaner_checkpoint.write(directory.parent, entries)

    def _clean_group(self, part, group: list[int], end: int, rnd: _Round, stats: CleanStats) -> bool:
        """Write the group's cleaned segment and swap it in; False if nothing changed or the swap lost."""
        directory = part.directory
        base = group[0]
        segment_swap.discard_cleaned(directory, base)
        out_path = segment_swap.temp_file(directory, base, LOG_SUFFIX, segment_swap.CLEANED)
        inodes, changed, mtime_ns = [], False, 0
        rnd.live_markers = set()
        try:
            with open(out_path, "wb") as out:
                for b in group:
                    source = Source(directory, b)
                    try:
                        inodes.append(source.inode)
                        mtime_ns = max(mtime_ns, source.mtime_ns)
                        for window in source.windows(*self.window):
                            changed |= self._write_window(window, rnd, stats, out)
                    finally:
                        source.close()
                out.flush()
                os.fsync(out.fileno())
            if not changed and len(group) == 1:
                segment_swap.discard_cleaned(directory, base)
                return False
            os.utime(out_path, ns=(mtime_ns, mtime_ns))  # keeps the group's last modification (Kafka's too)
            write_indexes(directory, base, part.config)
            carry_txnindex(directory, group, rnd.live_markers)
        except OSError:
            # A full disk, most often: the half-written cleaned files would hold the very blocks the
            # producers are short of until the next cleaning or a restart; nothing refers to them yet.
            segment_swap.discard_cleaned(directory, base)
            raise
        self.crash("cleaned-written")
        return part.replace_with_cleaned(group, end, inodes, self.crash)

    def _write_window(self, window: Window, rnd: _Round, stats: CleanStats, out) -> bool:
        """Clean one window into `out`; whether its bytes changed. (Its arrays go at return.)"""
        data, same = self._clean_window(window, rnd, stats)
        out.write(data)
        self._io(window.size + len(data))
        return not same

    def _clean_window(self, window: Window, rnd: _Round, stats: CleanStats):
        """(cleaned bytes of one window of a segment, whether they are its bytes unchanged)."""
        rows = window.rows()
        batches = rows.batches
        nb = len(batches)
        bor = rows.batch_of_row()
        attrs, count = batches[:, ck.ATTRS], batches[:, ck.COUNT]
        control = (attrs & _CONTROL) != 0
        aborted = self._aborted_batches(batches, rnd.aborted)
        with_data = rnd.transactions.markers_with_data(batches)
        empty_marker = control & (~with_data | (count == 0))  # its transaction's data is gone
        stamped = (attrs & ck.DELETE_HORIZON_BIT) != 0
        expired = stamped & (batches[:, ck.BASE_TS] <= rnd.now)  # past its delete horizon
        keep, tomb = self._kept_records(rows, bor, control, empty_marker & expired, expired, aborted, rnd)
        kept = _per_batch(bor, keep, nb)
        keeps_tombstone = _per_batch(bor, keep & tomb, nb) > 0
        stamp = ~stamped & (kept > 0) & np.where(control, empty_marker, keeps_tombstone)
        horizons = np.where(stamp, rnd.now + rnd.delete_retention_ms, -1).astype(np.int64)
        actions = np.where((kept == count) & ~stamp, ck.COPY,
                           np.where(kept == 0, ck.DROP, ck.REBUILD)).astype(np.int64)
        actions[count == 0] = ck.DROP  # an old empty batch goes unless kept below
        retain_empty = rnd.producers.last_batches(batches) | (batches[:, ck.LAST] + 1 == rnd.round_end)
        actions[(actions == ck.DROP) & retain_empty] = ck.EMPTY
        actions[(count == 0) & retain_empty] = ck.COPY
        rnd.live_markers.update(batches[control & with_data & (kept > 0), ck.BASE].tolist())
        side, side_start, side_len = self._rebuild_compressed(window, rows, keep, actions, horizons)
        out = np.empty(window.size + len(side) + 10 * len(keep), np.uint8)
        n = ck.rewrite(window.source.buf, batches, actions, keep, rows.rstart, rows.rend, side, side_start, side_len,
                       horizons, out, CRC_TABLES)
        stats.bytes_read += window.size
        stats.bytes_written += n
        stats.records_read += int(count.sum())
        stats.records_kept += int(kept.sum())
        return out[:n], bool((actions == ck.COPY).all())

    def _kept_records(self, rows: Rows, bor, control, marker_goes, expired, aborted, rnd: _Round):
        """(which records stay, which are tombstones). A data record stays if no later offset of its
        key is mapped (or it lies past the map), and, if a tombstone, while its batch's delete horizon
        has not passed (KIP-534: a batch not yet stamped keeps its tombstones); records without a key
        go. A marker's record stays unless its transaction's data is gone and its horizon passed.
        Aborted transactions' records go."""
        latest = self.map.get(rows.h1, rows.h2)
        has_key = (rows.flags & ck.HAS_KEY) != 0
        tomb = (rows.flags & ck.NULL_VALUE) != 0
        if not len(bor):
            return has_key, tomb
        keep = has_key & ((latest < 0) | (rows.offsets >= latest)) & ~(tomb & expired[bor])
        keep |= rows.offsets >= rnd.map_end
        keep = np.where(control[bor], ~marker_goes[bor], keep)
        keep &= ~aborted[bor]
        return keep, tomb & ~control[bor]

    @staticmethod
    def _rebuild_compressed(window: Window, rows: Rows, keep, actions, horizons):
        """Compressed batches losing some records (or stamped): rebuilt plain from the records rows()
        decompressed, in one kernel call, then recompressed with their codec one by one (SIDE)."""
        nb = len(rows.batches)
        side_start = np.zeros(nb, np.int64)
        side_len = np.zeros(nb, np.int64)
        todo = np.nonzero(((rows.batches[:, ck.ATTRS] & 0x07) != 0) & (actions == ck.REBUILD))[0]
        if not len(todo):
            return np.zeros(0, np.uint8), side_start, side_len
        which = np.searchsorted(window.packed, todo)  # their places among the decompressed batches
        table = rows.batches[todo].copy()
        table[:, ck.POS] = window.plain_starts[which]
        table[:, ck.SIZE] = window.plain_starts[which + 1] - window.plain_starts[which]
        plain = np.empty(int(table[:, ck.SIZE].sum()) + 10 * int(table[:, ck.COUNT].sum()), np.uint8)
        n = ck.rewrite(window.plain, table, np.full(len(todo), ck.REBUILD, np.int64), keep, rows.rstart, rows.rend,
                       np.zeros(0, np.uint8), side_start[: len(todo)], side_len[: len(todo)], horizons[todo], plain,
                       CRC_TABLES)
        at = np.zeros(len(todo) + 1, np.int64)
        ck.batch_positions(plain, n, at)
        at[len(todo)] = n
        parts, total = [], 0
        codecs = (table[:, ck.ATTRS] & 0x07).tolist()
        for i, b in enumerate(todo.tolist()):  # one codec call per batch, not per record
            batch = compression.compress_batch(plain[at[i] : at[i + 1]], codecs[i])
            parts.append(batch)
            side_start[b], side_len[b] = total, len(batch)
            total += len(batch)
        actions[todo] = ck.SIDE
        return np.frombuffer(b"".join(parts), np.uint8), side_start, side_len


def _per_batch(bor: np.ndarray, mask: np.ndarray, nb: int) -> np.ndarray:
    """How many rows of each batch the mask holds."""
    if not len(bor):
        return np.zeros(nb, np.int64)
    return np.bincount(bor, weights=mask, minlength=nb).astype(np.int64)

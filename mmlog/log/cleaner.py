"""The log cleaner: compaction of logs whose cleanup.policy has `compact` (Kafka's LogCleaner).

Theory (Kafka's design document, "Log Compaction"). A compacted log keeps at
least the last record of every key. Its cleaned head (below the first dirty
offset, `cleaner_checkpoint.py`) has already been compacted; its dirty tail has
not. A cleaning

    1. picks the range [first dirty, first uncleanable): the first uncleanable offset
       is the smallest of the active segment's base (never touched), the high
       watermark, and the base of the first segment holding a record younger than
       min.compaction.lag.ms; the range ends at a segment boundary;
    2. maps every key of the dirty range to its latest offset (`offset_map.py`): at
       most log.cleaner.dedupe.buffer.size of memory; when the keys do not fit, the
       range ends early (where the map filled) and the rest waits for the next run;
    3. rewrites every segment from the log start to the end of that range, in groups
       that fit one segment (segment.bytes, the index size, int32 relative offsets),
       each into one cleaned segment named after the group's first base. A record
       stays if its key has no later offset in the map; records without a key go
       (Kafka's rule); a tombstone (key with null value) stays while its segment was
       modified within delete.retention.ms of the end of the cleaned head (Kafka's
       per-segment delete horizon), so a consumer starting within that time sees the
       delete. Kept records keep their offsets and their order;
    4. swaps each cleaned segment in for its group (`segment_swap.py`: the steps and
       every crash point, finished or rolled back by recovery);
    5. moves the partition's first dirty offset in the checkpoint to the range's end.

Batches (`compaction_kernels.py`): a batch whose records all stay is copied as is;
one that loses some is rebuilt with the kept records (baseOffset and lastOffsetDelta
unchanged, so offsets and an idempotent producer's last sequence survive; a
compressed one recompressed with its codec); one that loses all disappears, except
the last batch of each producer id in its segment, which stays as an empty batch
(Kafka's RETAIN_EMPTY: the producer's last sequence survives). A group whose
records all go becomes an empty segment, merged away by a later cleaning.

Transactions, as Kafka's cleaner treats them: nothing at or above the last stable
offset is cleaned (an undecided transaction's records may not shadow anything);
the batches of aborted transactions (from the partition's .txnindex) are dropped
and their keys never enter the offset map, so an aborted write cannot remove the
committed value it would have replaced; committed transactional batches are kept
whole, and transaction markers (control batches) are kept forever (Kafka removes a
marker once its transaction's records are gone and delete.retention.ms passed:
not done). A cleaned segment's .txnindex is the concatenation of its group's
(`segment_swap.py` carries it through the swap): an entry whose records are gone
matches no batch any more, which read_committed consumers handle like Kafka's.

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

What it reports: `cleaner-status.json` in the first log dir (per log: dirty ratio,
first dirty offset, last run and its figures), read by `mmlog topics describe
--log-dirs`.
"""

from __future__ import annotations

import logging
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmlog.log import cleaner_checkpoint, compaction_kernels as ck, segment_swap
from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, atomic_write, segment_file
from mmlog.log.kernels import CRC_TABLES, scan_segment
from mmlog.log.offset_map import OffsetMap
from mmlog.protocol import compression

log = logging.getLogger(__name__)

CRASH_ENV = "MMLOG_CLEANER_CRASH_AT"
CRASH_EXIT = 77
CRASH_POINTS = ("cleaned-written", "swap-begun", "swap-committed", "old-segments-deleted", "swap-renamed",
                "before-checkpoint")
STATUS_FILE = "cleaner-status.json"
INT32_MAX = 2**31 - 1
_TXN_OR_CONTROL = 0x10 | 0x20
DECOMPRESS_LIMIT = 256 << 20


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


@dataclass
class _Rows:
    """One segment's batch table and record rows (compaction_kernels.py)."""

    batches: np.ndarray
    h1: np.ndarray
    h2: np.ndarray
    offsets: np.ndarray
    flags: np.ndarray
    rstart: np.ndarray
    rend: np.ndarray

    def batch_of_row(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.batches)), self.batches[:, ck.COUNT])


class _Source:
    """A segment's .log mmap-ed read-only (the inode the swap checks against)."""

    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.path = segment_file(directory, base, LOG_SUFFIX)
        self.file = open(self.path, "rb")
        st = os.fstat(self.file.fileno())
        self.inode, self.size, self.mtime_ns = st.st_ino, st.st_size, st.st_mtime_ns
        self.mm = mmap.mmap(self.file.fileno(), self.size, prot=mmap.PROT_READ) if self.size else None
        self.buf = np.frombuffer(self.mm, dtype=np.uint8) if self.mm is not None else np.zeros(0, np.uint8)

    def rows(self) -> _Rows:
        """Walk every batch and record (compressed batches decompressed one at a time)."""
        nb, nr, _ = ck.count_batches(self.buf, 0, self.size)
        r = _Rows(np.zeros((nb, ck.NCOLS), np.int64), np.zeros(nr, np.uint64), np.zeros(nr, np.uint64),
                  np.zeros(nr, np.int64), np.zeros(nr, np.int64), np.zeros(nr, np.int64), np.zeros(nr, np.int64))
        status, walked = ck.walk_segment(self.buf, 0, self.size, r.batches, r.h1, r.h2, r.offsets, r.flags,
                                         r.rstart, r.rend)
        if status != ck.WALK_OK:
            raise ValueError(f"{self.path}: batch {walked} does not parse")
        for b in np.nonzero(r.batches[:, ck.ATTRS] & 0x07)[0]:
            plain = self.plain(r.batches[b])
            row = r.batches[b]
            if ck.walk_records(plain, 61, len(plain), row[ck.COUNT], row[ck.BASE], row[ck.FIRST_ROW], r.h1, r.h2,
                               r.offsets, r.flags, r.rstart, r.rend) != ck.WALK_OK:
                raise ValueError(f"{self.path}: compressed batch at {row[ck.POS]} does not parse")
        return r

    def plain(self, row) -> np.ndarray:
        """A compressed batch as header + decompressed records (positions as walk_records saw them)."""
        pos, size = int(row[ck.POS]), int(row[ck.SIZE])
        body = compression.decompress(int(row[ck.ATTRS]) & 0x07, self.mm[pos + 61 : pos + size], DECOMPRESS_LIMIT)
        plain = np.empty(61 + len(body), np.uint8)
        plain[:61] = self.buf[pos : pos + 61]
        plain[61:] = np.frombuffer(body, np.uint8)
        return plain

    def close(self) -> None:
        self.buf = np.zeros(0, np.uint8)
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view still alive (a traceback's frame): unmapped when it is collected
                pass
        self.file.close()


class Cleaner:
    """Cleans one log at a time with one offset map (the body of the cleaner process)."""

    def __init__(self, offset_map: OffsetMap, throttler: Throttler | None = None,
                 crash_at: str | None = None) -> None:
        self.map = offset_map
        self.throttler = throttler
        self._aborted: list = []  # the partition's aborted transactions, for the cleaning at hand
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
        segment, the high watermark and the first segment within min.compaction.lag.ms."""
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
        self._aborted = part.aborted_transactions(part.snapshot().log_start, end)
        end_offset = self._build_map(directory, dirty, first_dirty, end)
        if end_offset <= first_dirty:
            log.warning("%s: log.cleaner.dedupe.buffer.size holds no key of the dirty range", directory.name)
            return None
        stats.end_offset = end_offset
        horizon = self._delete_horizon(directory, cleanable, nxt, first_dirty, part.config.delete_retention_ms)
        self._name_in_checkpoint(directory, first_dirty)
        for group in group_segments(part, [b for b in cleanable if b < end_offset], nxt):
            if self._clean_group(part, group, nxt[group[-1]], horizon, stats):
                stats.segments_swapped += len(group)
        self.crash("before-checkpoint")
        set_first_dirty(directory, end_offset)
        stats.elapsed_s = time.monotonic() - started
        return stats

    def _aborted_batches(self, batches: np.ndarray) -> np.ndarray:
        """Which batches belong to an aborted transaction: its producer's, from its first offset to
        its abort marker (one numpy pass per aborted transaction, none per record)."""
        mask = np.zeros(len(batches), np.bool_)
        for txn in self._aborted:
            mask |= ((batches[:, ck.PID] == txn.producer_id) & (batches[:, ck.BASE] >= txn.first_offset)
                     & (batches[:, ck.BASE] < txn.last_offset) & ((batches[:, ck.ATTRS] & 0x20) == 0))
        return mask

    def _build_map(self, directory: Path, dirty: list[int], first_dirty: int, end: int) -> int:
        """Map the keys of the dirty segments; return the offset the map covers up to (the new first
        dirty): `end`, or just past the last record mapped when the map filled first (Kafka's rule)."""
        self.map.clear()
        for base in dirty:
            source = _Source(directory, base)
            try:
                rows = source.rows()
                self._io(source.size)
                bor = rows.batch_of_row()
                control = (rows.batches[bor, ck.ATTRS] & 0x20) != 0 if len(bor) else np.zeros(0, np.bool_)
                aborted = self._aborted_batches(rows.batches)[bor] if len(bor) else np.zeros(0, np.bool_)
                mask = ((rows.flags & ck.HAS_KEY) != 0) & ~control & ~aborted & (rows.offsets >= first_dirty)
                if not self.map.put(rows.h1, rows.h2, rows.offsets, mask):
                    return self.map.latest_offset + 1
            finally:
                source.close()
        return end

    @staticmethod
    def _delete_horizon(directory: Path, cleanable: list[int], nxt: dict[int, int], first_dirty: int,
                        retention_ms: int) -> int:
        """Tombstones in segments modified before this go (Kafka: the cleaned head's last segment's
        modification time minus delete.retention.ms; 0 before the first cleaning)."""
        head = [b for b in cleanable if nxt[b] <= first_dirty]
        if not head:
            return 0
        return os.stat(segment_file(directory, head[-1], LOG_SUFFIX)).st_mtime_ns // 1_000_000 - retention_ms

    def _name_in_checkpoint(self, directory: Path, first_dirty: int) -> None:
        """Before a partition's first swap, name it in the checkpoint (recovery then allows gaps)."""
        key = cleaner_checkpoint.partition_key(directory)
        entries = cleaner_checkpoint.read(directory.parent)
        if key not in entries:
            entries[key] = first_dirty
            cleaner_checkpoint.write(directory.parent, entries)

    def _clean_group(self, part, group: list[int], end: int, horizon: int, stats: CleanStats) -> bool:
        """Write the group's cleaned segment and swap it in; False if nothing changed or the swap lost."""
        directory = part.directory
        base = group[0]
        segment_swap.discard_cleaned(directory, base)
        out_path = segment_swap.temp_file(directory, base, LOG_SUFFIX, segment_swap.CLEANED)
        inodes, changed, mtime_ns = [], False, 0
        with open(out_path, "wb") as out:
            for b in group:
                source = _Source(directory, b)
                try:
                    inodes.append(source.inode)
                    mtime_ns = max(mtime_ns, source.mtime_ns)
                    retain_deletes = source.mtime_ns // 1_000_000 > horizon
                    data, same = self._clean_segment(source, retain_deletes, stats)
                    changed |= not same
                    out.write(data)
                    self._io(source.size + len(data))
                finally:
                    source.close()
            out.flush()
            os.fsync(out.fileno())
        if not changed and len(group) == 1:
            segment_swap.discard_cleaned(directory, base)
            return False
        os.utime(out_path, ns=(mtime_ns, mtime_ns))  # the delete horizon reads it next time
        write_indexes(directory, base, part.config)
        carry_txnindex(directory, group)
        self.crash("cleaned-written")
        return part.replace_with_cleaned(group, end, inodes, self.crash)

    def _clean_segment(self, source: _Source, retain_deletes: bool, stats: CleanStats):
        """(cleaned bytes of one segment, whether they are the segment's bytes unchanged)."""
        if not source.size:
            return b"", True
        rows = source.rows()
        batches = rows.batches
        nb = len(batches)
        bor = rows.batch_of_row()
        attrs = batches[:, ck.ATTRS]
        latest = self.map.get(rows.h1, rows.h2)
        has_key = (rows.flags & ck.HAS_KEY) != 0
        tomb = (rows.flags & ck.NULL_VALUE) != 0
        keep = has_key & ((latest < 0) | (rows.offsets >= latest))
        if not retain_deletes:
            keep &= ~tomb
        aborted = self._aborted_batches(batches)  # transactions: see the module docstring
        untouchable = ((attrs & _TXN_OR_CONTROL) != 0) & ~aborted
        if len(bor):
            keep |= untouchable[bor]
            keep &= ~aborted[bor]
        kept = np.bincount(bor, weights=keep, minlength=nb).astype(np.int64) if len(bor) else np.zeros(nb, np.int64)
        count = batches[:, ck.COUNT]
        actions = np.where(kept == count, ck.COPY, np.where(kept == 0, ck.DROP, ck.REBUILD)).astype(np.int64)
        actions[(count == 0)] = ck.DROP  # an old empty batch goes unless kept below
        # Kept as an empty batch: each producer's last batch here.
        retain_empty = np.zeros(nb, np.bool_)
        pids = batches[:, ck.PID]
        idem = np.nonzero(pids >= 0)[0]
        if len(idem):
            _, last_of = np.unique(pids[idem][::-1], return_index=True)
            retain_empty[idem[len(idem) - 1 - last_of]] = True
        actions[(actions == ck.DROP) & retain_empty] = ck.EMPTY
        actions[(count == 0) & retain_empty] = ck.COPY
        actions[untouchable] = ck.COPY
        compressed = (attrs & 0x07) != 0
        side, side_start, side_len = self._rebuild_compressed(source, rows, keep, actions, compressed)
        out = np.empty(source.size + len(side), np.uint8)
        n = ck.rewrite(source.buf, batches, actions, keep, rows.rstart, rows.rend, side, side_start, side_len, out,
                       CRC_TABLES)
        stats.bytes_read += source.size
        stats.bytes_written += n
        stats.records_read += int(count.sum())
        stats.records_kept += int(kept.sum())
        return out[:n], bool((actions == ck.COPY).all())

    @staticmethod
    def _rebuild_compressed(source: _Source, rows: _Rows, keep, actions, compressed):
        """Compressed batches losing some records: rebuilt plain, recompressed with their codec (SIDE)."""
        nb = len(rows.batches)
        side_start = np.zeros(nb, np.int64)
        side_len = np.zeros(nb, np.int64)
        parts, at = [], 0
        for b in np.nonzero(compressed & (actions == ck.REBUILD))[0]:  # one step per batch, not per record
            row = rows.batches[b]
            plain = source.plain(row)
            one = row.copy().reshape(1, ck.NCOLS)
            one[0, ck.POS], one[0, ck.SIZE] = 0, len(plain)
            rebuilt = np.empty(len(plain), np.uint8)
            n = ck.rewrite(plain, one, np.array([ck.REBUILD]), keep, rows.rstart, rows.rend, np.zeros(0, np.uint8),
                           side_start[:1], side_len[:1], rebuilt, CRC_TABLES)
            batch = compression.compress_batch(rebuilt[:n].tobytes(), int(row[ck.ATTRS]) & 0x07)
            parts.append(batch)
            side_start[b], side_len[b] = at, len(batch)
            at += len(batch)
            actions[b] = ck.SIDE
        side = np.frombuffer(b"".join(parts), np.uint8) if parts else np.zeros(0, np.uint8)
        return side, side_start, side_len


# ---------------------------------------------------------------- helpers over a partition's files


def segment_size(part, base: int) -> int:
    return os.path.getsize(segment_file(part.directory, base, LOG_SUFFIX))


def segment_max_timestamp(part, base: int) -> int:
    """The largest timestamp of an inactive segment (its time index's last entry)."""
    path = segment_file(part.directory, base, TIMEINDEX_SUFFIX)
    try:
        data = np.fromfile(path, dtype=np.int64)
    except FileNotFoundError:
        return -1
    if len(data) < 2:
        return -1
    ts = data[0::2]
    return int(ts.max()) if len(ts) else -1


def group_segments(part, bases: list[int], nxt: dict[int, int]) -> list[list[int]]:
    """Consecutive segments whose cleaned union fits one segment (Kafka's groupSegmentsBySize)."""
    config = part.config
    max_entries = config.segment_index_bytes // 8
    groups: list[list[int]] = []
    for base in bases:
        size = segment_size(part, base)
        if groups:
            g = groups[-1]
            total = sum(segment_size(part, b) for b in g) + size
            entries = total // max(config.index_interval_bytes, 1) + 1
            if total <= config.segment_bytes and entries < max_entries and nxt[base] - 1 - g[0] <= INT32_MAX:
                g.append(base)
                continue
        groups.append([base])
    return groups


def write_indexes(directory: Path, base: int, config) -> None:
    """Build the cleaned log's offset and time index (.cleaned) with recovery's own scan."""
    log_path = segment_swap.temp_file(directory, base, LOG_SUFFIX, segment_swap.CLEANED)
    size = os.path.getsize(log_path)
    cap = max(config.segment_index_bytes // 8, 2)
    index = np.zeros(2 * cap, np.int32)
    times = np.zeros(2 * max(config.segment_index_bytes // 16, 2), np.int64)
    n_idx = n_time = 0
    if size:
        with open(log_path, "rb") as f, mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            status, valid, _, _, n_idx, n_time, max_ts, off_max, _ = scan_segment(
                buf, 0, size, base, base, config.index_interval_bytes, False, CRC_TABLES, index, times, True)
            del buf
        if status != 0 or valid != size:
            raise ValueError(f"{log_path}: the cleaned log does not scan (status {status} at {valid})")
        last_ts = times[2 * n_time - 2] if n_time else -1
        if max_ts > last_ts and 2 * n_time + 2 <= len(times):  # the final entry a roll adds
            times[2 * n_time], times[2 * n_time + 1] = max_ts, off_max - base
            n_time += 1
    for suffix, data in ((INDEX_SUFFIX, index[: 2 * n_idx]), (TIMEINDEX_SUFFIX, times[: 2 * n_time])):
        path = segment_swap.temp_file(directory, base, suffix, segment_swap.CLEANED)
        with open(path, "wb") as f:
            f.write(data.tobytes())
            f.flush()
            os.fsync(f.fileno())


def carry_txnindex(directory: Path, group: list[int]) -> None:
    """The group's .txnindex files, concatenated, as the cleaned segment's (none if none has one)."""
    parts = []
    for b in group:
        try:
            parts.append(segment_file(directory, b, segment_swap.TXNINDEX_SUFFIX).read_bytes())
        except FileNotFoundError:
            pass
    if parts:
        path = segment_swap.temp_file(directory, group[0], segment_swap.TXNINDEX_SUFFIX, segment_swap.CLEANED)
        atomic_write(path, b"".join(parts))


def first_dirty_offset(directory: Path) -> int:
    key = cleaner_checkpoint.partition_key(directory)
    return cleaner_checkpoint.read(Path(directory).parent).get(key, 0)


def set_first_dirty(directory: Path, offset: int) -> None:
    directory = Path(directory)
    entries = cleaner_checkpoint.read(directory.parent)
    entries[cleaner_checkpoint.partition_key(directory)] = offset
    cleaner_checkpoint.write(directory.parent, entries)

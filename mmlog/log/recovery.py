"""Recovery: bring a partition's files back to a valid prefix after an unclean stop.

Runs under the partition lock, when a partition is opened after anything but a
clean close, and when a writer finds that its predecessor died mid-operation.

Segments before the one holding the recovery point were fsynced before the
crash (by a flush, by the flush after their roll, or by the recovery that scanned
them: it fsyncs what it validated before it moves the recovery point past it):
only their indexes are sanity-checked (and rebuilt from the log if missing
or inconsistent). From that segment on, every batch is validated by
`kernels.scan_segment` (length, magic, CRC-32C, offset continuity) while the
indexes are rebuilt in the same pass. The log is truncated at the first invalid
byte, which covers a torn tail, garbage appended after the last batch, a flipped
byte and a bad length alike, and every later segment is deleted: nothing after a
hole can be trusted, and nothing after it was acknowledged as durable.

Transaction indexes (`txn_index.py`) are not touched here: an index depends on
the producer state at its segment's base, which the partition rebuilds after this
(`Partition._recover`), from `scanned_from` on.

Crash during recovery itself: it only truncates files and deletes whole later
segments, each step leaving a valid prefix, and the state is published last, so
running it again from the start is always safe.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from mmlog.config.settings import LogConfig
from mmlog.log import kernels
from mmlog.log.cleaner import checkpoint as cleaner_checkpoint, segment_swap
from mmlog.log.files import DELETED_SUFFIX, delete_segment_files, segment_bases
from mmlog.system.files import fsync_dir
from mmlog.log.offset_index import CorruptIndex
from mmlog.log.segment import ScanResult, Segment

log = logging.getLogger(__name__)


@dataclass
class Recovered:
    """The segments found valid and the values the partition state must publish."""

    segments: list[Segment]
    log_start: int
    log_end: int
    active_size: int
    index_entries: int
    time_entries: int
    max_timestamp: int
    offset_of_max_ts: int
    since_index: int
    truncated: list[str] = field(default_factory=list)  # one line per repaired file, for the log
    scanned_from: int = 0  # base of the first segment rescanned (its transaction index is rebuilt from it on)

    @property
    def active(self) -> Segment:
        return self.segments[-1]


def remove_leftovers(directory: Path) -> None:
    """Delete files of interrupted operations: `*.deleted` segments and `*.tmp` writes."""
    for name in os.listdir(directory):
        if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
            os.unlink(directory / name)


def recover(directory: Path, config: LogConfig, log_start: int, recovery_point: int,
            sync: bool = True) -> Recovered:
    """Validate from the segment holding recovery_point on; return the valid segments (synced to
    disk unless `sync` is false: a partition created by this open, see Partition.fresh)."""
    directory = Path(directory)
    notes: list[str] = []
    segment_swap.complete_swaps(directory, notes)
    remove_leftovers(directory)
    gaps = config.compact or cleaner_checkpoint.was_cleaned(directory)
    bases = _drop_below_start(directory, segment_bases(directory), log_start)
    if not bases:
        bases = [log_start]
    first_scanned = max((b for b in bases if b <= recovery_point), default=bases[0])
    kept: list[tuple[Segment, ScanResult | None]] = []
    for i, base in enumerate(bases):
        if base < first_scanned:
            trusted = _open_trusted(directory, base)
            if trusted is not None:
                kept.append((trusted, None))
                continue
            notes.append(f"{directory.name}/{base:020d}: index rebuilt")
        previous = kept[-1][1] if kept else None
        if previous is not None and (base < previous.next_offset if gaps else base != previous.next_offset):
            notes.append(f"{directory.name}: segment {base:020d} does not follow offset {previous.next_offset}")
            _delete_from(directory, bases[i:], notes)
            break
        segment = Segment(directory, base, create=True, index_bytes=config.segment_index_bytes)
        result = segment.scan(base, config.index_interval_bytes, gaps=gaps)
        kept.append((segment, result))
        if result.status != kernels.SCAN_END:
            notes.append(
                f"{segment.log_path.name}: {result.reason} at position {result.valid_end}, "
                f"truncated {segment.file_size() - result.valid_end} bytes"
            )
            segment.truncate(result.valid_end)
            _delete_from(directory, bases[i + 1 :], notes)
            break
    active, result = kept[-1]
    if result is None:  # every scanned segment went: the last trusted one becomes active again
        active.close()
        active = Segment(directory, active.base_offset, index_bytes=config.segment_index_bytes)
        result = active.scan(active.base_offset, config.index_interval_bytes, gaps=gaps)
        kept[-1] = (active, result)
    for segment, scanned in kept[:-1]:
        if scanned is not None:
            segment.make_inactive(scanned.index_entries, scanned.time_entries, scanned.max_timestamp,
                                  scanned.offset_of_max_ts)
    segments = [segment for segment, _ in kept]
    if sync:
        # Every segment scanned here is about to lie below the new recovery point, where the next recovery
        # trusts it unread; after a process crash its bytes (and the indexes just rebuilt) may still be only
        # in the page cache, so they are fsynced now, or a later power loss could leave a trusted segment
        # with a zeroed or missing tail that nothing checks.
        for segment, scanned in kept:
            if scanned is not None:
                segment.flush()
        fsync_dir(directory)
    for line in notes:
        log.warning("recovery: %s", line)
    return Recovered(
        segments=segments,
        log_start=max(log_start, segments[0].base_offset),
        log_end=result.next_offset,
        active_size=result.valid_end,
        index_entries=result.index_entries,
        time_entries=result.time_entries,
        max_timestamp=result.max_timestamp,
        offset_of_max_ts=result.offset_of_max_ts,
        since_index=result.since_index,
        truncated=notes,
        scanned_from=min(segment.base_offset for segment, scanned in kept if scanned is not None),
    )


def _delete_from(directory: Path, bases: list[int], notes: list[str]) -> None:
    """Delete the segments that follow a hole, newest first."""
    for base in reversed(bases):
        notes.append(f"{directory.name}/{base:020d}: deleted, after a truncation")
        delete_segment_files(directory, base)


def _drop_below_start(directory: Path, bases: list[int], log_start: int) -> list[int]:
    """Delete segments that lie wholly below the log start offset (an interrupted retention)."""
    keep = list(bases)
    while len(keep) > 1 and keep[1] <= log_start:
        delete_segment_files(directory, keep.pop(0))
    return keep


def _open_trusted(directory: Path, base: int) -> Segment | None:
    """Open an fsynced, inactive segment whose indexes pass their checks; None to rebuild."""
    try:
        segment = Segment(directory, base)
    except FileNotFoundError:
        return None
    try:
        segment.offset_index.check(segment.offset_index.capacity, segment.file_size())
        segment.time_index.check(segment.time_index.capacity)
        return segment
    except CorruptIndex:
        segment.close()
        return None

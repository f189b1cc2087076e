"""Replacing a group of segments by the one segment the log cleaner made of them, crash-safely.

The cleaner (`cleaner.py`) writes a cleaned segment under temporary names, all
named after the group's first base offset B:

    B.log.cleaned  B.index.cleaned  B.timeindex.cleaned  [B.txnindex.cleaned]

then, holding the partition lock, `swap_in` replaces the group [B, C, D, ...]:

    1. check the group is still what was cleaned (each .log the same inode): else the
       cleaned files are deleted and nothing changes (retention or a truncation won);
    2. PENDING_OP = SWAP and the generation bumped, in one seqlocked update, and the
       state page msync-ed: from here any crash is finished by recovery;
    3. write B.swap-end (fsynced): the offset the group ends at, which the cleaned
       segment may not show (its last records may all be gone); then rename every
       B.*.cleaned to B.*.swap, the .log last: B.log.swap is the commit point ("the
       cleaned segment is whole");
    4. unlink the other segments of the group (C, D, ... with their side files);
    5. rename B.*.swap to B.* (over the old B's files), the .log last;
    6. publish: generation bumped again, PENDING_OP idle.

Crash points and what the next lock holder's recovery (`complete_swaps`, called
first thing by `recovery.recover`) does:

    - while the .cleaned files are written (no lock, no PENDING_OP): *.cleaned are
      leftovers, deleted; the old segments are whole: rolled back;
    - in 3 before B.log.swap exists: the .swap index files are deleted: rolled back;
    - in 3 after it, or in 4 or 5: finished: every segment whose base lies in
      (B, the offset in B.swap-end) is unlinked, the .swap files take their final
      names, B.swap-end goes;
    - in 6: nothing left to do but publish, which recovery does.

Readers never see half a swap: a process that meets a new generation with
PENDING_OP = SWAP waits for it to end (`Partition.snapshot`), and one whose
listing overlapped the renames sees the generation move again and lists anew. A
reader holding the old files (a fetch's sendfile in flight, an mmap-ed index)
keeps reading the old inodes, which the kernel keeps until they are closed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_bases, segment_file
from mmlog.system.files import atomic_write, fsync_dir

CLEANED = ".cleaned"
SWAP = ".swap"
SWAP_END = ".swap-end"
TXNINDEX_SUFFIX = ".txnindex"
# A segment's files, the .log last: its rename is the commit point of each step.
SUFFIXES = (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX, LOG_SUFFIX)


def temp_file(directory: Path, base: int, suffix: str, stage: str) -> Path:
    """`<base><suffix><stage>`, e.g. 00000000000000000000.log.cleaned."""
    return segment_file(directory, base, suffix + stage)


def remove_segment(directory: Path, base: int) -> None:
    """Unlink a segment's files, side files included (.txnindex); open descriptors keep reading."""
    for suffix in SUFFIXES:
        try:
            os.unlink(segment_file(directory, base, suffix))
        except FileNotFoundError:
            pass


def discard_cleaned(directory: Path, base: int) -> None:
    """Remove a cleaning's temporary files (the group did not change, or changed under it)."""
    try:
        os.unlink(segment_file(directory, base, SWAP_END))
    except FileNotFoundError:
        pass
    for suffix in SUFFIXES:
        for stage in (CLEANED, SWAP):
            try:
                os.unlink(temp_file(directory, base, suffix, stage))
            except FileNotFoundError:
                pass


def swap_in(directory: Path, group: list[int], end: int, inodes: list[int], state,
            crash: Callable[[str], None]) -> bool:
    """Steps 1-5 of the module docstring (caller holds the lock, publishes step 6). False: the
    group changed since it was cleaned, and the cleaned files are gone."""
    directory = Path(directory)
    base = group[0]
    for b, ino in zip(group, inodes):
        try:
            if os.stat(segment_file(directory, b, LOG_SUFFIX)).st_ino != ino:
                raise FileNotFoundError
        except FileNotFoundError:
            discard_cleaned(directory, base)
            return False
    if not temp_file(directory, base, LOG_SUFFIX, CLEANED).exists():  # a recovery elsewhere removed them
        discard_cleaned(directory, base)
        return False
    state.set_pending(5)  # Op.SWAP
    state.update(generation=state.get("generation") + 1)
    state.flush()
    crash("swap-begun")
    atomic_write(segment_file(directory, base, SWAP_END), b"%d\n" % end)
    for suffix in SUFFIXES:
        cleaned = temp_file(directory, base, suffix, CLEANED)
        if cleaned.exists():
            os.rename(cleaned, temp_file(directory, base, suffix, SWAP))
    fsync_dir(directory)
    crash("swap-committed")
    _finish(directory, base, group[1:], crash)
    return True


def _finish(directory: Path, base: int, others: list[int], crash: Callable[[str], None]) -> None:
    """Steps 4 and 5: drop the rest of the group, give the .swap files their final names."""
    for b in others:
        remove_segment(directory, b)
    crash("old-segments-deleted")
    for suffix in SUFFIXES:
        if suffix == LOG_SUFFIX:
            crash("swap-indexes-renamed")  # B's new indexes beside its old .log: what a reader must never pair
        swap = temp_file(directory, base, suffix, SWAP)
        if swap.exists():
            os.replace(swap, segment_file(directory, base, suffix))
        elif suffix == TXNINDEX_SUFFIX:  # the old B had one the cleaned segment does not need
            try:
                os.unlink(segment_file(directory, base, suffix))
            except FileNotFoundError:
                pass
    try:
        os.unlink(segment_file(directory, base, SWAP_END))
    except FileNotFoundError:
        pass
    fsync_dir(directory)
    crash("swap-renamed")


def complete_swaps(directory: Path, notes: list[str]) -> None:
    """Recovery: finish each committed swap, roll back the rest, delete leftover .cleaned files."""
    directory = Path(directory)
    names = os.listdir(directory)
    for name in names:
        if name.endswith(CLEANED):
            os.unlink(directory / name)
    committed = sorted(int(n[:20]) for n in names if n.endswith(LOG_SUFFIX + SWAP) and n[:20].isdigit())
    for base in committed:
        end = _swap_end(directory, base)
        others = [b for b in segment_bases(directory) if base < b < end]
        notes.append(f"{directory.name}/{base:020d}: finished the cleaner's swap (replacing {len(others) + 1} "
                     f"segments up to offset {end})")
        _finish(directory, base, others, lambda point: None)
    for name in os.listdir(directory):
        if name.endswith((SWAP, SWAP_END)):  # .swap files whose .log never got there: the swap did not commit
            notes.append(f"{directory.name}/{name}: rolled back an uncommitted swap")
            os.unlink(directory / name)


def _swap_end(directory: Path, base: int) -> int:
    """The group's end offset, from B.swap-end (written whole before the commit point)."""
    return int(segment_file(directory, base, SWAP_END).read_text())

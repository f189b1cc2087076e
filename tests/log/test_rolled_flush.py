"""A segment that rolls is fsynced (log, indexes, the producer snapshot taken at the roll, the directory)
whatever the flush policy, off the append path: so a power loss can only cost the active segment, as in
Kafka, and the append that rolled waits for no disk."""

from __future__ import annotations

import os
import threading

import pytest

from mmlog.log import rolled_flush
from mmlog.protocol import records as rec


@pytest.fixture
def fsyncs(monkeypatch):
    """(thread name, file name) of each os.fsync call (the disk's flush, observed; nothing else changes)."""
    calls = []
    real = os.fsync

    def fsync(fd):
        calls.append((threading.current_thread().name, os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_a_rolled_segment_is_fsynced_by_the_flusher_thread_not_the_append(open_partition, partition_dir, fsyncs):
    p = open_partition()  # the default flush policy: appends never fsync
    p.append(rec.build_batch([(None, b"x" * 100)]))
    first = p.segment_bases()[0]
    fsyncs.clear()
    while p.segment_bases() == [first]:
        p.append(rec.build_batch([(None, b"x" * 100)]))
    in_append = [name for thread, name in fsyncs if thread == threading.current_thread().name]
    rolled_flush.wait_idle()
    second = p.segment_bases()[1]
    sealed = {f"{first:020d}{suffix}" for suffix in (".log", ".index", ".timeindex")}
    by_flusher = {name for thread, name in fsyncs if thread == "rolled-segment-flush"}
    assert sealed | {f"{second:020d}.snapshot", partition_dir.name} <= by_flusher
    assert in_append == []  # the append that rolled waited on no fsync: no segment, snapshot or directory


def test_a_segment_deleted_before_its_flush_is_skipped(tmp_path):
    (tmp_path / "t-0").mkdir()
    rolled_flush.submit(tmp_path / "t-0", 0)  # no files: nothing to sync but the directory
    rolled_flush.submit(tmp_path / "gone-0", 0)  # no directory: the partition was deleted
    rolled_flush.wait_idle()


def test_recovery_fsyncs_every_segment_it_scanned_before_trusting_it_at_the_next_open(open_partition, partition_dir,
                                                                                     fsyncs):
    """After a process crash the segments recovery validates may be only in the page cache; the recovery point
    moves past them, so the next recovery (after a power loss, say) would trust them unread: synced first."""
    p = open_partition()
    while len(p.segment_bases()) < 4:
        p.append(rec.build_batch([(None, b"x" * 100)]))
    bases = p.segment_bases()
    rolled_flush.wait_idle()
    p.close(clean=False)  # a crash: nothing flushed, the recovery point still at the start
    fsyncs.clear()
    open_partition()
    synced = {name for _, name in fsyncs}
    assert {f"{b:020d}.log" for b in bases} <= synced

"""A partition an open creates fsyncs only its leader-epoch checkpoint, and losing its other unsynced files in a
crash costs nothing."""

from __future__ import annotations

import os

import pytest

from mmlog.log.partition import Partition
from mmlog.protocol import records as rec


@pytest.fixture
def fsyncs(monkeypatch):
    """The names of the files os.fsync is called on (the disk's flush, observed; nothing else changes)."""
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real(fd))[1])
    return calls


def test_creating_a_partition_fsyncs_only_its_epoch_checkpoint(tmp_path, config, fsyncs):
    """The checkpoint, renamed before its data reached the disk, could come back from a power loss empty:
    it is written durably (file, then directory). The segment, indexes and state page are not."""
    p = Partition(tmp_path / "t-0", config)
    assert p.fresh and fsyncs == []
    p.become_leader(0, (0,), (0,), 0)
    assert fsyncs == ["leader-epoch-checkpoint.tmp", "t-0"]
    p.append(rec.build_batch([(None, b"x")]))
    p.flush()  # appends are as durable as the flush policy says, as before
    assert fsyncs
    p.close(clean=True)


def test_reopening_an_existing_partition_still_syncs_its_recovery(tmp_path, config, fsyncs):
    Partition(tmp_path / "t-0", config).close(clean=False)
    fsyncs.clear()
    again = Partition(tmp_path / "t-0", config)
    assert not again.fresh and fsyncs
    again.close(clean=False)


@pytest.mark.parametrize("lost", [["partition.state"], ["00000000000000000000.index", "00000000000000000000.timeindex"],
                                  ["leader-epoch-checkpoint"], ["partition.state", "00000000000000000000.log"]])
def test_a_fresh_partition_whose_files_a_crash_lost_opens_empty_and_works(tmp_path, config, lost):
    p = Partition(tmp_path / "t-0", config)
    p.become_leader(0, (0,), (0,), 0)
    p.close(clean=False)
    for name in lost:
        (tmp_path / "t-0" / name).unlink(missing_ok=True)
    again = Partition(tmp_path / "t-0", config)
    assert again.log_end_offset == 0
    again.become_leader(0, (0,), (0,), 0)
    assert again.append(rec.build_batch([(None, b"after")])).base_offset == 0
    assert again.read(0, 1 << 20).slice.size > 0
    again.close(clean=False)

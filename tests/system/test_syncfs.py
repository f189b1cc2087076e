"""syncfs in place of per-file fsyncs: trusted on local disks only, and a clean stop through it leaves the
same files as one through fsyncs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mmlog.config.settings import LogConfig
from mmlog.log import manager as manager_module
from mmlog.log.manager import LogManager
from mmlog.log.state import PartitionState
from mmlog.system import syncfs
from tests.log.logtools import random_batch


def test_a_local_disk_is_trusted_and_a_pseudo_file_system_is_not(tmp_path):
    assert syncfs.supported([tmp_path])
    assert not syncfs.supported([Path("/proc")])  # not a disk: the caller fsyncs file by file
    assert not syncfs.supported([tmp_path / "missing"])
    syncfs.sync([tmp_path, tmp_path])  # one call per file system; no error


def stop_cleanly(directory: Path, synced: bool, monkeypatch) -> dict:
    """Write the same batches to 12 partitions, stop cleanly one way, and read back what the stop left."""
    monkeypatch.setattr(manager_module.syncfs, "supported", lambda dirs: synced)
    rng = random.Random(3)
    m = LogManager(directory, LogConfig(segment_index_bytes=1024), max_open=4)
    m.create_topic("t", 12)
    for i in range(60):
        m.partition("t", i % 12).append(random_batch(rng))
    m.close(clean=True)
    out = {}
    for p in range(12):
        d = directory / f"t-{p}"
        s = PartitionState.copied(d).snapshot()
        files = {f.name: f.read_bytes() for f in sorted(d.iterdir()) if f.suffix in (".log", ".snapshot")}
        out[p] = (s.clean, s.recovery_point, s.log_end, s.high_watermark, files)
    return out


def test_the_synced_clean_stop_leaves_what_the_fsynced_one_leaves(tmp_path, monkeypatch):
    synced = stop_cleanly(tmp_path / "synced", True, monkeypatch)
    fsynced = stop_cleanly(tmp_path / "fsynced", False, monkeypatch)
    assert synced == fsynced
    assert all(clean == 1 for clean, *_ in synced.values())
    again = LogManager(tmp_path / "synced", LogConfig(segment_index_bytes=1024))
    try:
        again.load()
        assert (again.loaded, again.recovered) == (12, 0)  # clean: nothing to recover
    finally:
        again.close(clean=False)

"""Offline log dirs: a failing disk (EIO) takes its whole log dir offline for every process of a broker,
a full disk does not; the log manager then serves, places, checkpoints and closes only the other dirs.

The failing disk is a loop-mounted ext4 shut down with FS_IOC_SHUTDOWN (tests/disk.py; root only)."""

from __future__ import annotations

import errno
import os

import pytest

from mmlog.errors import KafkaStorageError
from mmlog.log import log_dirs
from mmlog.log.log_dirs import LogDirHealth
from mmlog.log.manager import LogManager
from mmlog.protocol.records import build_batch
from tests import disk


def test_a_dir_marked_offline_in_a_forked_child_is_offline_in_the_parent_and_its_other_children(tmp_path):
    health = LogDirHealth.create([tmp_path / "a", tmp_path / "b"])
    assert not health.any_offline[0] and health.online_slots() == [0, 1]
    pid = os.fork()
    if pid == 0:
        os._exit(0 if log_dirs.report(tmp_path / "b" / "t-0" / "00000000000000000000.log",
                                      OSError(errno.EIO, "Input/output error")) else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert health.offline_slots() == [1] and health.cause(1) == (errno.EIO, pid)
    assert LogDirHealth.shared([tmp_path / "a", tmp_path / "b"]) is health  # what a forked processor finds


@pytest.mark.parametrize("code, offline", [(errno.EIO, True), (errno.EROFS, True), (errno.EUCLEAN, True),
                                           (errno.ENOSPC, False), (errno.EDQUOT, False), (errno.ENOENT, False)])
def test_a_failing_disk_takes_a_dir_offline_and_a_full_one_or_a_missing_file_does_not(tmp_path, code, offline):
    health = LogDirHealth.create([tmp_path / "a"])
    assert health.report(tmp_path / "a" / "t-0", OSError(code, os.strerror(code))) is offline
    assert health.offline(0) is offline
    assert not health.report(tmp_path / "elsewhere", OSError(errno.EIO, "Input/output error"))


@pytest.fixture
def two_dirs(tmp_path):
    """(healthy dir, dir on an ext4 image, the image's mount point)."""
    with disk.failing_fs(tmp_path) as ext4:
        yield tmp_path / "healthy", ext4 / "data", ext4


def _by_dir(manager: LogManager, topic: str, partitions: int) -> tuple[list[int], list[int]]:
    where = {p: manager.partition(topic, p).directory.parent for p in range(partitions)}
    return ([p for p, d in where.items() if d == manager.log_dirs[0]],
            [p for p, d in where.items() if d == manager.log_dirs[1]])


def test_an_eio_takes_every_partition_of_its_dir_offline_and_the_manager_goes_on_with_the_others(two_dirs):
    healthy, failing, ext4 = two_dirs
    manager = LogManager([healthy, failing])
    manager.load()
    manager.create_topic("t", 6)
    good, bad = _by_dir(manager, "t", 6)
    assert good and len(bad) >= 2
    batch = build_batch([(None, b"x" * 50)] * 3)
    for p in range(6):
        manager.partition("t", p).append(bytearray(batch))

    disk.shut_down(ext4)
    with pytest.raises(KafkaStorageError, match="log dir is offline"):
        manager.partition("t", bad[0]).append(bytearray(batch))
    for p in bad:  # the others in the dir too, without touching the disk again
        with pytest.raises(KafkaStorageError, match="is offline"):
            manager.partition("t", p)
        assert manager.is_offline("t", p)
    assert manager.offline_partitions(1) == [("t", p) for p in bad]
    for p in good:
        assert not manager.is_offline("t", p)
        assert manager.partition("t", p).append(bytearray(batch)).base_offset == 3

    manager.create_topic("after", 4)  # new partitions go to the online dir only
    assert all(manager.partition("after", p).directory.parent == healthy for p in range(4))
    manager.flush_due()
    manager.roll_due()
    manager.apply_retention()
    manager.checkpoint_high_watermarks()
    manager.delete_topic("t")  # its partitions on the dead disk stay there until the dir is back
    manager.close(clean=True)


def test_a_log_dir_that_fails_before_the_broker_starts_is_offline_from_the_start(two_dirs):
    healthy, failing, ext4 = two_dirs
    manager = LogManager([healthy, failing])
    manager.load()
    manager.create_topic("t", 6)
    good, bad = _by_dir(manager, "t", 6)
    manager.close(clean=True)

    disk.shut_down(ext4)
    restarted = LogManager([healthy, failing])
    notes = restarted.load()
    assert restarted.dir_health.offline_slots() == [1] and restarted.loaded == len(good)
    assert len(notes) == len(bad)
    for p in bad:
        with pytest.raises(KafkaStorageError):
            restarted.partition("t", p)
    restarted.close(clean=True)

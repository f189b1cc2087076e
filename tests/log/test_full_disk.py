"""A full file system is an error, not a crash: KAFKA_STORAGE_ERROR, nothing acknowledged lost, writes resume.

Runs on a small tmpfs mounted for the test (root only; skipped with the reason
otherwise). Before reservations, the first store into an index page with no block
behind it killed the process with SIGBUS; here that would kill pytest itself.
"""

from __future__ import annotations

import os

import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import KafkaStorageError
from mmlog.log.partition import Partition
from tests import disk
from tests.log.logtools import stored_records, tagged_batch


@pytest.fixture
def small_fs(tmp_path):
    with disk.small_fs(tmp_path) as mount:
        yield mount


@pytest.mark.parametrize("keep_free", [0, 4096, 40_000])
def test_appends_on_a_full_disk_fail_with_a_storage_error_and_resume_when_space_returns(small_fs, keep_free):
    config = LogConfig(segment_bytes=64 * 1024, segment_index_bytes=256 * 1024, index_interval_bytes=128)
    p = Partition(small_fs / "t-0", config)
    acknowledged = []
    for i in range(20):
        p.append(tagged_batch(f"a{i}", pad=200))
        acknowledged.append(f"a{i}/0")
    filler = disk.fill(small_fs, keep_free)
    failures = 0
    for i in range(400):  # some fit in what is left, then every one fails: never a crash
        try:
            p.append(tagged_batch(f"b{i}", pad=200))
            acknowledged.append(f"b{i}/0")
        except KafkaStorageError:
            failures += 1
    assert failures > 0
    assert not p.state.is_torn()
    os.unlink(filler)
    p.append(tagged_batch("after", pad=200))
    acknowledged.append("after/0")
    values = [r.value.rstrip(b".").decode() for r in stored_records(p.directory)]
    assert values == acknowledged
    p.close()
    again = Partition(small_fs / "t-0", config)
    assert [r.value.rstrip(b".").decode() for r in stored_records(again.directory)] == acknowledged
    assert again.log_end_offset == len(acknowledged)
    again.close()


def test_a_new_partition_on_a_full_disk_is_a_clean_error(small_fs):
    filler = disk.fill(small_fs)
    with pytest.raises(OSError):
        Partition(small_fs / "t-1", LogConfig(segment_index_bytes=64 * 1024))
    os.unlink(filler)

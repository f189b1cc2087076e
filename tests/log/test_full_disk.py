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
    values = stored_values(p.directory)
    assert values == acknowledged
    p.close()
    again = Partition(small_fs / "t-0", config)
    assert stored_values(again.directory) == acknowledged
    assert again.log_end_offset == len(acknowledged)
    again.close()


def stored_values(directory) -> list[str]:
    """The values of the records a partition's segments hold, as tagged_batch wrote them (padding off)."""
    return [r.value.rstrip(b".").decode() for r in stored_records(directory)]


def test_a_new_partition_on_a_full_disk_is_a_clean_error(small_fs):
    filler = disk.fill(small_fs)
    with pytest.raises(OSError):
        Partition(small_fs / "t-1", LogConfig(segment_index_bytes=64 * 1024))
    os.unlink(filler)


@pytest.mark.parametrize("interval", [0, 128])
def test_an_index_reservation_that_failed_is_tried_again_not_taken_for_done(small_fs, interval):
    # A partition made while there was space, with nothing in it yet, on a disk then filled. Its first
    # appends cannot reserve their index pages; once a batch fits (a few pages given back), the next
    # append stores an index entry. With the disk full again that store must find its page reserved or
    # fail, never land in a page without a block (SIGBUS, which kills the process).
    config = LogConfig(segment_index_bytes=256 * 1024, index_interval_bytes=interval)
    directory = small_fs / "t-2"
    Partition(directory, config).close()
    pages = disk.fill_with_pages(small_fs / "filler")

    def appends() -> None:
        p = Partition(directory, config)
        acknowledged = []
        for i in range(3):
            with pytest.raises(KafkaStorageError):
                p.append(tagged_batch(f"full{i}", pad=300))
        freed = 0
        for page in pages:  # a page back at a time until an append fits
            os.unlink(page)
            freed += 1
            try:
                p.append(tagged_batch(f"first{freed}", pad=300))
            except KafkaStorageError:
                continue
            acknowledged.append(f"first{freed}/0")
            break
        more = disk.fill_with_pages(small_fs / "filler-2")
        for i in range(3):  # each stores an index entry first (the batch at 0 has none), then needs a page
            with pytest.raises(KafkaStorageError):
                p.append(tagged_batch(f"again{i}", pad=5000))
        assert not p.state.is_torn()
        for page in pages[freed:] + more:
            os.unlink(page)
        for i in range(3):
            p.append(tagged_batch(f"after{i}", pad=300))
            acknowledged.append(f"after{i}/0")
        assert stored_values(directory) == acknowledged
        p.close()
        again = Partition(directory, config)
        assert again.log_end_offset == len(acknowledged)
        assert stored_values(directory) == acknowledged
        again.close()

    disk.in_child(appends)


def test_recovery_that_rebuilds_an_index_on_a_full_disk_is_an_error_not_a_crash(small_fs):
    # Recovery scans a log and rebuilds its indexes into their mappings; with the index files gone and
    # the disk full, their pages have no blocks: opening must fail (and succeed once there is space).
    config = LogConfig(segment_index_bytes=256 * 1024, index_interval_bytes=0)
    directory = small_fs / "t-3"
    p = Partition(directory, config)
    for i in range(300):
        p.append(tagged_batch(f"d{i}", pad=100))
    p.close(clean=False)
    for name in os.listdir(directory):
        if name.endswith((".index", ".timeindex")):
            os.unlink(directory / name)
    filler = disk.fill(small_fs)

    def reopen() -> None:
        with pytest.raises(OSError):
            Partition(directory, config)
        os.unlink(filler)
        again = Partition(directory, config)
        assert again.log_end_offset == 300
        assert again.read(150, 1).slice.read()  # through the rebuilt index
        again.close()

    disk.in_child(reopen)


def test_a_roll_on_a_full_disk_is_a_storage_error_too(small_fs):
    # A roll writes the producer state snapshot and makes the next segment's files before the append:
    # on a full disk these fail too, and the producer must get KAFKA_STORAGE_ERROR for them as for the
    # append itself (not UNKNOWN_SERVER_ERROR), with the partition left as it was.
    config = LogConfig(segment_bytes=4096, segment_index_bytes=64 * 1024, index_interval_bytes=128)
    p = Partition(small_fs / "t-4", config)
    p.append(tagged_batch("before", pad=3000))
    filler = disk.fill(small_fs)
    for i in range(3):  # 3000 bytes more do not fit the 4 KiB segment: each append must roll first
        with pytest.raises(KafkaStorageError):
            p.append(tagged_batch(f"roll{i}", pad=3000))
    os.unlink(filler)
    p.append(tagged_batch("after", pad=3000))
    assert stored_values(p.directory) == ["before/0", "after/0"]
    p.close()


def test_a_nearly_full_disk_takes_an_append_whose_pages_fit_though_a_whole_reservation_chunk_does_not(small_fs):
    # Index pages are reserved 64 KiB at a time; on a disk with less than that free, an append still
    # goes in if the pages it needs are there (one of the log, one of each index), rather than waiting
    # for sixteen pages to be free at once.
    config = LogConfig(segment_index_bytes=256 * 1024, index_interval_bytes=0)
    directory = small_fs / "t-5"
    Partition(directory, config).close()
    pages = disk.fill_with_pages(small_fs / "filler")
    for page in pages[:3]:
        os.unlink(page)

    def append() -> None:
        p = Partition(directory, config)
        p.append(tagged_batch("fits", pad=100))
        p.append(tagged_batch("fits-too", pad=100))  # the same pages: its index entries go in the reserved ones
        assert stored_values(directory) == ["fits/0", "fits-too/0"]
        os.unlink(pages[3])  # a clean close writes the producer state snapshot: one page more
        p.close()

    disk.in_child(append)


def test_recovery_on_a_full_disk_after_an_unclean_stop_opens_the_partition(small_fs):
    # The indexes it rebuilds hold the entries that were there before the stop, in pages that have
    # their blocks: recovery must reserve those and no more, or a broker stopped uncleanly on a full
    # disk could not start again until space is freed.
    config = LogConfig(segment_index_bytes=256 * 1024, index_interval_bytes=0)
    directory = small_fs / "t-6"
    p = Partition(directory, config)
    for i in range(120):  # 360 KB of log in 120 batches: an entry each, in pages the appends reserved
        p.append(tagged_batch(f"e{i}", pad=3000))
    p.close(clean=False)
    filler = disk.fill(small_fs)

    def reopen() -> None:
        again = Partition(directory, config)
        assert again.recovered and again.log_end_offset == 120
        assert again.read(90, 1).slice.read()  # through the rebuilt index
        again.close(clean=False)
        os.unlink(filler)

    disk.in_child(reopen)

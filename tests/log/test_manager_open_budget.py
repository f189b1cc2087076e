"""The owner's descriptor budget: at most max_open partitions open, the others closed and reopened on use,
housekeeping and the clean stop still covering every one; and creation all or nothing."""

from __future__ import annotations

import os
import resource
import time

import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import KafkaStorageError
from mmlog.log.manager import LogManager
from mmlog.log.partition import Partition
from mmlog.log.state import Role
from tests.log.logtools import open_descriptors, tagged_batch

DEFAULTS = LogConfig(segment_index_bytes=1024)


@pytest.fixture
def manager(tmp_path):
    m = LogManager(tmp_path, DEFAULTS, max_open=8)
    yield m
    m.close(clean=False)


def test_at_most_max_open_partitions_stay_open_and_closed_ones_reopen_with_their_records(manager):
    log_dir = manager.log_dirs[0]
    before = open_descriptors(log_dir)
    manager.create_topic("wide", 40)
    assert manager.open_count() == 8
    assert open_descriptors(log_dir) - before <= 8 + 1  # one each (the active log: mappings hold none), the locks file
    for p in range(40):
        manager.partition("wide", p).append(tagged_batch(f"r{p}"))
    assert manager.open_count() == 8
    part = manager.partition("wide", 0)  # closed long ago: reopened attached, no recovery
    assert not part.recovered and part.log_end_offset == 1 and part.high_watermark == 1


def test_gauges_read_closed_partitions_without_opening_them_and_agree_with_the_open_ones(manager):
    """The metrics scrape's view of every partition: a closed one is read from its state page and directory,
    not reopened (reopened in turn, they evicted the partitions the owner keeps open)."""
    manager.create_topic("gauged", 20, {"segment.bytes": 400})
    for p in range(20):
        for i in range(p % 4):  # 0 to 3 records, a segment each past the first
            manager.partition("gauged", p).append(tagged_batch(f"{p}-{i}" * 20))
    in_use = list(manager._partitions)
    gauges = {g.partition: g for g in manager.gauges()}
    assert list(manager._partitions) == in_use  # nothing opened, nothing evicted
    assert sorted(gauges) == list(range(20))
    for p, g in gauges.items():
        part = manager.partition("gauged", p)
        assert g.snapshot == part.snapshot() and g.replication == part.replication()
        assert (g.size_bytes, g.segments) == (part.size_bytes(), len(part.segment_bases()))
        assert g.snapshot.log_end == p % 4
    # Segments rolled while closed are listed again (their generation moved): write to every partition
    # (each reopened in turn, and closed again as the next ones open), then compare once more.
    for p in range(20):
        manager.partition("gauged", p).append(tagged_batch(f"more-{p}" * 10))
    for p, g in {g.partition: g for g in manager.gauges()}.items():
        part = manager.partition("gauged", p)
        assert (g.snapshot.log_end, g.size_bytes, g.segments) == (
            part.log_end_offset, part.size_bytes(), len(part.segment_bases()))


def test_a_reopened_partition_keeps_the_role_it_was_given(tmp_path):
    m = LogManager(tmp_path, DEFAULTS, broker_id=1, max_open=8)
    try:
        m.create_topic("spread", 10, assignment=[[1, 2]] * 10)
        m.partition("spread", 0).become_follower(2, 3, (1, 2), (1, 2), 0)
        for p in range(1, 10):
            m.partition("spread", p)  # pushes partition 0 out
        rep = m.partition("spread", 0).replication()
        assert (rep.role, rep.leader_id, rep.leader_epoch) == (Role.FOLLOWER, 2, 3)
    finally:
        m.close(clean=False)


def test_housekeeping_rolls_closed_partitions_whose_segment_is_due(tmp_path):
    m = LogManager(tmp_path, DEFAULTS, max_open=8)
    try:
        m.create_topic("aging", 20, {"segment.ms": 200})
        for p in range(20):
            m.partition("aging", p).append(tagged_batch("x"))
        assert m.roll_due() == 0  # not yet due: and the pass remembers when it can be
        time.sleep(0.3)
        assert m.roll_due() == 20
        assert all(len(m.partition("aging", p).segment_bases()) == 2 for p in range(20))
        assert m.roll_due() == 0
    finally:
        m.close(clean=False)


def test_the_clean_close_marks_closed_partitions_clean_too(tmp_path):
    m = LogManager(tmp_path, DEFAULTS, max_open=8)
    m.create_topic("many", 30)
    for p in range(30):
        m.partition("many", p).append(tagged_batch(f"{p}"))
    m.close(clean=True)
    again = LogManager(tmp_path, DEFAULTS, max_open=8)
    try:
        again.load()
        assert (again.loaded, again.recovered) == (30, 0)
        assert [again.partition("many", p).log_end_offset for p in range(30)] == [1] * 30
    finally:
        again.close(clean=False)


def test_a_creation_that_runs_out_of_descriptors_leaves_nothing_behind(tmp_path):
    m = LogManager(tmp_path, DEFAULTS)  # no budget: every partition stays open
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_descriptors() + 100, hard))
    try:
        with pytest.raises(KafkaStorageError, match="Too many open files; nothing was created"):
            m.create_topic("wide", 150)  # one descriptor each (its active log): 150 do not fit in 100
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert m.topics() == {} and m.open_count() == 0
        assert [e for e in os.listdir(tmp_path) if (tmp_path / e).is_dir()] == []
        m.create_topic("narrow", 1)
        assert m.partition("narrow", 0).append(tagged_batch("x")).base_offset == 0
    finally:
        m.close(clean=False)


def test_partition_objects_closed_by_the_budget_are_not_marked_clean(manager):
    manager.create_topic("busy", 10)
    first = Partition(manager.partition("busy", 0).directory, recover=False)  # a processor's view
    for p in range(1, 10):
        manager.partition("busy", p)
    assert first.state.snapshot().clean == 0
    first.close(clean=False)

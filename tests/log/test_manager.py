"""The log manager: topic catalogue, placement, per-topic configs, deletion, loading, attached processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from mmlog.log.catalogue import CATALOGUE
from mmlog.log.lock import EPOCH_FILE, LOCKS_FILE
from mmlog.log.manager import LogManager
from mmlog.log.offset_checkpoint import HIGH_WATERMARKS
from mmlog.log.touched import BOARD_FILE
from tests.log.logtools import tagged_batch

DEFAULTS = LogConfig(segment_index_bytes=1024)


def _partition_dirs(log_dir) -> list[str]:
    return sorted(d for d in os.listdir(log_dir) if os.path.isdir(log_dir / d))


@pytest.fixture
def managers():
    opened = []

    def _open(*args, **kw):
        kw.setdefault("defaults", DEFAULTS)
        m = LogManager(*args, **kw)
        opened.append(m)
        return m

    yield _open
    for m in opened:
        m.close(clean=False)


def test_create_topic_makes_its_partition_directories_and_catalogue_entry(tmp_path, managers):
    m = managers(tmp_path)
    info = m.create_topic("orders", 3)
    assert (info.name, info.partitions, info.config) == ("orders", 3, {})
    assert _partition_dirs(tmp_path) == ["orders-0", "orders-1", "orders-2"]
    data = json.loads((tmp_path / CATALOGUE).read_text())
    assert data["topics"]["orders"] == {"partitions": 3, "config": {}, "id": info.topic_id}
    assert m.partition("orders", 2).append(tagged_batch("x")).base_offset == 0


def test_per_topic_overrides_apply_on_top_of_the_defaults(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("small", 1, {"segment.bytes": "1000", "retention.ms": 60000})
    m.create_topic("plain", 1)
    small, plain = m.partition("small", 0).config, m.partition("plain", 0).config
    assert (small.segment_bytes, small.retention_ms, small.segment_index_bytes) == (1000, 60000, 1024)
    assert plain == DEFAULTS
    assert m.config_for("small") == small
    assert m.topic("small").config == {"segment.bytes": "1000", "retention.ms": "60000"}


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "with space", "x" * 250, "ünïcode", "a:b"])
def test_illegal_topic_names_are_refused(tmp_path, managers, name):
    m = managers(tmp_path)
    with pytest.raises(InvalidTopic):
        m.create_topic(name, 1)
    assert m.topics() == {}


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "..."])
def test_legal_topic_names_are_accepted(tmp_path, managers, name):
    managers(tmp_path).create_topic(name, 1)


def test_a_duplicate_topic_is_refused(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("t", 1)
    with pytest.raises(TopicAlreadyExists):
        m.create_topic("t", 4)
    assert m.topic("t").partitions == 1


@pytest.mark.parametrize("partitions", [0, -1])
def test_a_topic_needs_at_least_one_partition(tmp_path, managers, partitions):
    with pytest.raises(InvalidPartitions):
        managers(tmp_path).create_topic("t", partitions)


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact", "delete"])
def test_every_cleanup_policy_kafka_knows_is_accepted_and_kept(tmp_path, managers, policy):
    m = managers(tmp_path)
    m.create_topic("t", 1, {"cleanup.policy": policy, "min.cleanable.dirty.ratio": "0.2"})
    config = m.config_for("t")
    assert config.cleanup_policy == policy and config.min_cleanable_dirty_ratio == 0.2
    assert config.compact == ("compact" in policy) and config.delete == ("delete" in policy)


@pytest.mark.parametrize("config", [{"no.such.setting": "1"}, {"segment.bytes": "ten"}, {"segment.bytes": "5"},
                                    {"cleanup.policy": "shred"}, {"cleanup.policy": "compact,shred"},
                                    {"cleanup.policy": ""}, {"min.cleanable.dirty.ratio": "1.5"},
                                    {"compression.type": "brotli"}])
def test_an_invalid_topic_config_is_refused(tmp_path, managers, config):
    m = managers(tmp_path)
    with pytest.raises(InvalidConfig):
        m.create_topic("t", 1, config)
    assert m.topics() == {} and not (tmp_path / "t-0").exists()


def test_unknown_topics_and_partitions(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("t", 2)
    with pytest.raises(UnknownTopicOrPartition):
        m.partition("nope", 0)
    with pytest.raises(UnknownTopicOrPartition):
        m.partition("t", 2)
    with pytest.raises(UnknownTopicOrPartition):
        m.delete_topic("nope")


def test_delete_topic_removes_catalogue_entry_and_directories(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("gone", 2)
    m.create_topic("kept", 1)
    m.partition("gone", 0).append(tagged_batch("x"))
    m.delete_topic("gone")
    assert list(m.topics()) == ["kept"]
    assert _partition_dirs(tmp_path) == ["kept-0"]
    assert "gone" not in json.loads((tmp_path / CATALOGUE).read_text())["topics"]
    with pytest.raises(UnknownTopicOrPartition):
        m.partition("gone", 0)
    m.create_topic("gone", 1)  # the name is free again, with an empty log
    assert m.partition("gone", 0).log_end_offset == 0


def test_new_partitions_go_to_the_emptiest_data_directory(tmp_path, managers):
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    m = managers(dirs)
    m.create_topic("a", 3)
    m.create_topic("b", 1)
    counts = [sum(1 for e in os.scandir(d) if e.is_dir()) for d in dirs]
    assert counts == [2, 2]
    assert (dirs[0] / CATALOGUE).exists() and not (dirs[1] / CATALOGUE).exists()


def test_load_reopens_every_partition_after_a_restart(tmp_path, managers):
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    m = managers(dirs)
    m.create_topic("a", 2, {"segment.bytes": "2000"})
    for p in range(2):
        for i in range(5):
            m.partition("a", p).append(tagged_batch(f"{p}/{i}"))
    m.close()
    again = managers(dirs)
    assert again.load() == []
    assert [again.partition("a", p).log_end_offset for p in range(2)] == [5, 5]
    assert again.partition("a", 0).config.segment_bytes == 2000


def test_load_returns_recovery_notes_after_an_unclean_stop(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("a", 1)
    m.partition("a", 0).append(tagged_batch("x"))
    m.close(clean=False)
    with open(tmp_path / "a-0" / "00000000000000000000.log", "ab") as f:
        f.write(b"garbage")
    notes = managers(tmp_path).load()
    assert len(notes) == 1 and "truncated 7 bytes" in notes[0]


def test_load_removes_directories_of_topics_no_longer_in_the_catalogue(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("keep", 1)
    m.close()
    (tmp_path / "dropped-0").mkdir()  # a deletion cut short after the catalogue was saved
    (tmp_path / "keep-0.0123abcd-delete").mkdir()  # a deletion cut short after the rename
    (tmp_path / "not a partition").mkdir()
    managers(tmp_path).load()
    assert sorted(os.listdir(tmp_path)) == sorted([CATALOGUE, HIGH_WATERMARKS, LOCKS_FILE, EPOCH_FILE, BOARD_FILE, "keep-0", "not a partition"])


def test_alter_topic_config_applies_to_open_partitions_and_survives_a_restart(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("t", 1)
    m.partition("t", 0)
    m.alter_topic_config("t", {"retention.ms": "1000"})
    assert m.partition("t", 0).config.retention_ms == 1000
    with pytest.raises(InvalidConfig):
        m.alter_topic_config("t", {"retention.ms": "-5"})
    m.close()
    assert managers(tmp_path).config_for("t").retention_ms == 1000


def test_dynamic_broker_configs_make_the_topic_defaults_of_open_partitions_and_survive_a_restart(tmp_path, managers):
    m = managers(tmp_path, broker_id=0)
    m.create_topic("plain", 1)
    m.create_topic("own", 1, {"retention.ms": "5000"})
    plain, own = m.partition("plain", 0), m.partition("own", 0)
    m.set_broker_level("<default>", {"log.segment.bytes": "65536", "log.retention.hours": "2"})
    m.set_broker_level("0", {"log.segment.bytes": "131072"})  # this broker's level wins over the default
    assert (plain.config.segment_bytes, plain.config.retention_ms) == (131072, 7_200_000)
    assert (own.config.segment_bytes, own.config.retention_ms) == (131072, 5000)  # the topic's override wins
    attached = managers(tmp_path, owner=False, broker_id=0)
    assert attached.partition("plain", 0).config.segment_bytes == 131072
    m.set_broker_level("0", {})
    attached.reload()
    assert attached.partition("plain", 0).config.segment_bytes == 65536
    m.close()
    assert managers(tmp_path, broker_id=0).config_for("plain").retention_ms == 7_200_000


def test_a_reopened_partition_gets_the_config_as_altered_while_it_was_closed(tmp_path, managers):
    """The parsed config is kept per topic (a processor asks for it at every reopen) and follows
    a topic alter and a change of the broker defaults."""
    owner = managers(tmp_path, broker_id=0)
    owner.create_topic("t", 3)
    attached = managers(tmp_path, owner=False, broker_id=0, max_open=2)
    assert attached.config_for("t") is attached.config_for("t")
    for p in range(3):
        attached.partition("t", p)  # partition 0 is closed now
    owner.alter_topic_config("t", {"retention.ms": "1000"})
    attached.reload()
    assert attached.partition("t", 0).config.retention_ms == 1000  # reopened; partition 1 closed
    owner.set_broker_level("<default>", {"log.segment.bytes": "65536"})
    attached.reload()
    reopened = attached.partition("t", 1).config
    assert (reopened.segment_bytes, reopened.retention_ms) == (65536, 1000)


# ---------------------------------------------------------------- attached managers


def test_an_attached_manager_sees_topics_the_owner_creates_later(tmp_path, managers):
    owner = managers(tmp_path)
    attached = managers(tmp_path, owner=False)
    with pytest.raises(UnknownTopicOrPartition):
        attached.partition("late", 0)
    owner.create_topic("late", 2, {"segment.bytes": "5000"})
    part = attached.partition("late", 1)
    assert part.config.segment_bytes == 5000
    part.append(tagged_batch("from attached"))
    assert owner.partition("late", 1).log_end_offset == 1
    assert set(attached.topics()) == {"late"}


def test_an_attached_manager_refuses_topic_admin(tmp_path, managers):
    managers(tmp_path)
    attached = managers(tmp_path, owner=False)
    with pytest.raises(RuntimeError):
        attached.create_topic("t", 1)
    with pytest.raises(RuntimeError):
        attached.delete_topic("t")
    with pytest.raises(RuntimeError):
        attached.load()


def test_an_attached_manager_drops_a_topic_the_owner_deleted(tmp_path, managers):
    owner = managers(tmp_path)
    attached = managers(tmp_path, owner=False)
    owner.create_topic("t", 1)
    part = attached.partition("t", 0)
    part.append(tagged_batch("x"))
    owner.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartition):
        part.read(0, 100)
    attached.reload()
    with pytest.raises(UnknownTopicOrPartition):
        attached.partition("t", 0)


def _attached_process(log_dir, conn):
    """In another process: attach, wait for the owner's topic, append to it and report the offset."""
    m = LogManager(log_dir, DEFAULTS, owner=False)
    conn.send("ready")
    conn.recv()
    conn.send(m.partition("events", 0).append(tagged_batch("child")).base_offset)
    m.close()


def test_an_attached_manager_in_another_process(tmp_path, managers):
    owner = managers(tmp_path)
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_attached_process, args=(tmp_path, theirs))
    child.start()
    try:
        assert ours.poll(20) and ours.recv() == "ready"
        owner.create_topic("events", 1)
        owner.partition("events", 0).append(tagged_batch("parent"))
        ours.send("go")
        assert ours.poll(20) and ours.recv() == 1
    finally:
        child.join(20)
    assert child.exitcode == 0
    assert owner.partition("events", 0).log_end_offset == 2


def test_housekeeping_runs_over_every_open_partition(tmp_path, managers):
    m = managers(tmp_path)
    m.create_topic("t", 2, {"retention.ms": "1", "segment.ms": "1", "flush.ms": "0"})
    for p in range(2):
        part = m.partition("t", p)
        part.append(tagged_batch("old"))
    time.sleep(0.01)
    assert m.flush_due() == 2
    assert m.roll_due() == 2
    assert m.apply_retention() == 2
    assert [m.partition("t", p).log_start_offset for p in range(2)] == [1, 1]


def test_an_attached_manager_follows_a_topic_deleted_and_created_again(tmp_path, managers):
    owner = managers(tmp_path)
    attached = managers(tmp_path, owner=False)
    owner.create_topic("t", 1)
    attached.partition("t", 0).append(tagged_batch("first life"))
    owner.delete_topic("t")
    owner.create_topic("t", 1)
    owner.partition("t", 0).append(tagged_batch("second life"))
    attached.reload()  # what a processor does when a client refreshes its metadata
    assert attached.partition("t", 0).log_end_offset == 1
    assert attached.partition("t", 0).append(tagged_batch("again")).base_offset == 1


def test_the_catalogue_file_and_the_replica_counts_follow_every_change(tmp_path, managers):
    """Both are kept incrementally (per-topic JSON, counts updated by creations): after creations,
    growth, a config change and a deletion they equal what a recount from scratch gives."""
    m = managers(tmp_path, broker_id=1)
    m.create_topic("alone", 2)
    m.create_topic("spread", 2, assignment=[[1, 2], [2, 3]])
    m.add_partitions("spread", 3, [[1, 2], [2, 3], [3, 1]])
    m.alter_topic_config("alone", {"retention.ms": "1000"})
    m.create_topic("gone", 1)
    m.delete_topic("gone")
    m.create_topic("late", 1, assignment=[[1]])
    on_disk = json.loads((tmp_path / CATALOGUE).read_text())
    assert on_disk == {"version": 1, "topics": {n: t.to_json() for n, t in sorted(m.topics().items())}}
    assert on_disk["topics"]["alone"]["config"] == {"retention.ms": "1000"}
    assert len(on_disk["topics"]["spread"]["assignment"]) == 3
    assert m.replica_counts() == {None: 2, 1: 3, 2: 2, 3: 2}
    assert m.has_topic("late") and not m.has_topic("gone")

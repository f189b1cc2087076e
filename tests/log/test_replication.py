"""A partition log as leader and follower: the HW, epochs, byte-for-byte copies and truncation.

Two or three Partition directories stand for the replicas of one partition on
different brokers; the tests move batches between them the way the replica
fetcher does (read from the leader up to its log end, `append_replica` on the
follower) and check Kafka's rules.
"""

from __future__ import annotations

import os

import pytest

from mmlog.errors import FencedLeaderEpoch, NotLeaderOrFollower, OffsetOutOfRange
from mmlog.log.manager import LogManager
from mmlog.log.offset_checkpoint import HIGH_WATERMARKS
from mmlog.log.offset_checkpoint import read as read_checkpoint
from mmlog.log.state import STATE_FILE, Role
from mmlog.protocol import records as rec
from tests.log.logtools import stored_batches, tagged_batch, truncate_by_epoch

REPLICAS = (1, 2, 3)


@pytest.fixture
def replicas(tmp_path, open_partition):
    """Partitions of brokers 1, 2 and 3 for one topic-partition, by broker id."""
    return {b: open_partition(tmp_path / f"broker-{b}" / "t-0", broker_id=b) for b in REPLICAS}


def copy(leader, follower) -> None:
    """What the replica fetcher does for one fetch: read from the follower's LEO up to the leader's, append."""
    offset = follower.log_end_offset
    leader.record_follower_fetch(follower.broker_id, offset)
    leader.maybe_advance_high_watermark()
    while offset < leader.log_end_offset:
        got = leader.read(offset, 1 << 20, upto_log_end=True)
        data = bytearray(os.pread(got.slice.file.fileno(), got.slice.size, got.slice.position))
        headers, end = rec.validate_whole_batches(data, dense=False)  # as the fetcher checks them
        assert end == len(data)
        follower.append_replica(data, got.high_watermark, headers=headers)
        offset = follower.log_end_offset
    follower.set_follower_high_watermark(leader.high_watermark)


def fetch(leader, follower) -> None:
    """One follower fetch at its log end, with nothing new: reports the follower's LEO to the leader."""
    leader.record_follower_fetch(follower.broker_id, follower.log_end_offset)
    leader.maybe_advance_high_watermark()
    follower.set_follower_high_watermark(leader.high_watermark)


def log_of(p) -> bytes:
    """Every stored batch's bytes, in order: what must match across replicas."""
    return b"".join(b.data for b in stored_batches(p.directory))


def lead(replicas, leader_id: int, epoch: int, isr=REPLICAS):
    for b, p in replicas.items():
        if b == leader_id:
            p.become_leader(epoch, REPLICAS, isr, epoch)
        else:
            p.become_follower(leader_id, epoch, REPLICAS, isr, epoch)
    return replicas[leader_id]


def test_a_leader_with_followers_in_its_isr_keeps_the_hw_until_they_have_fetched(replicas):
    leader = lead(replicas, 1, 0)
    leader.append(tagged_batch("a", 3))
    assert (leader.log_end_offset, leader.high_watermark) == (3, 0)
    copy(leader, replicas[2])
    assert leader.high_watermark == 0  # broker 3 has nothing yet
    copy(leader, replicas[3])
    fetch(leader, replicas[2])  # the next fetches report what each holds
    assert leader.high_watermark == 0
    fetch(leader, replicas[3])
    assert leader.high_watermark == 3
    assert [p.high_watermark for p in (replicas[2], replicas[3])] == [0, 3]  # learnt at their next fetch
    fetch(leader, replicas[2])
    assert replicas[2].high_watermark == 3


def test_a_follower_fetch_in_one_look_records_what_the_three_steps_record(replicas, tmp_path, open_partition):
    """follower_fetched (what the leader's Fetch handler calls) = record_follower_fetch, then
    maybe_advance_high_watermark, then record_follower_log_start, on a twin leader."""
    leader, twin = replicas[1], open_partition(tmp_path / "twin" / "t-0", broker_id=1)
    for p in (leader, twin):
        p.become_leader(0, REPLICAS, (1, 2), 0, now=1)
        p.append(tagged_batch("a", 3))
        p.append(tagged_batch("b", 2))
    steps = [(3, 1, 0, 10), (2, 2, 0, 11), (2, 5, 2, 12), (3, 4, 1, 13), (2, 5, 2, 14), (3, 5, 3, 15)]
    for replica, offset, log_start, now in steps:  # broker 3 is out of the ISR: it never moves the HW
        moved = leader.follower_fetched(replica, offset, log_start, now=now)
        hw_before = twin.high_watermark
        if twin.record_follower_fetch(replica, offset, now=now):
            twin.maybe_advance_high_watermark()
        started = twin.record_follower_log_start(replica, log_start)
        assert moved == (twin.high_watermark != hw_before or started)
        assert leader.high_watermark == twin.high_watermark
        assert leader.followers() == twin.followers()
        assert leader.low_watermark({2, 3}) == twin.low_watermark({2, 3})
    assert leader.high_watermark == 5
    with pytest.raises(NotLeaderOrFollower):
        leader.follower_fetched(9, 0, 0)


def test_consumers_read_up_to_the_hw_and_followers_up_to_the_log_end(replicas):
    leader = lead(replicas, 1, 0)
    for tag in "abc":
        leader.append(tagged_batch(tag, 2))
    for f in (2, 3):
        leader.record_follower_fetch(f, 2)
    leader.maybe_advance_high_watermark()
    assert leader.high_watermark == 2
    consumer = leader.read(0, 1 << 20)
    assert consumer.slice.size == len(tagged_batch("a", 2))  # the bytes stop at the HW's batch
    assert leader.read(0, 1 << 20, upto_log_end=True).slice.size == 3 * len(tagged_batch("a", 2))
    assert leader.read(4, 100).slice.size == 0  # past the HW, within the log: nothing yet, as Kafka answers
    with pytest.raises(OffsetOutOfRange):
        leader.read(7, 100)


def test_an_isr_of_the_leader_alone_moves_the_hw_with_every_append(replicas):
    leader = lead(replicas, 1, 0, isr=(1,))
    leader.append(tagged_batch("a", 2))
    assert leader.high_watermark == 2
    leader.set_isr((1, 2), 1)
    leader.append(tagged_batch("b", 2))
    assert leader.high_watermark == 2
    leader.set_isr((1,), 2)  # the ISR shrinks to the leader: what it holds is committed
    assert leader.high_watermark == 4


def test_only_isr_members_hold_the_hw_back(replicas):
    leader = lead(replicas, 1, 0, isr=(1, 2))
    leader.append(tagged_batch("a", 2))
    copy(leader, replicas[2])
    fetch(leader, replicas[2])
    assert leader.high_watermark == 2  # broker 3 is out of the ISR


def test_the_leader_stamps_its_epoch_and_followers_copy_every_byte(replicas):
    leader = lead(replicas, 1, 7)
    for i in range(40):  # small segments: both sides roll several times
        leader.append(tagged_batch(f"m{i}", 2, pad=100))
    for f in (2, 3):
        copy(leader, replicas[f])
    assert {b.header.partition_leader_epoch for b in stored_batches(leader.directory)} == {7}
    assert log_of(replicas[2]) == log_of(replicas[3]) == log_of(leader)
    assert len(replicas[2].segment_bases()) > 1
    assert replicas[2].epochs.entries() == leader.epochs.entries() == [(7, 0)]


def test_a_fetch_answered_twice_is_skipped_and_a_gap_is_refused(replicas):
    leader = lead(replicas, 1, 0)
    leader.append(tagged_batch("a"))
    leader.append(tagged_batch("b"))
    follower = replicas[2]
    whole = leader.read(0, 1 << 20, upto_log_end=True).slice
    data = bytearray(os.pread(whole.file.fileno(), whole.size, whole.position))
    assert follower.append_replica(bytearray(data), 0).last_offset == 1
    assert follower.append_replica(bytearray(data), 0) is None
    assert log_of(follower) == log_of(leader)
    later = bytearray(tagged_batch("z"))
    rec.set_base_offset(later, 5)
    with pytest.raises(OffsetOutOfRange):
        follower.append_replica(later, 0)


def test_the_caught_up_rule_is_kafkas(replicas):
    leader = lead(replicas, 1, 0)
    leader.become_leader(1, REPLICAS, REPLICAS, 1, now=0)  # a new epoch: nobody caught up since 0
    leader.append(tagged_batch("a", 4))

    def caught_up_after(offset, now):
        leader.record_follower_fetch(2, offset, now=now)
        return dict(leader.followers())[2].last_caught_up_ms

    assert caught_up_after(2, 1000) == 0  # behind our log end (4)
    assert caught_up_after(4, 2000) == 2000  # asks for our log end: caught up now
    leader.append(tagged_batch("b", 4))
    assert caught_up_after(6, 3000) == 3000 - 1000  # behind our end (8), but past our end at its last fetch
    # (4): it held all we had at 2000, when it last fetched
    assert caught_up_after(6, 4000) == 2000  # not past our end at its last fetch (8): unchanged
    assert caught_up_after(8, 5000) == 5000
    with pytest.raises(NotLeaderOrFollower):
        leader.record_follower_fetch(9, 0)


def test_a_deposed_leader_truncates_what_its_followers_never_copied(replicas):
    a, b, c = replicas[1], replicas[2], replicas[3]
    lead(replicas, 1, 1)
    for tag in "abc":
        a.append(tagged_batch(tag, 2))
    copy(a, b)
    copy(a, c)
    fetch(a, b)
    fetch(a, c)
    a.append(tagged_batch("lost-1", 2))  # acknowledged by nobody: the followers never fetch these
    a.append(tagged_batch("lost-2", 2))
    committed = a.high_watermark
    assert committed == 6 and a.log_end_offset == 10
    # Broker 1 dies; broker 2 leads epoch 2 and appends other records at the same offsets.
    b.become_leader(2, REPLICAS, (2, 3), 2)
    c.become_follower(2, 2, REPLICAS, (2, 3), 2)
    b.append(tagged_batch("new-1", 3))
    copy(b, c)
    a.become_follower(2, 2, REPLICAS, (2, 3), 3)
    truncate_by_epoch(a, b)
    assert a.log_end_offset == committed
    copy(b, a)
    assert log_of(a) == log_of(b) == log_of(c)
    assert a.epochs.entries() == b.epochs.entries() == [(1, 0), (2, 6)]


def test_an_answer_from_an_epoch_we_no_longer_follow_in_cuts_nothing(replicas):
    """The fetcher asks the leader of epoch 1 where our epoch ends; before the answer is applied, the main
    process makes us leader of epoch 2 and we append. The answer speaks of another log: acting on it would cut
    what we appended as leader (and acknowledged, once the ISR had it) and drop our epoch's start."""
    a, b = replicas[1], replicas[2]
    lead(replicas, 1, 1, isr=(1, 2))
    a.append(tagged_batch("a", 2))
    copy(a, b)
    fetch(a, b)  # b's HW is 2: a log start the leader moved to 5 would move b's to 2
    ahead = tagged_batch("b", 3)  # records of epoch 1 that a does not hold (diverged)
    rec.set_base_offset(ahead, 2)
    rec.set_leader_epoch(ahead, 1)
    b.append_replica(ahead, following=1)
    asked = b.latest_epoch()
    answer = a.end_offset_for_epoch(asked)  # (1, 2): cut b to 2
    b.become_leader(2, REPLICAS, (2, 3), 2)  # meanwhile
    b.append(tagged_batch("b-leads", 1))
    before = (log_of(b), b.epochs.entries(), b.replication())
    with pytest.raises(FencedLeaderEpoch):
        b.truncate_to_leader_epoch(asked, *answer, following=1)
    with pytest.raises(FencedLeaderEpoch):
        b.truncate_fully_and_start_at(100, following=1)
    with pytest.raises(FencedLeaderEpoch):
        b.follow_log_start(5, following=1)
    assert (log_of(b), b.epochs.entries(), b.replication()) == before
    assert b.log_end_offset == 6 and b.epochs.entries()[-1] == (2, 5)


def test_a_leader_deposed_before_appending_in_its_epoch_drops_that_empty_epoch(replicas):
    a, b, c = replicas[1], replicas[2], replicas[3]
    lead(replicas, 1, 1)
    a.append(tagged_batch("a", 2))
    copy(a, b)
    copy(a, c)
    b.become_leader(2, REPLICAS, REPLICAS, 2)  # broker 2 leads epoch 2, appends nothing, and is deposed
    c.become_leader(3, REPLICAS, REPLICAS, 3)
    b.become_follower(3, 3, REPLICAS, REPLICAS, 3)
    rounds = 0
    while not b.truncate_to_leader_epoch(b.latest_epoch(), *c.end_offset_for_epoch(b.latest_epoch())):
        rounds += 1
        assert rounds < 3, "the empty epoch 2 is asked about forever"
    assert b.log_end_offset == 2 and b.latest_epoch() == 1
    c.append(tagged_batch("c", 1))
    copy(c, b)
    assert log_of(b) == log_of(c)


def test_a_follower_behind_the_leaders_log_start_starts_again_there(replicas):
    follower = replicas[2]
    follower.become_follower(1, 0, REPLICAS, REPLICAS, 0)
    follower.truncate_fully_and_start_at(500)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (500, 500, 500)
    batch = tagged_batch("x", 2)
    rec.set_base_offset(batch, 500)
    follower.append_replica(batch, 502)
    assert (follower.log_end_offset, follower.high_watermark) == (502, 502)


def test_an_unclean_restart_never_shows_more_than_the_hw(replicas, open_partition):
    leader = lead(replicas, 1, 0)
    leader.append(tagged_batch("a", 2))
    for f in (2, 3):
        copy(leader, replicas[f])
        fetch(leader, replicas[f])
    leader.append(tagged_batch("b", 2))
    assert (leader.high_watermark, leader.log_end_offset) == (2, 4)
    directory = leader.directory
    leader.close(clean=False)  # as if killed
    again = open_partition(directory, broker_id=1)
    assert again.recovered and (again.high_watermark, again.log_end_offset) == (2, 4)
    assert again.replication().role == Role.LEADER


def test_a_lost_state_page_starts_from_the_checkpointed_hw(tmp_path, config):
    manager = LogManager(tmp_path, config, broker_id=1)
    manager.create_topic("t", 1, assignment=[1])  # a cluster topic: roles come from the controller
    part = manager.partition("t", 0)
    part.become_leader(0, (1, 2), (1, 2), 0)
    part.append(tagged_batch("a", 3))
    part.record_follower_fetch(2, 3)
    part.maybe_advance_high_watermark()
    part.append(tagged_batch("b", 3))
    manager.close(clean=True)
    assert read_checkpoint(tmp_path / HIGH_WATERMARKS) == {("t", 0): 3}
    os.unlink(tmp_path / "t-0" / STATE_FILE)
    manager = LogManager(tmp_path, config, broker_id=1)
    manager.load()
    part = manager.partition("t", 0)
    assert (part.high_watermark, part.log_end_offset) == (3, 6)
    manager.close(clean=False)


def test_standalone_partitions_lead_alone_in_epoch_zero(tmp_path, config):
    manager = LogManager(tmp_path, config, broker_id=0)
    manager.create_topic("t", 2)
    part = manager.partition("t", 1)
    rep = part.replication()
    assert (rep.role, rep.leader_id, rep.leader_epoch, rep.replicas, rep.isr) == (Role.LEADER, 0, 0, (0,), (0,))
    part.append(tagged_batch("a", 2))
    assert part.high_watermark == 2
    manager.close(clean=True)

"""A follower's Fetch at the leader, through the handler's `read` on a log manager (no sockets): its
fetch offset moves the HW once the whole ISR has fetched past it, and a parked follower fetch that
the purgatory wakes reads again only when something it waits for changed (`_follower_waits`)."""

import pytest

from mmlog.log.manager import LogManager
from mmlog.processors.handlers import fetch as handler
from mmlog.protocol import RequestHeader, decode_request, encode_request
from mmlog.protocol.messages import fetch
from mmlog.protocol.records import build_batch
from mmlog.testing import LocalHandlerContext

REPLICAS = (0, 1, 2)


@pytest.fixture
def leader(tmp_path):
    """(context, partition t-0) led here (broker 0) in epoch 4, brokers 1 and 2 in the ISR, 3 records."""
    manager = LogManager(tmp_path, broker_id=0)
    manager.create_topic("t", 1, assignment=[0])
    part = manager.partition("t", 0)
    part.become_leader(4, REPLICAS, REPLICAS, 1)
    part.append(build_batch([(None, b"a")] * 3))
    return LocalHandlerContext(manager), part


def body(replica: int, offset: int, epoch: int = 4, partition: int = 0):
    """A follower's Fetch body as the broker decodes it."""
    request = fetch.REQUEST(replica_id=replica, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                            topics=[{"topic": "t", "partitions": [{
                                "partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
                                "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}])
    frame = encode_request(RequestHeader(fetch.API_KEY, 11, 1, "replica"), request)
    return decode_request(memoryview(frame)[4:])[1]


def test_the_hw_moves_when_every_isr_follower_has_fetched_past_it_and_the_appends_are_woken(leader):
    ctx, part = leader
    for follower in (1, 2):  # their first fetches: their log starts become known (DeleteRecords waits on them)
        _, available, failed = handler.read(ctx, body(follower, 0), record=True)
        assert available > 0 and (failed, part.high_watermark, ctx.appends) == (False, 0, follower)
    _, available, failed = handler.read(ctx, body(1, 3), record=True)
    assert (available, failed, part.high_watermark, ctx.appends) == (0, False, 0, 2)
    handler.read(ctx, body(2, 3), record=True)
    assert part.high_watermark == 3 and ctx.appends == 3  # parked acks=all produces check again


def test_a_woken_follower_fetch_waits_until_its_partition_grows(leader):
    ctx, part = leader
    assert handler._follower_waits(ctx, body(1, 3))
    part.append(build_batch([(None, b"b")]))
    assert not handler._follower_waits(ctx, body(1, 3))
    assert handler._follower_waits(ctx, body(1, 4))


def test_a_woken_follower_fetch_reads_again_on_a_new_epoch_a_lost_leadership_or_an_unknown_partition(leader):
    ctx, part = leader
    assert not handler._follower_waits(ctx, body(1, 3, epoch=3))  # fenced: read() answers the error
    part.become_leader(5, REPLICAS, REPLICAS, 2)
    assert not handler._follower_waits(ctx, body(1, 3, epoch=4))
    assert handler._follower_waits(ctx, body(1, 3, epoch=5))
    assert handler._follower_waits(ctx, body(1, 3, epoch=-1))  # -1: no epoch check, as read() does
    part.become_follower(1, 6, REPLICAS, REPLICAS, 3)
    assert not handler._follower_waits(ctx, body(1, 3, epoch=-1))
    assert not handler._follower_waits(ctx, body(1, 3, partition=7))

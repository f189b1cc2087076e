"""A follower's fetcher against a real leader broker: what it does when the main process changes the
partition's role while a question to the leader is on the wire."""

from __future__ import annotations

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.config.broker import BrokerConfig
from mmlog.config.settings import LogConfig
from mmlog.log.manager import LogManager
from mmlog.log.state import Role
from mmlog.replication.source import SourceFetcher
from mmlog.testing import EmbeddedBroker
from tests.log.logtools import tagged_batch

ME, LEADER = 7, 0  # the follower's broker id; the standalone leader's
KEY = ("t", 0)


class ElectedWhileAsking(SourceFetcher):
    """A fetcher whose main process makes the partition leader of epoch 1, and appends to it, while the
    fetcher's OffsetsForLeaderEpoch question is on the wire (as after a reassignment's completion)."""

    def __init__(self, part, *args) -> None:
        super().__init__(*args)
        self.part = part

    def _end_offsets(self, asked: dict, wanted: dict) -> dict:
        answers = super()._end_offsets(asked, wanted)
        self.part.become_leader(1, (ME, LEADER), (ME, LEADER), 1)
        self.part.append(tagged_batch("appended-as-leader", 1))
        return answers


def test_a_truncation_answered_after_we_became_leader_cuts_nothing(tmp_path):
    with EmbeddedBroker(tmp_path / "leader", processors=1) as leader:
        with Admin(leader.bootstrap) as admin:
            admin.create_topic("t", 1)
        with Producer(leader.bootstrap) as producer:
            for i in range(2):
                producer.send("t", b"leader-%d" % i, partition=0).get(10)
        follower = LogManager(tmp_path / "follower", LogConfig(), broker_id=ME)
        try:
            follower.create_topic("t", 1)
            part = follower.partition(*KEY)
            part.append(tagged_batch("ours", 5))  # epoch 0 records the leader does not hold: "epoch 0 ends at 2"
            part.become_follower(LEADER, 0, (ME, LEADER), (ME, LEADER), 0)
            config = BrokerConfig.load(overrides={"broker.id": ME})
            fetcher = ElectedWhileAsking(part, ME, LEADER, follower, config)
            host, port = leader.bootstrap.rsplit(":", 1)
            fetcher.update((host, int(port)), {KEY: 0})
            try:
                fetcher._round()
            finally:
                fetcher._close()
            assert part.replication().role == Role.LEADER
            assert part.log_end_offset == 6  # nothing we appended, as follower or as leader, was cut
            assert part.epochs.entries()[-1] == (1, 5)  # and our epoch still starts where we began it
            assert KEY not in fetcher._ready  # no fetch in an epoch we do not follow in
        finally:
            follower.close(clean=False)

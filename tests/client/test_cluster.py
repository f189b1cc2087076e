"""The client's cluster view: leaders are looked up, never created."""

import pytest

from mmlog import Admin
from mmlog.client.cluster import Cluster
from mmlog.errors import UnknownTopicOrPartition


def test_looking_up_a_leader_does_not_create_the_topic(mmlog_broker):
    cluster = Cluster(mmlog_broker.bootstrap, timeout=5)
    with pytest.raises(UnknownTopicOrPartition):
        cluster.leader("never-made", 0)
    with Admin(mmlog_broker.bootstrap) as admin:
        assert "never-made" not in admin.list_topics()
        admin.create_topic("made", 2)
    assert cluster.leader("made", 1).port == mmlog_broker.port

"""mmlog.Admin against a real broker: topics and offsets."""

import pytest

from mmlog.client.admin import Admin
from mmlog.client.connection import ConnectionClosed
from mmlog.errors import InvalidConfig, InvalidPartitions, InvalidTopic, TopicAlreadyExists, UnknownTopicOrPartition
from mmlog.protocol.records import Record, build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect
from tests.processors.test_bad_input import produce_one


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        yield b


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def test_create_list_describe_delete(admin):
    admin.create_topic("adm", 3, {"retention.ms": "60000", "segment.bytes": "1048576"})
    assert admin.list_topics()["adm"] == 3
    described = admin.describe_topic("adm")
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert all(p.leader == 0 and p.earliest == 0 and p.latest == 0 for p in described.partitions)
    assert described.config["retention.ms"] == "60000" and described.overrides == {"retention.ms", "segment.bytes"}
    assert described.config["cleanup.policy"] == "delete"
    admin.delete_topic("adm")
    assert "adm" not in admin.list_topics()


@pytest.mark.parametrize("name, partitions, config, error", [
    ("dup", 1, {}, TopicAlreadyExists),
    ("bad name", 1, {}, InvalidTopic),
    ("zero", 0, {}, InvalidPartitions),
    ("badcfg", 1, {"retention.ms": "soon"}, InvalidConfig),
    ("unknowncfg", 1, {"no.such": "1"}, InvalidConfig),
])
def test_bad_creates_raise_the_kafka_error(admin, name, partitions, config, error):
    if error is TopicAlreadyExists:
        admin.create_topic(name)
    with pytest.raises(error):
        admin.create_topic(name, partitions, config)


def test_deleting_an_unknown_topic_is_unknown_topic_or_partition(admin):
    with pytest.raises(UnknownTopicOrPartition):
        admin.delete_topic("never-there")


def test_earliest_latest_and_by_time_offsets(broker, admin):
    admin.create_topic("offs", 2)
    with connect(broker) as conn:
        base = 1_700_000_000_000
        produce_one(conn, "offs", 0, build_batch([Record(b"a", timestamp=base), Record(b"b", timestamp=base + 10)]))
        produce_one(conn, "offs", 1, build_batch([Record(b"c", timestamp=base + 20)]))
    assert admin.earliest_offsets("offs") == {0: 0, 1: 0}
    assert admin.latest_offsets("offs") == {0: 2, 1: 1}
    assert admin.offsets_for_time("offs", base + 5) == {0: 1, 1: 0}
    assert admin.offsets_for_time("offs", base + 100) == {0: -1, 1: -1}


def test_an_unreachable_broker_fails_fast_with_a_clear_error():
    with pytest.raises(ConnectionClosed, match="no broker reachable at 127.0.0.1:1"):
        Admin("127.0.0.1:1", timeout=1.0).list_topics()
def test_the_throttled_replicas_the_admin_writes_are_what_the_broker_reads():
    """The admin client keeps its own copy of the throttled-replicas format (it does not import the broker's
    config package): the names must be the broker's, and each broker must find its own pairs in the value."""
    from mmlog.client import admin_replicas
    from mmlog.config import throttled_replicas

    assert admin_replicas.LEADER_THROTTLED == throttled_replicas.LEADER
    assert admin_replicas.FOLLOWER_THROTTLED == throttled_replicas.FOLLOWER
    value = admin_replicas.throttled_pairs({0: [101, 102], 3: [102], 5: []})
    assert value == "0:101,0:102,3:102" and throttled_replicas.valid(value)
    assert throttled_replicas.partitions(value, 101) == {0}
    assert throttled_replicas.partitions(value, 102) == {0, 3}
    assert throttled_replicas.valid(admin_replicas.throttled_pairs({}))

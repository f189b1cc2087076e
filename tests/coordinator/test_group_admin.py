"""DeleteGroups and OffsetDelete at the group coordinator: Kafka's AdminClients and mmlog's Admin delete
empty groups and offsets; live groups get NON_EMPTY_GROUP and GROUP_SUBSCRIBED_TO_TOPIC, unknown ones
GROUP_ID_NOT_FOUND, and nothing changes for a refused request."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from mmlog.client import Consumer
from mmlog.client.admin import Admin
from mmlog.client.records import TopicPartition
from mmlog.errors import GroupIdNotFound, GroupSubscribedToTopic, NonEmptyGroup
from mmlog.protocol.messages import delete_groups, offset_delete
from tests.coordinator.conftest import connect, create_topic


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def commit(admin, group, offsets):
    admin.alter_group_offsets(group, {TopicPartition(t, p): o for (t, p), o in offsets.items()})


def committed(admin, group):
    return {(tp.topic, tp.partition): o.committed for tp, o in admin.group_offsets(group).items()
            if o.committed is not None}


def live_consumer(broker, group, topics):
    consumer = Consumer(broker.bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=3000,
                        heartbeat_interval_ms=100)
    consumer.subscribe(topics)
    deadline = time.monotonic() + 15
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.1)
    return consumer


def test_confluent_kafka_deletes_an_empty_group_with_its_offsets(broker, admin):
    create_topic(broker, "ga-t1", 2)
    commit(admin, "ga-empty", {("ga-t1", 0): 3, ("ga-t1", 1): 4})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.delete_consumer_groups(["ga-empty"])["ga-empty"].result(10)
    assert "ga-empty" not in admin.list_groups()
    assert committed(admin, "ga-empty") == {}
    with pytest.raises(KafkaException) as raised:
        client.delete_consumer_groups(["ga-empty"])["ga-empty"].result(10)
    assert raised.value.args[0].name() == "GROUP_ID_NOT_FOUND"


def test_a_group_with_members_is_not_deleted(broker, admin):
    create_topic(broker, "ga-t2")
    with live_consumer(broker, "ga-live", ["ga-t2"]):
        with connect(broker) as conn:
            body = conn.request(delete_groups.API_KEY, 1, delete_groups.REQUEST(groups_names=["ga-live", "ga-none", ""]))
        assert [(r.group_id, r.error_code) for r in body.results] == [
            ("ga-live", NonEmptyGroup.code), ("ga-none", GroupIdNotFound.code), ("", 24)]
        with pytest.raises(NonEmptyGroup):
            admin.delete_groups(["ga-live"])
        assert admin.describe_group("ga-live").state == "Stable"


def test_kafka_python_deletes_groups_and_group_offsets(broker, admin):
    create_topic(broker, "ga-t3", 2)
    commit(admin, "ga-kp", {("ga-t3", 0): 1, ("ga-t3", 1): 2})
    commit(admin, "ga-kp-gone", {("ga-t3", 0): 5})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.delete_group_offsets("ga-kp", [KpTopicPartition("ga-t3", 0)])
        assert {tp.partition: err.errno for tp, err in result.items()} == {0: 0}
        assert committed(admin, "ga-kp") == {("ga-t3", 1): 2}
        assert client.delete_groups(["ga-kp-gone"]) == {"ga-kp-gone": "OK"}
        assert client.delete_groups(["ga-kp-gone"]) == {"ga-kp-gone": "GroupIdNotFoundError"}
    finally:
        client.close()
    assert "ga-kp-gone" not in admin.list_groups()


def test_offsets_of_topics_live_members_consume_stay_and_the_others_go(broker, admin):
    create_topic(broker, "ga-consumed")
    create_topic(broker, "ga-old")
    commit(admin, "ga-mixed", {("ga-consumed", 0): 1, ("ga-old", 0): 7})
    with live_consumer(broker, "ga-mixed", ["ga-consumed"]):
        with connect(broker) as conn:
            body = conn.request(offset_delete.API_KEY, 0, offset_delete.REQUEST(group_id="ga-mixed", topics=[
                {"name": "ga-consumed", "partitions": [{"partition_index": 0}]},
                {"name": "ga-old", "partitions": [{"partition_index": 0}, {"partition_index": 5}]}]))
        assert body.error_code == 0
        assert [(t.name, p.partition_index, p.error_code) for t in body.topics for p in t.partitions] == [
            ("ga-consumed", 0, GroupSubscribedToTopic.code), ("ga-old", 0, 0), ("ga-old", 5, 3)]
        assert committed(admin, "ga-mixed") == {("ga-consumed", 0): 1}
        with pytest.raises(GroupSubscribedToTopic):
            admin.delete_group_offsets("ga-mixed", [TopicPartition("ga-consumed", 0)])


def test_offset_delete_of_an_unknown_group_is_a_group_level_error(broker):
    with connect(broker) as conn:
        body = conn.request(offset_delete.API_KEY, 0, offset_delete.REQUEST(group_id="ga-never", topics=[
            {"name": "ga-t1", "partitions": [{"partition_index": 0}]}]))
    assert (body.error_code, body.topics) == (GroupIdNotFound.code, [])


def test_deleting_the_last_offsets_of_an_empty_group_removes_it(broker, admin):
    create_topic(broker, "ga-t4")
    commit(admin, "ga-last", {("ga-t4", 0): 2})
    admin.delete_group_offsets("ga-last", [TopicPartition("ga-t4", 0)])
    assert "ga-last" not in admin.list_groups()

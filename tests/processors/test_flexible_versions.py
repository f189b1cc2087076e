"""What the flexible (KIP-482) versions of the core APIs add, answered as Kafka answers them
(docs/protocol-versions.md): topic ids, the protocol fields of JoinGroup v7 / SyncGroup v5, ListGroups
v4's states, OffsetFetch v7's require_stable, InitProducerId v3's producer id and epoch, CreateTopics
v5's details. Over the wire against a real broker; the stable-offsets test uses confluent-kafka's
transactional producer for the pending offsets."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mmlog.client.connection import ConnectionClosed
from mmlog.protocol.messages import (create_topics, heartbeat, init_producer_id, join_group, leave_group,
                                     list_groups, metadata, offset_commit, offset_fetch, sync_group)
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect

INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED, INVALID_REQUEST = 23, 79, 42
INVALID_PRODUCER_EPOCH, UNSTABLE_OFFSET_COMMIT, UNKNOWN_TOPIC_ID = 47, 88, 100


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2,
                        config={"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


def test_metadata_v10_and_later_answer_each_topics_stable_id_and_v12_finds_topics_by_id(broker):
    with connect(broker) as conn:
        [topic] = conn.request(metadata.API_KEY, 12, metadata.REQUEST(topics=[{"name": "with-id"}])).topics
        assert topic.error_code == 0 and topic.topic_id != uuid.UUID(int=0)
        again = conn.request(metadata.API_KEY, 10, metadata.REQUEST(topics=[{"name": "with-id"}]))
        assert again.topics[0].topic_id == topic.topic_id
        unknown = uuid.uuid4()
        by_id = conn.request(metadata.API_KEY, 12, metadata.REQUEST(topics=[
            {"name": None, "topic_id": topic.topic_id}, {"name": None, "topic_id": unknown}]))
        assert [(t.name, t.topic_id, t.error_code) for t in by_id.topics] == [
            (None, unknown, UNKNOWN_TOPIC_ID), ("with-id", topic.topic_id, 0)]
    broker.restart()  # the id is stored with the topic, not made up per process
    with connect(broker) as conn:
        after = conn.request(metadata.API_KEY, 12, metadata.REQUEST(topics=[{"name": "with-id"}]))
        assert after.topics[0].topic_id == topic.topic_id


def test_metadata_v11_may_not_ask_by_topic_id(broker):
    with connect(broker) as conn:
        with pytest.raises(ConnectionClosed):
            conn.request(metadata.API_KEY, 11, metadata.REQUEST(topics=[{"name": None, "topic_id": uuid.uuid4()}]))


def _join(conn, group, member_id="", version=7):
    return conn.request(join_group.API_KEY, version, join_group.REQUEST(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
        protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}]))


def test_join_group_v7_answers_the_protocol_type_and_sync_group_v5_checks_and_answers_the_protocol(broker):
    with connect(broker) as conn:
        asked = _join(conn, "flex-group")
        assert (asked.error_code, asked.protocol_name, asked.protocol_type) == (MEMBER_ID_REQUIRED, None, None)
        joined = _join(conn, "flex-group", asked.member_id)
        assert (joined.error_code, joined.protocol_type, joined.protocol_name) == (0, "consumer", "range")
        member, generation = joined.member_id, joined.generation_id

        def sync(**protocol):
            return conn.request(sync_group.API_KEY, 5, sync_group.REQUEST(
                group_id="flex-group", generation_id=generation, member_id=member,
                assignments=[{"member_id": member, "assignment": b"mine"}], **protocol))

        assert sync(protocol_type="consumer", protocol_name="roundrobin").error_code == INCONSISTENT_GROUP_PROTOCOL
        assert sync(protocol_type="connect").error_code == INCONSISTENT_GROUP_PROTOCOL
        synced = sync(protocol_type="consumer", protocol_name="range")
        assert (synced.error_code, bytes(synced.assignment)) == (0, b"mine")
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        beat = conn.request(heartbeat.API_KEY, 4, heartbeat.REQUEST(
            group_id="flex-group", generation_id=generation, member_id=member))
        assert beat.error_code == 0
        stable = conn.request(list_groups.API_KEY, 4, list_groups.REQUEST(states_filter=["Stable"]))
        assert [(g.group_id, g.group_state) for g in stable.groups] == [("flex-group", "Stable")]
        left = conn.request(leave_group.API_KEY, 5, leave_group.REQUEST(
            group_id="flex-group", members=[{"member_id": member, "reason": "the test is over"}]))
        assert left.error_code == 0 and [m.error_code for m in left.members] == [0]
        empty = conn.request(list_groups.API_KEY, 4, list_groups.REQUEST(states_filter=["Empty"]))
        assert ("flex-group", "Empty") in [(g.group_id, g.group_state) for g in empty.groups]
        assert conn.request(list_groups.API_KEY, 4, list_groups.REQUEST(states_filter=["Dead"])).groups == []


def test_init_producer_id_v3_refuses_half_an_id_and_fences_another_id_of_a_transactional_id(broker):
    with connect(broker) as conn:
        half = conn.request(init_producer_id.API_KEY, 3, init_producer_id.REQUEST(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=3))
        assert half.error_code == INVALID_REQUEST
        fresh = conn.request(init_producer_id.API_KEY, 3, init_producer_id.REQUEST(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=7, producer_epoch=0))
        assert fresh.error_code == 0 and fresh.producer_id >= 0 and fresh.producer_epoch == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "flex-txn"})
    producer.init_transactions(30)  # finds the transaction coordinator, makes __transaction_state
    del producer
    with connect(broker) as conn:
        current = conn.request(init_producer_id.API_KEY, 3, init_producer_id.REQUEST(
            transactional_id="flex-txn", transaction_timeout_ms=60_000))
        assert current.error_code == 0
        other = conn.request(init_producer_id.API_KEY, 3, init_producer_id.REQUEST(
            transactional_id="flex-txn", transaction_timeout_ms=60_000,
            producer_id=current.producer_id + 1, producer_epoch=current.producer_epoch))
        assert other.error_code == INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED before v4 (KIP-588)
        bumped = conn.request(init_producer_id.API_KEY, 3, init_producer_id.REQUEST(
            transactional_id="flex-txn", transaction_timeout_ms=60_000,
            producer_id=current.producer_id, producer_epoch=current.producer_epoch))
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (
            0, current.producer_id, current.producer_epoch + 1)


def test_offset_fetch_v7_with_require_stable_refuses_offsets_an_open_transaction_holds(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 12, metadata.REQUEST(topics=[{"name": "stable-t"}]))
        done = conn.request(offset_commit.API_KEY, 8, offset_commit.REQUEST(
            group_id="stable-g", generation_id=-1, member_id="",
            topics=[{"name": "stable-t", "partitions": [{"partition_index": 0, "committed_offset": 3}]}]))
        assert done.topics[0].partitions[0].error_code == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "stable-g"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "stable-txn"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("stable-t", 0, 5)], consumer.consumer_group_metadata(),
                                             30)

        def fetch(require_stable, version=7):
            body = conn.request(offset_fetch.API_KEY, version, offset_fetch.REQUEST(
                group_id="stable-g", topics=[{"name": "stable-t", "partition_indexes": [0]}],
                require_stable=require_stable))
            p = body.topics[0].partitions[0]
            return p.error_code, p.committed_offset

        with connect(broker) as conn:
            assert fetch(True) == (UNSTABLE_OFFSET_COMMIT, -1)
            assert fetch(False) == (0, 3)
            assert fetch(True, version=6) == (0, 3)  # require_stable does not exist before v7
        producer.commit_transaction(30)
        with connect(broker) as conn:
            deadline = time.monotonic() + 10
            while fetch(True) != (0, 5) and time.monotonic() < deadline:
                time.sleep(0.1)  # the marker reaches the coordinator after the commit returns
            assert fetch(True) == (0, 5)
    finally:
        consumer.close()


def test_create_topics_v5_answers_partitions_replication_and_configs_of_each_topic(broker):
    with connect(broker) as conn:
        def create(name, validate_only, partitions=3):
            return conn.request(create_topics.API_KEY, 5, create_topics.REQUEST(topics=[{
                "name": name, "num_partitions": partitions, "replication_factor": -1,
                "configs": [{"name": "retention.ms", "value": "12345"}]}], validate_only=validate_only)).topics[0]

        for topic in (create("v5-checked", True), create("v5-made", False)):
            configs = {c.name: (c.value, c.config_source) for c in topic.configs}
            assert (topic.error_code, topic.num_partitions, topic.replication_factor) == (0, 3, 1)
            assert configs["retention.ms"] == ("12345", 1)  # DYNAMIC_TOPIC_CONFIG
            assert configs["segment.bytes"] == (str(1 << 30), 5)  # DEFAULT_CONFIG
        refused = create("v5-made", False)
        assert refused.error_code == 36 and (refused.num_partitions, refused.replication_factor) == (-1, -1)
        assert create("v5-none", True, partitions=0).error_code != 0


def test_a_catalogue_topic_id_reads_as_hex_or_kafkas_base64_and_a_missing_one_as_the_zero_uuid():
    from base64 import urlsafe_b64encode

    from mmlog.processors.handlers.metadata import topic_uuid
    some = uuid.uuid4()
    assert topic_uuid(some.hex) == some
    assert topic_uuid(urlsafe_b64encode(some.bytes).decode().rstrip("=")) == some
    assert topic_uuid("") == topic_uuid("not an id") == uuid.UUID(int=0)

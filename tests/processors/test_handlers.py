"""The processor's handlers, over the wire: Metadata forms, DescribeConfigs, OffsetForLeaderEpoch, big fetches."""

import time

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from mmlog.protocol.messages import describe_configs, metadata, offset_for_leader_epoch
from mmlog.protocol.records import build_batch, iter_batches
from mmlog.testing.connections import connect
from tests.processors.test_bad_input import produce_one


def make_topic(conn, name):
    conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": name}]))


def test_metadata_null_means_all_topics_and_empty_means_brokers_only(broker):
    with connect(broker) as conn:
        make_topic(conn, "meta-a")
        make_topic(conn, "meta-b")
        everything = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=None))
        assert {"meta-a", "meta-b"} <= {t.name for t in everything.topics}
        assert everything.cluster_id and everything.controller_id == 0
        host, port = broker.bootstrap.rsplit(":", 1)
        assert [(b.node_id, b.host, b.port) for b in everything.brokers] == [(0, host, int(port))]
        brokers_only = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[]))
        assert brokers_only.topics == [] and len(brokers_only.brokers) == 1
        v0_all = conn.request(metadata.API_KEY, 0, metadata.REQUEST(topics=[]))
        assert {"meta-a", "meta-b"} <= {t.name for t in v0_all.topics}
        named = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "meta-a"}]))
        [topic] = named.topics
        assert topic.error_code == 0 and [p.leader_id for p in topic.partitions] == [0]
        assert topic.partitions[0].leader_epoch == -1  # keeps clients from OffsetForLeaderEpoch validation


def test_metadata_auto_creates_with_num_partitions_unless_the_client_forbids_it(broker):
    with connect(broker) as conn:
        made = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "auto-made"}]))
        assert made.topics[0].error_code == 0 and len(made.topics[0].partitions) == 1
        refused = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "not-made"}],
                                                                    allow_auto_topic_creation=False))
        assert refused.topics[0].error_code == 3


def test_describe_configs_reports_overrides_and_defaults_by_kafka_name(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("described", 1, 1, config={"retention.ms": "12345"})])["described"].result(30)
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "described")]).values()
    configs = future.result(30)
    assert configs["retention.ms"].value == "12345" and not configs["retention.ms"].is_default
    assert configs["segment.bytes"].value == str(1 << 30) and configs["segment.bytes"].is_default
    with connect(broker) as conn:
        missing = conn.request(describe_configs.API_KEY, 1, describe_configs.REQUEST(resources=[
            {"resource_type": 2, "resource_name": "no-such", "configuration_keys": None}]))
        assert missing.results[0].error_code == 3


def test_offset_for_leader_epoch_answers_epoch_0_ending_at_the_high_watermark(broker):
    with connect(broker) as conn:
        make_topic(conn, "epochs")
        produce_one(conn, "epochs", 0, build_batch([(None, b"x")] * 7))
        body = conn.request(offset_for_leader_epoch.API_KEY, 3, offset_for_leader_epoch.REQUEST(topics=[
            {"topic": "epochs", "partitions": [{"partition": 0, "leader_epoch": 0}]}]))
        part = body.topics[0].partitions[0]
        assert (part.error_code, part.leader_epoch, part.end_offset) == (0, 0, 7)


def test_a_big_fetch_to_a_slow_reader_resumes_sendfile_and_arrives_intact(broker):
    with connect(broker) as conn:
        make_topic(conn, "big-fetch")
        batches = [build_batch([(None, bytes([i % 251]) * 1000)] * 500) for i in range(40)]  # ~20 MB
        for batch in batches:
            assert produce_one(conn, "big-fetch", 0, batch).error_code == 0
    slow = connect(broker)  # ~20 MB is more than both socket buffers hold: the sender must block
    from mmlog.protocol.messages import fetch

    slow.send(fetch.API_KEY, 11, fetch.REQUEST(max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, topics=[
        {"topic": "big-fetch", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                "partition_max_bytes": 64 << 20}]}]))
    time.sleep(0.5)  # not reading yet: the broker's sendfile hits a full socket buffer and resumes later
    body = slow.receive()
    slow.close()
    data = bytes(body.responses[0].partitions[0].records)
    got = [data[pos : pos + h.size] for pos, h in iter_batches(data)]
    assert len(got) == 40
    for i, (stored, sent) in enumerate(zip(got, batches)):
        assert stored[12:] == bytes(sent[12:])  # everything but the broker-assigned base offset
        assert int.from_bytes(stored[:8], "big") == i * 500

"""kafka-python 3.x infers a broker's Kafka release from the versions it advertises, and a client pinned
with `api_version` to an older release then sends *that release's* versions (its own table,
`kafka/protocol/broker_version_data.py`), whatever the broker advertises; pinned to the inferred release
or a newer one, it uses the advertised versions. So mmlog serves every version a Kafka release below the
one it makes kafka-python infer would serve (docs/protocol-versions.md)."""

import time

import pytest

kafka = pytest.importorskip("kafka", minversion="3.0")

from kafka.admin import ConfigResource, NewPartitions, NewTopic  # noqa: E402
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest  # noqa: E402
from kafka.protocol.broker_version_data import (BROKER_API_VERSIONS,  # noqa: E402
                                                infer_broker_version_from_api_versions)
from kafka.structs import TopicPartition  # noqa: E402

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.connection import BrokerConnection  # noqa: E402
from mmlog.protocol.messages import api_versions  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402

INFERRED = (2, 6)  # DescribeClientQuotas v0 is kafka-python's test for Kafka 2.6
PINS = [None, (2, 1), (2, 4), (2, 5), (2, 6), (2, 8), (3, 0), (3, 9)]
PIN_IDS = ["inferred" if p is None else ".".join(map(str, p)) for p in PINS]
TIMEOUTS = {"request_timeout_ms": 10_000}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """No initial rebalance delay: each pinned consumer joins its own group at once."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2,
                        config={"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


def advertised(broker) -> dict[int, tuple[int, int]]:
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        answer = conn.request(api_versions.API_KEY, 3, api_versions.REQUEST())
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def _kafka_python_requests() -> dict[int, type]:
    """kafka-python's request class of every API key: its own min and max versions."""
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)
    return {c.API_KEY: c for c in subclasses(ApiMessage)
            if c.__name__.endswith("Request") and isinstance(getattr(c, "API_KEY", None), int)}


def test_kafka_python_infers_kafka_2_6_from_what_mmlog_advertises(broker):
    served = advertised(broker)
    assert {48, 49} <= set(served)
    assert infer_broker_version_from_api_versions(served) == INFERRED


def test_every_release_below_the_inferred_one_asks_only_for_versions_mmlog_serves(broker):
    """The versions a pinned client takes from its table: min(release's max, client's max), for each
    API mmlog serves (an API it does not serve fails only when used, as against that release). Only
    the ceiling is checked: mmlog's floors are Kafka 4's (KIP-896; DescribeConfigs v1, DescribeLogDirs
    v1, OffsetForLeaderEpoch v2), which releases before 2.1 may go below."""
    served, requests = advertised(broker), _kafka_python_requests()
    outside = []
    for release, table in BROKER_API_VERSIONS.items():
        if not (0, 11) <= release < INFERRED:
            continue
        for key, (_, release_max) in table.items():
            if key not in served or key not in requests:
                continue
            sent = min(release_max, requests[key].max_version)
            if sent > served[key][1]:
                outside.append((release, requests[key].__name__, sent, served[key]))
    assert outside == [], "\n".join(map(str, outside))


def _name(pin) -> str:
    return "inferred" if pin is None else "-".join(map(str, pin))


@pytest.mark.parametrize("pin", PINS, ids=PIN_IDS)
def test_a_pinned_kafka_python_produces_and_consumes_in_a_group_and_commits(broker, pin):
    topic, group = f"pinned-{_name(pin)}", f"group-{_name(pin)}"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 2)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=pin, **TIMEOUTS)
    try:
        for i in range(10):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(10)
    finally:
        producer.close(5)
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, api_version=pin, group_id=group,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=10_000, heartbeat_interval_ms=1_000, **TIMEOUTS)
    try:
        values, deadline = [], time.monotonic() + 30
        while len(values) < 10 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
        consumer.commit()
        committed = [consumer.committed(TopicPartition(topic, p)) for p in (0, 1)]
    finally:
        consumer.close()
    assert sorted(values) == sorted(b"v%d" % i for i in range(10))
    assert sum(committed) == 10


@pytest.mark.parametrize("pin", PINS, ids=PIN_IDS)
def test_a_pinned_kafka_python_admin_manages_topics_configs_and_the_group_above(broker, pin):
    """Runs after the test above: its group is Empty and has committed 10 offsets."""
    topic, group = f"admin-{_name(pin)}", f"group-{_name(pin)}"
    client = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=pin, **TIMEOUTS)
    try:
        client.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "3600000"})])
        client.create_partitions({topic: NewPartitions(3)})
        [described] = client.describe_topics([topic])
        client.alter_configs([ConfigResource("TOPIC", topic, configs={"retention.ms": "7200000"})])
        configs = client.describe_configs([ConfigResource("TOPIC", topic)])
        listed = client.list_groups(states_filter=["Empty"] if pin is None else None)
        group_described = client.describe_groups([group])
        offsets = client.list_group_offsets({group: None})[group]
        client.delete_topics([topic])
    finally:
        client.close()
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    assert "7200000" in str(configs)
    assert group in str(listed) and "Empty" in str(group_described)
    assert sum(o.offset for o in offsets.values()) == 10


def _send(client, request):
    """One request through the admin client's connection manager, as its own admin calls send theirs."""
    async def call():
        return await client._manager.send(request)
    return client._manager.run(call)


@pytest.mark.parametrize("pin", [None, (2, 8)], ids=["inferred", "2.8"])
def test_kafka_pythons_client_quota_messages_alter_and_describe_quotas(broker, pin):
    """kafka-python has the quota messages but no admin call for them: they are sent as it would."""
    client = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=pin, **TIMEOUTS)
    name = f"quota-{_name(pin)}"
    entry = AlterClientQuotasRequest.EntryData
    try:
        altered = _send(client, AlterClientQuotasRequest(entries=[entry(
            entity=[entry.EntityData(entity_type="client-id", entity_name=name)],
            ops=[entry.OpData(key="producer_byte_rate", value=2048.0, remove=False)])], validate_only=False))
        described = _send(client, DescribeClientQuotasRequest(components=[
            DescribeClientQuotasRequest.ComponentData(entity_type="client-id", match_type=0, match=name)],
            strict=True))
    finally:
        client.close()
    assert [e.error_code for e in altered.entries] == [0]
    assert described.error_code == 0
    assert [(v.key, v.value) for e in described.entries for v in e.values] == [("producer_byte_rate", 2048.0)]
    assert altered.API_VERSION == described.API_VERSION == 1  # flexible (a release < 2.6 has no quota API)


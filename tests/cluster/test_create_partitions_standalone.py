"""CreatePartitions on a standalone broker: Kafka's AdminClients, mmlog's Admin and CLI grow a topic;
bad requests get Kafka's error code and message and change nothing."""

import subprocess
import sys

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KafkaPythonNewPartitions

from mmlog.client.admin import Admin
from mmlog.client.partitioner import partition_for_key
from mmlog.client.producer import Producer
from mmlog.errors import InvalidPartitions, InvalidReplicaAssignment, InvalidRequest, UnknownTopicOrPartition
from mmlog.protocol.messages import create_partitions
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        yield b


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def partition_count(admin, topic):
    return admin.list_topics()[topic]


def test_confluent_kafka_grows_a_topic_and_gets_kafkas_errors(broker, admin):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_topics([NewTopic("ck-grow", 2, 1)])["ck-grow"].result(10)
    client.create_partitions([NewPartitions("ck-grow", 5)])["ck-grow"].result(10)
    assert len(client.list_topics(timeout=10).topics["ck-grow"].partitions) == 5
    for topic, count, code, message in [
        ("ck-grow", 3, "INVALID_PARTITIONS", "Topic currently has 5 partitions, which is higher than the requested 3."),
        ("ck-grow", 5, "INVALID_PARTITIONS", "Topic already has 5 partitions."),
        ("ck-none", 3, "UNKNOWN_TOPIC_OR_PART", "The topic 'ck-none' does not exist."),
    ]:
        with pytest.raises(KafkaException) as raised:
            client.create_partitions([NewPartitions(topic, count)])[topic].result(10)
        assert raised.value.args[0].name() == code and raised.value.args[0].str() == message
    assert partition_count(admin, "ck-grow") == 5


def test_validate_only_checks_and_grows_nothing(broker, admin):
    admin.create_topic("grow-check", 1)
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_partitions([NewPartitions("grow-check", 4)], validate_only=True)["grow-check"].result(10)
    assert partition_count(admin, "grow-check") == 1
    assert not list(broker.data_dir.glob("grow-check-[1-9]"))


def test_kafka_python_grows_a_topic(broker, admin):
    admin.create_topic("kp-grow", 1)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = client.create_partitions({"kp-grow": KafkaPythonNewPartitions(total_count=3)})
    finally:
        client.close()
    assert [r.error_code for r in response.results] == [0]
    assert partition_count(admin, "kp-grow") == 3


def test_new_partitions_take_records_and_keys_then_map_by_the_new_count(broker, admin):
    """Growing changes where keys go (murmur2 % partitions): the README says so, this shows it."""
    admin.create_topic("keys-grow", 2)
    admin.create_partitions({"keys-grow": 6})
    with Producer(broker.bootstrap) as producer:
        futures = [producer.send("keys-grow", b"v", key=b"key-%d" % i) for i in range(200)]
        producer.flush()
        landed = [f.result(10).partition for f in futures]
    assert landed == [partition_for_key(b"key-%d" % i, 6) for i in range(200)]
    assert set(landed) == set(range(6))
    assert admin.latest_offsets("keys-grow") == {p: landed.count(p) for p in range(6)}


def test_mmlog_admin_raises_the_typed_errors_and_changes_nothing(admin):
    admin.create_topic("grow-bad", 2)
    with pytest.raises(InvalidPartitions, match="already has 2"):
        admin.create_partitions({"grow-bad": 2})
    with pytest.raises(UnknownTopicOrPartition):
        admin.create_partitions({"grow-nothing": 2})
    admin.create_partitions({"grow-bad": 3}, validate_only=True)
    assert partition_count(admin, "grow-bad") == 2


@pytest.mark.parametrize("assignments, message", [
    ([[0], [0]], "Increasing the number of partitions by 1 but 2 assignments provided."),
    ([[7]], "Unknown broker(s) in replica assignment: 7."),
    ([[0, 0]], "Duplicate brokers not allowed in replica assignment: 0, 0 for partition id 2."),
    ([[]], "Cannot have replication factor of 0 for partition id 2."),
])
def test_explicit_assignments_are_checked_as_kafka_checks_them(broker, admin, assignments, message):
    name = f"grow-assign-{abs(hash(str(assignments))) % 10000}"
    admin.create_topic(name, 2)
    with connect(broker) as conn:
        body = conn.request(create_partitions.API_KEY, 1, create_partitions.REQUEST(
            timeout_ms=5000, validate_only=False, topics=[{"name": name, "count": 3, "assignments": [
                {"broker_ids": ids} for ids in assignments]}]))
    [result] = body.results
    assert (result.error_code, result.error_message) == (InvalidReplicaAssignment.code, message)
    assert partition_count(admin, name) == 2


def test_an_explicit_assignment_of_this_broker_grows_the_topic(broker, admin):
    admin.create_topic("grow-mine", 1)
    with connect(broker) as conn:
        body = conn.request(create_partitions.API_KEY, 0, create_partitions.REQUEST(
            timeout_ms=5000, validate_only=False, topics=[{"name": "grow-mine", "count": 2,
                                                           "assignments": [{"broker_ids": [0]}]}]))
    assert body.results[0].error_code == 0
    assert partition_count(admin, "grow-mine") == 2


def test_a_topic_named_twice_is_invalid_request_and_the_others_grow(broker, admin):
    admin.create_topic("grow-twice", 1)
    admin.create_topic("grow-once", 1)
    with connect(broker) as conn:
        body = conn.request(create_partitions.API_KEY, 1, create_partitions.REQUEST(
            timeout_ms=5000, validate_only=False, topics=[
                {"name": "grow-twice", "count": 2, "assignments": None},
                {"name": "grow-twice", "count": 3, "assignments": None},
                {"name": "grow-once", "count": 2, "assignments": None}]))
    assert [(r.name, r.error_code, r.error_message) for r in body.results] == [
        ("grow-twice", InvalidRequest.code, "Duplicate topic in request."),
        ("grow-twice", InvalidRequest.code, "Duplicate topic in request."),
        ("grow-once", 0, None)]
    assert (partition_count(admin, "grow-twice"), partition_count(admin, "grow-once")) == (1, 2)


def test_the_partition_limit_per_request_applies_to_the_partitions_added(tmp_path):
    with EmbeddedBroker(tmp_path, processors=1, config={"max.partitions.per.request": 4}) as b, \
            Admin(b.bootstrap) as admin:
        admin.create_topic("limited", 2)
        with pytest.raises(InvalidPartitions, match="max.partitions.per.request"):
            admin.create_partitions({"limited": 7})
        admin.create_partitions({"limited": 6})
        assert partition_count(admin, "limited") == 6


def test_grown_partitions_survive_a_restart(tmp_path):
    with EmbeddedBroker(tmp_path, processors=1) as b, Admin(b.bootstrap) as admin:
        admin.create_topic("grow-kept", 1)
        admin.create_partitions({"grow-kept": 3})
        with Producer(b.bootstrap) as producer:
            producer.send("grow-kept", b"x", partition=2).result(10)
    with EmbeddedBroker(tmp_path, processors=1) as b, Admin(b.bootstrap) as admin:
        assert partition_count(admin, "grow-kept") == 3
        assert admin.latest_offsets("grow-kept") == {0: 0, 1: 0, 2: 1}


def test_the_cli_grows_a_topic_and_refuses_a_smaller_count_in_one_line(broker, admin):
    admin.create_topic("cli-grow", 1)

    def topics(*args):
        return subprocess.run([sys.executable, "-m", "mmlog", "topics", "--bootstrap", broker.bootstrap,
                               "--timeout", "5", *args], capture_output=True, text=True, timeout=60)

    grown = topics("alter", "cli-grow", "--partitions", "3")
    assert grown.returncode == 0 and "topic cli-grow now has 3 partition(s)" in grown.stdout
    refused = topics("alter", "cli-grow", "--partitions", "2")
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("mmlog: error: InvalidPartitions: cli-grow: Topic currently has 3 partitions, "
                                      "which is higher than the requested 2.")

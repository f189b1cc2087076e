"""Dynamic broker configs on a standalone broker: set through IncrementalAlterConfigs (confluent-kafka's
AdminClient) for this broker or the cluster default, stored in the catalogue, applied to running partitions
without a restart, described with Kafka's sources and synonym order; settings read only at start refused."""

import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.errors import InvalidConfig, InvalidRequest
from mmlog.protocol.messages import alter_configs, describe_configs, incremental_alter_configs
from mmlog.testing import EmbeddedBroker

DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2,
                        config={"log.retention.ms": 3_600_000}) as b:
        yield b


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def alter(broker, name, *entries):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("broker", name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries])
    [future] = client.incremental_alter_configs([resource]).values()
    return future.result(10)


def describe(broker, name="0"):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = client.describe_configs([ConfigResource("broker", name)]).values()
    return future.result(10)


def test_a_segment_size_set_for_the_broker_rolls_a_running_partition_without_a_restart(broker, admin):
    admin.create_topic("dyn-roll", 1)
    with Producer(broker.bootstrap, linger_ms=0) as p:
        p.send("dyn-roll", b"x" * 1000).result(30)
    alter(broker, "0", ("log.segment.bytes", "65536", SET))
    # Processors take the change with the catalogue (within CATALOGUE_CHECK_S), as Kafka's brokers take
    # theirs from a ZooKeeper notification: write until the log rolls, with a deadline.
    deadline = time.monotonic() + 20
    with Producer(broker.bootstrap, linger_ms=0) as p:
        while len(list((broker.data_dir / "dyn-roll-0").glob("*.log"))) < 4:
            assert time.monotonic() < deadline, "log.segment.bytes=65536 never rolled the running partition"
            for _ in range(100):
                p.send("dyn-roll", b"x" * 1000)
            p.flush()
    assert admin.topic_config("dyn-roll")[0]["segment.bytes"] == "65536"
    alter(broker, "0", ("log.segment.bytes", None, DELETE))
    assert admin.topic_config("dyn-roll")[0]["segment.bytes"] == str(1 << 30)


def test_sources_and_synonyms_go_broker_then_cluster_default_then_static_then_default(broker, admin):
    admin.alter_broker_config(None, set={"log.retention.ms": "120000"})  # the cluster default ("")
    entry = describe(broker)["log.retention.ms"]
    assert (entry.value, entry.source) == ("120000", DYNAMIC_DEFAULT)
    alter(broker, "0", ("log.retention.ms", "60000", SET))
    entry = describe(broker)["log.retention.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == ("60000", DYNAMIC_BROKER, False)
    assert describe(broker)["log.dirs"].is_read_only
    config = admin.broker_config(0)
    assert config["log.retention.ms"] == ("60000", DYNAMIC_BROKER)
    assert config["log.dirs"][1] == STATIC and config["num.partitions"] == ("1", DEFAULT)
    admin.create_topic("dyn-retention", 1)
    assert admin.topic_config("dyn-retention")[0]["retention.ms"] == "60000"
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = client.describe_configs([ConfigResource("topic", "dyn-retention")]).values()
    topic_entry = future.result(10)["retention.ms"]
    assert (topic_entry.value, topic_entry.source) == ("60000", DYNAMIC_BROKER)  # the topic has no override
    alter(broker, "0", ("log.retention.ms", None, DELETE))
    assert admin.topic_config("dyn-retention")[0]["retention.ms"] == "120000"
    admin.alter_broker_config(None, delete=["log.retention.ms"])
    assert admin.broker_config(0)["log.retention.ms"] == ("3600000", STATIC)


def test_synonyms_on_the_wire_are_in_kafkas_order(broker, admin):
    admin.alter_broker_config(None, set={"log.retention.hours": "2"})
    alter(broker, "0", ("log.retention.ms", "60000", SET))
    body = admin._request(admin._controller(), describe_configs.API_KEY, 1, describe_configs.REQUEST(
        include_synonyms=True, resources=[
            {"resource_type": 4, "resource_name": "0", "configuration_keys": ["log.retention.ms"]}]))
    [entry] = body.results[0].configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.ms", "60000", DYNAMIC_BROKER), ("log.retention.hours", "2", DYNAMIC_DEFAULT),
        ("log.retention.ms", "3600000", STATIC), ("log.retention.ms", "604800000", DEFAULT)]
    alter(broker, "0", ("log.retention.ms", None, DELETE))
    admin.alter_broker_config(None, delete=["log.retention.hours"])


@pytest.mark.parametrize("name, value, error, message", [
    ("log.dirs", "/elsewhere", InvalidConfig, "Cannot update these configs dynamically: log.dirs"),
    ("num.network.threads", "4", InvalidConfig, "Cannot update these configs dynamically: num.network.threads"),
    ("no.such.setting", "1", InvalidConfig, "Unknown broker config name: no.such.setting"),
    ("log.segment.bytes", "3", InvalidConfig, "log.segment.bytes: 3 is invalid"),
])
def test_settings_read_only_at_start_and_bad_values_are_refused(broker, admin, name, value, error, message):
    before = admin.broker_config(0)
    with pytest.raises(error, match=message):
        admin.alter_broker_config(0, set={name: value})
    assert admin.broker_config(0) == before  # nothing stored


def test_another_brokers_id_is_invalid_request(broker, admin):
    body = admin._request(admin._controller(), incremental_alter_configs.API_KEY, 0, incremental_alter_configs.REQUEST(
        validate_only=False, resources=[{"resource_type": 4, "resource_name": "7", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "1"}]}]))
    [r] = body.responses
    assert (r.error_code, r.error_message) == (InvalidRequest.code, "Unexpected broker id, expected 0, but received 7")


def test_alter_configs_replaces_a_brokers_whole_dynamic_set_and_kafka_python_uses_it(broker, admin):
    """kafka-python's non-incremental path sends AlterConfigs with the broker's other dynamic configs filled
    in; the API itself replaces the whole set."""
    admin.alter_broker_config(0, set={"log.flush.interval.ms": "1000", "log.retention.bytes": "1000000"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        client.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "0",
                                               configs={"log.retention.bytes": "2000000"})], incremental=False)
    finally:
        client.close()
    config = admin.broker_config(0)
    assert config["log.retention.bytes"] == ("2000000", DYNAMIC_BROKER)
    assert config["log.flush.interval.ms"] == ("1000", DYNAMIC_BROKER)
    body = admin._request(admin._controller(), alter_configs.API_KEY, 1, alter_configs.REQUEST(
        validate_only=False, resources=[{"resource_type": 4, "resource_name": "0", "configs": [
            {"name": "log.retention.bytes", "value": "3000000"}]}]))
    assert [(r.error_code, r.error_message) for r in body.responses] == [(0, None)]
    config = admin.broker_config(0)
    assert config["log.retention.bytes"] == ("3000000", DYNAMIC_BROKER)
    assert config["log.flush.interval.ms"][1] == DEFAULT  # not in the new set: gone
    admin.alter_broker_config(0, delete=["log.retention.bytes"])
    assert admin.broker_config(0)["log.retention.bytes"] == ("-1", DEFAULT)

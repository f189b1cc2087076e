"""IncrementalAlterConfigs / AlterConfigs of topics on a standalone broker: stored in the catalogue, applied
to running partitions without a restart, reported by DescribeConfigs with Kafka's sources and synonyms;
bad names and values get INVALID_CONFIG and change nothing."""

import subprocess
import sys

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.errors import InvalidConfig, NotEnoughReplicas
from mmlog.protocol.messages import alter_configs, describe_configs, incremental_alter_configs
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect
from mmlog.testing.scrape import METRICS_ON, processors_caught_up
from mmlog.testing.wait import wait_for

DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2,
                        config={"log.retention.ms": 3_600_000, "log.retention.check.interval.ms": 200,
                                **METRICS_ON}) as b:
        yield b


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def incremental(broker, topic, *entries, validate_only=False):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in entries])
    [future] = client.incremental_alter_configs([resource], validate_only=validate_only).values()
    return future.result(10)


SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def test_set_and_delete_overrides_with_confluent_kafka(broker, admin):
    admin.create_topic("cfg-a", 1, {"segment.bytes": "1048576"})
    incremental(broker, "cfg-a", ("retention.ms", "60000", SET), ("segment.bytes", None, DELETE))
    config, overrides = admin.topic_config("cfg-a")
    assert overrides == {"retention.ms"}
    assert (config["retention.ms"], config["segment.bytes"]) == ("60000", str(1 << 30))


@pytest.mark.parametrize("entry, message", [
    (("no.such.config", "1", SET), "Unknown topic config name: no.such.config"),
    (("retention.ms", "soon", SET), "retention.ms: 'soon' is not a valid int"),
    (("segment.bytes", "3", SET), "segment.bytes: 3 is invalid (14 .. 2^31-1)"),
    (("retention.ms", "1", AlterConfigOpType.APPEND), "Config value append is not allowed for config key: retention.ms"),
])
def test_bad_names_and_values_are_invalid_config_and_change_nothing(broker, admin, entry, message):
    name = f"cfg-bad-{abs(hash(entry)) % 10**6}"
    admin.create_topic(name, 1, {"retention.ms": "5000"})
    with pytest.raises(KafkaException) as raised:
        incremental(broker, name, ("max.message.bytes", "2000", SET), entry)
    assert (raised.value.args[0].name(), raised.value.args[0].str()) == ("INVALID_CONFIG", message)
    assert admin.topic_config(name)[1] == {"retention.ms"}  # the valid entry beside it was not applied either


def test_cleanup_policy_takes_compact_by_append_and_subtract_and_refuses_nonsense_as_create_does(broker, admin):
    admin.create_topic("cfg-compact", 1)
    incremental(broker, "cfg-compact", ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert set(admin.topic_config("cfg-compact")[0]["cleanup.policy"].split(",")) == {"delete", "compact"}
    incremental(broker, "cfg-compact", ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert admin.topic_config("cfg-compact")[0]["cleanup.policy"] == "compact"
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as at_create:
        client.create_topics([NewTopic("cfg-bogus-new", 1, 1, config={"cleanup.policy": "bogus"})])[
            "cfg-bogus-new"].result(10)
    with pytest.raises(KafkaException) as at_alter:
        incremental(broker, "cfg-compact", ("cleanup.policy", "bogus", SET))
    assert at_alter.value.args[0].code() == at_create.value.args[0].code() == InvalidConfig.code
    assert at_alter.value.args[0].str().split(": ")[-1] == at_create.value.args[0].str().split(": ")[-1]
    assert admin.topic_config("cfg-compact")[0]["cleanup.policy"] == "compact"


def test_validate_only_an_unknown_topic_and_a_broker_resource(broker, admin):
    admin.create_topic("cfg-v", 1)
    incremental(broker, "cfg-v", ("retention.ms", "1234", SET), validate_only=True)
    assert admin.topic_config("cfg-v")[1] == set()
    with connect(broker) as conn:
        body = conn.request(incremental_alter_configs.API_KEY, 0, incremental_alter_configs.REQUEST(
            validate_only=False, resources=[
                {"resource_type": 2, "resource_name": "cfg-none", "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "1"}]},
                {"resource_type": 4, "resource_name": "0", "configs": [  # read at start only (broker_configs.py)
                    {"name": "log.dirs", "config_operation": 0, "value": "/elsewhere"}]},
                {"resource_type": 2, "resource_name": "cfg-v", "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "777"}]}]))
    assert [(r.resource_name, r.error_code) for r in body.responses] == [("cfg-none", 3), ("0", 40), ("cfg-v", 0)]
    assert body.responses[0].error_message == "The topic 'cfg-none' does not exist."
    assert admin.topic_config("cfg-v")[0]["retention.ms"] == "777"


def test_kafka_python_alters_configs_both_ways(broker, admin):
    """kafka-python's non-incremental path sends AlterConfigs with the other overrides filled in (the API
    replaces the whole set); its default path is IncrementalAlterConfigs."""
    admin.create_topic("cfg-kp", 1, {"retention.ms": "5000", "segment.ms": "60000"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "cfg-kp", configs={"flush.ms": "100"})],
                             incremental=False)
        assert admin.topic_config("cfg-kp")[1] == {"retention.ms", "segment.ms", "flush.ms"}
        client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "cfg-kp", configs={"flush.ms": "200"})])
        assert admin.topic_config("cfg-kp")[0]["flush.ms"] == "200"
    finally:
        client.close()


def test_alter_configs_replaces_the_whole_set(broker, admin):
    admin.create_topic("cfg-replace", 1, {"retention.ms": "5000", "segment.ms": "60000"})
    with connect(broker) as conn:
        body = conn.request(alter_configs.API_KEY, 1, alter_configs.REQUEST(validate_only=False, resources=[
            {"resource_type": 2, "resource_name": "cfg-replace", "configs": [{"name": "flush.ms", "value": "100"}]}]))
    assert [(r.error_code, r.error_message) for r in body.responses] == [(0, None)]
    config, overrides = admin.topic_config("cfg-replace")
    assert overrides == {"flush.ms"} and config["retention.ms"] == "3600000"  # back to the broker's setting


def test_describe_configs_reports_sources_and_synonyms_as_kafka(broker, admin):
    admin.create_topic("cfg-src", 1, {"segment.bytes": "65536"})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = client.describe_configs([ConfigResource("topic", "cfg-src")]).values()
    config = future.result(10)

    def synonyms(name):
        return [(s.name, s.value, s.source) for s in config[name].synonyms.values()]

    assert config["segment.bytes"].source == DYNAMIC_TOPIC_CONFIG
    assert synonyms("segment.bytes") == [("segment.bytes", "65536", DYNAMIC_TOPIC_CONFIG),
                                         ("log.segment.bytes", str(1 << 30), DEFAULT_CONFIG)]
    assert config["retention.ms"].source == STATIC_BROKER_CONFIG  # the broker's server.properties set it
    with connect(broker) as conn:  # confluent-kafka keeps one synonym per name: the raw answer lists both
        body = conn.request(describe_configs.API_KEY, 1, describe_configs.REQUEST(include_synonyms=True, resources=[
            {"resource_type": 2, "resource_name": "cfg-src", "configuration_keys": ["retention.ms"]}]))
    [entry] = body.results[0].configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.ms", "3600000", STATIC_BROKER_CONFIG), ("log.retention.ms", "604800000", DEFAULT_CONFIG)]
    assert config["flush.ms"].source == DEFAULT_CONFIG


def test_min_insync_replicas_applies_to_the_next_produce_without_a_restart(broker, admin):
    admin.create_topic("cfg-isr", 1)
    with Producer(broker.bootstrap, acks="all", retries=0) as producer:
        # The first send in a fresh checkout also compiles the producer's numba kernels (seconds).
        producer.send("cfg-isr", b"before").get(timeout=60)
        admin.alter_topic_config("cfg-isr", {"min.insync.replicas": "2"})
        processors_caught_up(broker)
        with pytest.raises(NotEnoughReplicas):
            for _ in range(4):  # both processors, whichever serves the connection
                producer.send("cfg-isr", b"refused").get(timeout=10)
        admin.alter_topic_config("cfg-isr", delete=["min.insync.replicas"])
        processors_caught_up(broker)
        producer.send("cfg-isr", b"after").get(timeout=10)


def test_segment_and_retention_changes_reach_running_partitions(broker, admin):
    admin.create_topic("cfg-live", 1)
    admin.alter_topic_config("cfg-live", {"segment.bytes": "1024"})
    processors_caught_up(broker)
    with Producer(broker.bootstrap, linger_ms=0, batch_size=1) as producer:
        for i in range(30):
            producer.send("cfg-live", b"%03d" % i + b"." * 100).get(timeout=10)
    directory = broker.data_dir / "cfg-live-0"
    assert len(list(directory.glob("*.log"))) > 2  # rolled at the new size
    admin.alter_topic_config("cfg-live", {"retention.bytes": "1"})
    wait_for(lambda: len(list(directory.glob("*.log"))) == 1, what="retention to apply the new retention.bytes",
             show=lambda: sorted(p.name for p in directory.glob("*.log")))
    assert admin.earliest_offsets("cfg-live")[0] > 0


def test_overrides_survive_a_restart(tmp_path):
    with EmbeddedBroker(tmp_path, processors=1) as b, Admin(b.bootstrap) as admin:
        admin.create_topic("cfg-kept", 1)
        admin.alter_topic_config("cfg-kept", {"retention.ms": "123456"})
    with EmbeddedBroker(tmp_path, processors=1) as b, Admin(b.bootstrap) as admin:
        assert admin.topic_config("cfg-kept") == (admin.topic_config("cfg-kept")[0], {"retention.ms"})
        assert admin.topic_config("cfg-kept")[0]["retention.ms"] == "123456"


def test_the_cli_sets_and_deletes_overrides(broker, admin):
    admin.create_topic("cli-cfg", 1)

    def topics(*args):
        return subprocess.run([sys.executable, "-m", "mmlog", "topics", "--bootstrap", broker.bootstrap,
                               "--timeout", "5", *args], capture_output=True, text=True, timeout=60)

    done = topics("alter", "cli-cfg", "--config", "retention.ms=90000", "--config", "flush.ms=50")
    assert done.returncode == 0 and done.stdout == "topic cli-cfg: config updated\n"
    assert admin.topic_config("cli-cfg")[1] == {"retention.ms", "flush.ms"}
    assert topics("alter", "cli-cfg", "--delete-config", "flush.ms").returncode == 0
    assert admin.topic_config("cli-cfg")[1] == {"retention.ms"}
    bad = topics("alter", "cli-cfg", "--config", "retention.ms=x")
    assert (bad.returncode, bad.stderr.strip()) == (
        1, "mmlog: error: InvalidConfig: cli-cfg: retention.ms: 'x' is not a valid int")

"""kafka-python infers a broker's Kafka version from the APIs it advertises, and a client configured
with an older `api_version` then uses its own version table for that release: mmlog advertises nothing
that would make it infer a release whose table holds versions mmlog does not serve."""

import pytest

kafka = pytest.importorskip("kafka", minversion="3.0")

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.connection import BrokerConnection  # noqa: E402
from mmlog.protocol.messages import api_versions  # noqa: E402


def test_a_kafka_python_admin_pinned_to_2_5_describes_topics(broker):
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("pinned", 2)
    client = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(2, 5), request_timeout_ms=10_000)
    try:
        [topic] = client.describe_topics(["pinned"])
    finally:
        client.close()
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1]


def test_the_client_quota_apis_are_served_but_not_advertised(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        keys = {k.api_key for k in conn.request(api_versions.API_KEY, 3, api_versions.REQUEST()).api_keys}
    assert 3 in keys and not {48, 49} & keys
    with Admin(broker.bootstrap) as admin:
        admin.alter_client_quotas({(("client-id", "pinned"),): {"producer_byte_rate": 1024}})
        assert admin.describe_client_quotas()[(("client-id", "pinned"),)] == {"producer_byte_rate": 1024}
        admin.alter_client_quotas({(("client-id", "pinned"),): {"producer_byte_rate": None}})

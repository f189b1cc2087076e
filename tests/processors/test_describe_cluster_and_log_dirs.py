"""DescribeCluster and DescribeLogDirs as Kafka's admin clients call them."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from mmlog.client.producer import Producer
from mmlog.protocol.messages import describe_cluster, describe_log_dirs
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect
from tests.processors.test_handlers import make_topic


def test_describe_cluster_names_the_cluster_the_controller_and_the_brokers(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster().result(10)
    host, port = broker.bootstrap.rsplit(":", 1)
    assert cluster.cluster_id and cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, host, int(port))]
    with connect(broker) as conn:
        controllers = conn.request(describe_cluster.API_KEY, 1, include_cluster_authorized_operations=False,
                                   endpoint_type=2)
    assert controllers.error_code == 119  # UNSUPPORTED_ENDPOINT_TYPE: brokers are not KRaft controllers


def test_describe_log_dirs_gives_each_partitions_bytes_in_its_dir(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    with EmbeddedBroker(",".join(map(str, dirs)), config={"num.partitions": 4}) as broker:
        with connect(broker) as conn:
            make_topic(conn, "sized")
        with Producer(broker.bootstrap, linger_ms=1) as producer:
            for p in range(4):
                producer.send_many("sized", [b"x" * 100] * (10 * (p + 1)), partition=p)
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            answer = client.describe_log_dirs()
        finally:
            client.close()
        with connect(broker) as conn:
            some = conn.request(describe_log_dirs.API_KEY, 1, topics=[{"topic": "sized", "partitions": [0]}])
    [mine] = answer  # one broker
    sizes = {(t["name"], p["partition_index"]): (r["log_dir"], p["partition_size"])
             for r in mine["log_dirs"] for t in r["topics"] for p in t["partitions"]}
    assert sorted(k for k in sizes if k[0] == "sized") == [("sized", p) for p in range(4)]
    assert {r["log_dir"] for r in mine["log_dirs"]} == {str(d) for d in dirs}
    assert all((tmp_path / log_dir / f"{t}-{p}").is_dir() for (t, p), (log_dir, _) in sizes.items())
    assert sizes[("sized", 3)][1] > sizes[("sized", 0)][1] > 1000
    assert [(t.name, [p.partition_index for p in t.partitions]) for r in some.results for t in r.topics] == \
        [("sized", [0])]

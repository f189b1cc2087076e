"""Spark writes and reads over SASL_SSL (SCRAM-SHA-512) with the Spark Kafka source's option names."""

from __future__ import annotations

import pytest

from mmlog.client import Admin
from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import PASSWORD, add_users, make_pki, security_config

JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{PASSWORD}";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("spark-pki"))
    data = tmp_path_factory.mktemp("spark-secure") / "data"
    add_users(data)
    with EmbeddedBroker(data, processors=2, config=security_config(pki)) as broker:
        yield broker, pki


def test_spark_writes_and_reads_over_sasl_ssl(spark, secured):
    broker, pki = secured
    options = {"kafka.bootstrap.servers": f"127.0.0.1:{broker.listener_ports['SASL_SSL']}",
               "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": JAAS, "kafka.ssl.truststore.location": str(pki.ca)}
    with Admin(f"127.0.0.1:{broker.listener_ports['PLAINTEXT']}") as admin:
        admin.create_topic("spark-secured", partitions=2)
    df = spark.createDataFrame([(f"k{i}", b"v%d" % i) for i in range(100)], "key string, value binary")
    df.write.format("mmlog").options(**options).option("topic", "spark-secured").mode("append").save()
    got = spark.read.format("mmlog").options(**options).option("subscribe", "spark-secured").load().collect()
    assert sorted(bytes(r.value) for r in got) == sorted(b"v%d" % i for i in range(100))

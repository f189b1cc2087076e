"""The Spark source's and writer's security options, as Spark's Kafka source spells them, reach the
executors' fetches (checked here without a Spark session: options parsed, then a range fetched)."""

from __future__ import annotations

import pytest

from mmlog.client import Producer
from mmlog.spark.fetch import RangeFetcher
from mmlog.spark.options import ReadOptions, WriteOptions
from mmlog.testing.security import PASSWORD

JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{PASSWORD}";'


def spark_options(broker, pki) -> dict:
    return {"kafka.bootstrap.servers": f"127.0.0.1:{broker.listener_ports['SASL_SSL']}",
            "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": JAAS, "kafka.ssl.truststore.location": str(pki.ca),
            "kafka.ssl.truststore.type": "PEM"}


def test_kafka_security_options_map_onto_the_clients_and_a_range_is_fetched(secure_broker, pki):
    read = ReadOptions.parse({**spark_options(secure_broker, pki), "subscribe": "spark-secure"}, streaming=False)
    assert dict(read.security) == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                   "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD,
                                   "ssl_cafile": str(pki.ca)}
    write = WriteOptions.parse({**spark_options(secure_broker, pki), "topic": "spark-secure"})
    with Producer(write.bootstrap, linger_ms=1, **dict(write.security)) as producer:
        for i in range(10):
            producer.send("spark-secure", b"r%d" % i, partition=0)
        producer.flush()
    fetcher = RangeFetcher("spark-secure", 0, read.bootstrap, read.bootstrap, max_bytes=1 << 20, timeout=10,
                           security=read.security)
    arrays = list(fetcher.chunks(0, 10))
    assert sum(len(a.offsets) for a in arrays) == 10


@pytest.mark.parametrize("bad, why", [({"kafka.ssl.keystore.type": "JKS"}, "PEM"),
                                      ({"kafka.sasl.mechanism": "GSSAPI"}, "sasl_mechanism"),
                                      ({"kafka.sasl.kerberos.service.name": "kafka"}, "not a security setting")])
def test_security_options_mmlog_cannot_honour_fail_the_query_at_once(secure_broker, pki, bad, why):
    with pytest.raises(ValueError, match=why):
        ReadOptions.parse({**spark_options(secure_broker, pki), "subscribe": "t", **bad}, streaming=False)

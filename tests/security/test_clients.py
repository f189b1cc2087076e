"""Unmodified Kafka clients over SASL_SSL + SCRAM-SHA-512, mutual TLS and SASL_PLAINTEXT + PLAIN.

confluent-kafka (librdkafka), kafka-python and kcat each produce, consume in a
group and (the first two) administer, with the settings an operator would give them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

from mmlog.testing.security import PASSWORD

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")
kafka_admin = pytest.importorskip("kafka.admin")

N = 20
TIMEOUT = 20.0


def _ck_conf(broker, pki, how: str) -> dict:
    if how == "scram":
        return {"bootstrap.servers": f"127.0.0.1:{broker.listener_ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": PASSWORD,
                "ssl.ca.location": str(pki.ca)}
    return {"bootstrap.servers": f"127.0.0.1:{broker.listener_ports['SSL']}", "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca), "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key)}


def _kp_conf(broker, pki, how: str) -> dict:
    if how == "scram":
        return {"bootstrap_servers": f"127.0.0.1:{broker.listener_ports['SASL_SSL']}", "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD,
                "ssl_cafile": str(pki.ca)}
    if how == "plain":
        return {"bootstrap_servers": f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}",
                "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
                "sasl_plain_password": PASSWORD}
    return {"bootstrap_servers": f"127.0.0.1:{broker.listener_ports['SSL']}", "security_protocol": "SSL",
            "ssl_cafile": str(pki.ca), "ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)}


@pytest.mark.parametrize("how", ["scram", "mtls"])
def test_confluent_kafka_produces_consumes_in_a_group_and_administers(secure_broker, pki, how):
    conf = _ck_conf(secure_broker, pki, how)
    topic = f"ck-{how}-{uuid.uuid4().hex[:6]}"
    admin = ck_admin.AdminClient(conf)
    admin.create_topics([ck_admin.NewTopic(topic, 2, 1)])[topic].result(TIMEOUT)
    producer = ck.Producer(conf)
    for i in range(N):
        producer.produce(topic, b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(TIMEOUT) == 0
    consumer = ck.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                            "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    got = set()
    deadline = time.monotonic() + TIMEOUT
    while len(got) < N and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.add(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == {b"v%d" % i for i in range(N)}
    assert topic in admin.list_topics(timeout=TIMEOUT).topics
    assert all(b.port == int(conf["bootstrap.servers"].rpartition(":")[2])  # the listener asked on
               for b in admin.list_topics(timeout=TIMEOUT).brokers.values())


@pytest.mark.parametrize("how", ["scram", "mtls", "plain"])
def test_kafka_python_produces_consumes_in_a_group_and_administers(secure_broker, pki, how):
    conf = _kp_conf(secure_broker, pki, how)
    topic = f"kp-{how}-{uuid.uuid4().hex[:6]}"
    admin = kafka.KafkaAdminClient(**conf)
    admin.create_topics([kafka_admin.NewTopic(topic, 2, 1)])
    producer = kafka.KafkaProducer(**conf)
    for i in range(N):
        producer.send(topic, b"v%d" % i)
    producer.flush(TIMEOUT)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                   consumer_timeout_ms=int(TIMEOUT * 1000), **conf)
    got = set()
    for msg in consumer:
        got.add(msg.value)
        if len(got) == N:
            break
    consumer.commit()
    consumer.close()
    assert got == {b"v%d" % i for i in range(N)}
    assert f"g-{topic}" in str(admin.list_groups())
    admin.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("how", ["scram", "mtls"])
def test_kcat_produces_and_consumes(secure_broker, pki, how):
    conf = _ck_conf(secure_broker, pki, how)
    args = ["kcat", "-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    topic = f"kcat-{how}-{uuid.uuid4().hex[:6]}"
    lines = "".join(f"line {i}\n" for i in range(N))
    subprocess.run(args + ["-P", "-t", topic], input=lines, text=True, check=True, timeout=TIMEOUT)
    out = subprocess.run(args + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True, text=True,
                         check=True, timeout=TIMEOUT)
    assert out.stdout == lines
    out = subprocess.run(args + ["-G", f"g-{topic}", topic, "-o", "beginning", "-c", str(N), "-q"],
                         capture_output=True, text=True, check=True, timeout=TIMEOUT)
    assert sorted(out.stdout.splitlines()) == sorted(lines.splitlines())


def test_kafka_python_manages_scram_users_and_the_new_user_logs_in(secure_broker, pki):
    from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion

    conf = _kp_conf(secure_broker, pki, "scram")
    admin = kafka.KafkaAdminClient(**conf)
    try:
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("erin", "SCRAM-SHA-256", "erin-pw", iterations=4096)]) == {"erin": None}
        described = admin.describe_user_scram_credentials(["erin"])
        assert "erin" in str(described) and "4096" in str(described)
        as_erin = {**conf, "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "erin",
                   "sasl_plain_password": "erin-pw"}
        erin = kafka.KafkaAdminClient(**as_erin)
        assert isinstance(erin.list_topics(), list)
        erin.close()
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("erin", "SCRAM-SHA-256")]) == \
            {"erin": None}
    finally:
        admin.close()

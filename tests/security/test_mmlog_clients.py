"""mmlog's own Producer, Consumer and Admin over SASL_SSL (SCRAM-SHA-512) and mutual TLS, with
kafka-python's option names; users managed through the Admin client (AlterUserScramCredentials)."""

from __future__ import annotations

import uuid

import pytest

from mmlog.client import Admin, Consumer, Producer
from mmlog.client.records import TopicPartition
from mmlog.errors import ResourceNotFound, SaslAuthenticationFailed, UnacceptableCredential
from mmlog.testing.security import PASSWORD
from mmlog.testing.wait import wait_for

N = 50


def options(broker, pki, how: str) -> tuple[str, dict]:
    if how == "scram":
        return f"127.0.0.1:{broker.listener_ports['SASL_SSL']}", {
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
            "sasl_plain_password": PASSWORD, "ssl_cafile": str(pki.ca)}
    return f"127.0.0.1:{broker.listener_ports['SSL']}", {
        "security_protocol": "SSL", "ssl_cafile": str(pki.ca), "ssl_certfile": str(pki.client_cert),
        "ssl_keyfile": str(pki.client_key)}


@pytest.mark.parametrize("how", ["scram", "mtls"])
def test_mmlog_clients_produce_and_consume_in_a_group_over_tls(secure_broker, pki, how):
    bootstrap, opts = options(secure_broker, pki, how)
    topic = f"mm-{how}-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap, **opts) as admin:
        admin.create_topic(topic, partitions=2)
    with Producer(bootstrap, linger_ms=1, **opts) as producer:
        for i in range(N):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i)
        producer.flush()
    with Consumer(bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest", **opts) as consumer:
        consumer.subscribe([topic])
        got = set()
        for record in consumer:
            got.add(bytes(record.value))
            if len(got) == N:
                break
        consumer.commit()
    assert got == {b"v%d" % i for i in range(N)}


def test_a_wrong_password_raises_sasl_authentication_failed(secure_broker, pki):
    bootstrap, opts = options(secure_broker, pki, "scram")
    with pytest.raises(SaslAuthenticationFailed):
        Admin(bootstrap, **{**opts, "sasl_plain_password": "wrong"}).list_topics()


def test_unknown_security_options_are_refused():
    with pytest.raises(TypeError):
        Producer("127.0.0.1:1", sasl_password="x")
    with pytest.raises(ValueError):
        Admin("127.0.0.1:1", security_protocol="SASL_SSL", sasl_mechanism="GSSAPI")


def test_users_are_set_described_used_and_deleted_through_the_admin_client(secure_broker, pki):
    bootstrap, opts = options(secure_broker, pki, "scram")
    with Admin(bootstrap, **opts) as admin:
        admin.set_user_password("bob", "bob-secret", "SCRAM-SHA-256", iterations=8192)
        assert admin.describe_users(["bob"]) == {"bob": {"SCRAM-SHA-256": 8192}}
        with pytest.raises(UnacceptableCredential):
            admin.set_user_password("carol", "x", iterations=100)
        as_bob = {**opts, "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "bob",
                  "sasl_plain_password": "bob-secret"}
        with Admin(bootstrap, **as_bob) as bob:
            assert isinstance(bob.list_topics(), dict)
        admin.delete_user("bob", "SCRAM-SHA-256")
        with pytest.raises(ResourceNotFound):
            admin.describe_users(["bob"])
        with pytest.raises(SaslAuthenticationFailed):
            Admin(bootstrap, **as_bob).list_topics()
    stored = (secure_broker.data_dir / "credentials.json").read_text()
    assert "alice-secret" not in stored and "salted_password" not in stored


def test_twenty_megabytes_cross_tls_both_ways_intact(secure_broker, pki):
    """Enough to fill socket buffers: SSL writes that would block are retried (broker and client), fetches of
    file ranges go through the read-and-encrypt path, and every byte arrives."""
    bootstrap, opts = options(secure_broker, pki, "scram")
    topic = f"mm-bulk-{uuid.uuid4().hex[:6]}"
    values = [i.to_bytes(4, "big") * 50 for i in range(100_000)]
    with Producer(bootstrap, linger_ms=5, batch_size=1 << 20, **opts) as producer:
        producer.send_many(topic, values, partition=0)
        producer.flush()
    got = []
    with Consumer(bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20, **opts) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        wait_for(lambda: got.extend(bytes(r.value) for r in consumer.poll(timeout=1)) or len(got) >= len(values),
                 what=f"{len(values)} records", interval=0, retry=(), show=lambda: len(got))
    assert got == values

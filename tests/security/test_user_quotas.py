"""Client quotas by user: a quota set for `users/alice` holds a connection authenticated as alice
(SASL/SCRAM), and not an anonymous one with the same client id."""

from __future__ import annotations

from mmlog.client import Admin, Producer
from mmlog.testing.scrape import processors_caught_up
from mmlog.testing.security import PASSWORD

ALICE = (("user", "alice"),)


def _throttled(bootstrap: str, **security) -> int:
    """The largest throttle time a producer sending up to 64 KB with client id `shared` was told: it sends
    1 KB at a time and stops at the first throttled answer (a client held to its quota waits out every
    later one, which is half a minute at 1 KB/s, and shows nothing more)."""
    with Producer(bootstrap, client_id="shared", linger_ms=0, **security) as producer:
        for _ in range(64):
            producer.send("by-user", b"x" * 1024).get(timeout=30)
            if producer.metrics()["throttle_time_ms_max"] > 0:
                break
        return producer.metrics()["throttle_time_ms_max"]


def test_a_users_quota_throttles_that_user_and_not_an_anonymous_client(secure_broker, pki):
    plain = f"127.0.0.1:{secure_broker.listener_ports['PLAINTEXT']}"
    with Admin(plain) as admin:
        admin.create_topic("by-user", 1)
        admin.alter_client_quotas({ALICE: {"producer_byte_rate": 1024}})
        try:
            processors_caught_up(secure_broker)
            alice = _throttled(f"127.0.0.1:{secure_broker.listener_ports['SASL_SSL']}",
                               security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                               sasl_plain_username="alice", sasl_plain_password=PASSWORD, ssl_cafile=str(pki.ca))
            anonymous = _throttled(plain)
        finally:
            admin.alter_client_quotas({ALICE: {"producer_byte_rate": None}})
    assert alice > 0 and anonymous == 0

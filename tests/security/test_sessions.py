"""SASL sessions: lifetime and re-authentication (connections.max.reauth.ms), and the legacy
SaslHandshake v0 flow (bare tokens, no SaslAuthenticate)."""

from __future__ import annotations

import struct
import time

import pytest

from mmlog.protocol.messages import metadata, sasl_authenticate, sasl_handshake
from mmlog.security import scram
from mmlog.security.client import ClientSecurity
from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import PASSWORD, add_users, security_config
from tests.security.conftest import closed_by_broker, raw

REAUTH_MS = 1500


@pytest.fixture(scope="module")
def short_sessions(pki, tmp_path_factory):
    data = tmp_path_factory.mktemp("reauth") / "data"
    add_users(data)
    config = security_config(pki, connections_max_reauth_ms=REAUTH_MS)
    with EmbeddedBroker(data, processors=1, config=config) as broker:
        yield broker


def _login(broker, pki):
    peer = raw(broker, "SASL_SSL", pki)
    security = ClientSecurity.from_options("SASL_SSL", "SCRAM-SHA-512", "alice", PASSWORD, ssl_cafile=str(pki.ca))
    lifetime = security.authenticate(lambda module, version, body: peer.request(module.API_KEY, version, body, 5))
    return peer, lifetime


def _metadata(peer):
    return peer.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[], allow_auto_topic_creation=False), 5)


def test_a_session_tells_its_lifetime_and_is_closed_when_it_runs_out(short_sessions, pki):
    peer, lifetime = _login(short_sessions, pki)
    assert 0 < lifetime <= REAUTH_MS
    assert _metadata(peer).brokers
    time.sleep(REAUTH_MS / 1000 + 0.2)
    with pytest.raises((ConnectionError, OSError)):
        _metadata(peer)  # past its lifetime: closed, not answered


def test_a_connection_that_re_authenticates_lives_on(short_sessions, pki):
    peer, _ = _login(short_sessions, pki)
    for _ in range(3):
        time.sleep(REAUTH_MS / 2000)
        client = scram.ScramClient("SCRAM-SHA-512", "alice", PASSWORD)
        assert peer.request(sasl_handshake.API_KEY, 1, sasl_handshake.REQUEST(mechanism="SCRAM-SHA-512"), 5).error_code == 0
        first = peer.request(sasl_authenticate.API_KEY, 2, sasl_authenticate.REQUEST(auth_bytes=client.first()), 5)
        final = peer.request(sasl_authenticate.API_KEY, 2, sasl_authenticate.REQUEST(
            auth_bytes=client.final(bytes(first.auth_bytes))), 5)
        assert final.error_code == 0 and 0 < final.session_lifetime_ms <= REAUTH_MS
        client.verify(bytes(final.auth_bytes))
    assert _metadata(peer).brokers  # 2.25 lifetimes after the first login


def test_re_authentication_as_someone_else_is_refused(short_sessions, pki):
    peer, _ = _login(short_sessions, pki)
    peer.request(sasl_handshake.API_KEY, 1, sasl_handshake.REQUEST(mechanism="SCRAM-SHA-512"), 5)
    client = scram.ScramClient("SCRAM-SHA-512", "admin", "admin-secret")
    first = peer.request(sasl_authenticate.API_KEY, 1, sasl_authenticate.REQUEST(auth_bytes=client.first()), 5)
    final = peer.request(sasl_authenticate.API_KEY, 1, sasl_authenticate.REQUEST(
        auth_bytes=client.final(bytes(first.auth_bytes))), 5)
    assert final.error_code == 58
    assert closed_by_broker(peer)


def test_confluent_kafka_produces_across_re_authentications(short_sessions, pki):
    ck = pytest.importorskip("confluent_kafka")
    producer = ck.Producer({
        "bootstrap.servers": f"127.0.0.1:{short_sessions.listener_ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": PASSWORD,
        "ssl.ca.location": str(pki.ca)})
    delivered = []
    seen = len(short_sessions.log_lines)
    deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.1)
    assert producer.flush(10) == 0
    assert delivered and all(err is None for err in delivered)
    assert not any("expired" in line for line in short_sessions.log_lines[seen:])  # re-authenticated, not closed


def test_the_legacy_v0_flow_exchanges_bare_tokens(short_sessions, pki):
    peer = raw(short_sessions, "SASL_PLAINTEXT")
    answer = peer.request(sasl_handshake.API_KEY, 0, sasl_handshake.REQUEST(mechanism="PLAIN"), 5)
    assert answer.error_code == 0
    token = b"\0alice\0" + PASSWORD.encode()
    peer._sock.sendall(struct.pack(">i", len(token)) + token)
    assert peer._sock.recv(4) == b"\0\0\0\0"  # PLAIN's empty answer, size-prefixed
    assert _metadata(peer).brokers

"""What a secured broker refuses, and that it goes on serving afterwards with nothing appended.

Each refusal is checked on the wire: the Kafka error code a Kafka broker answers
(UNSUPPORTED_SASL_MECHANISM 33, ILLEGAL_SASL_STATE 34, SASL_AUTHENTICATION_FAILED
58), then the connection closed by the broker.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mmlog.errors import SaslAuthenticationFailed, UnsupportedSaslMechanism
from mmlog.protocol.messages import api_versions, list_offsets, metadata, produce, sasl_authenticate, sasl_handshake
from mmlog.protocol.records import build_batch
from mmlog.replication.peer import PeerConnection
from mmlog.security import scram
from mmlog.security.client import ClientSecurity
from mmlog.security.tls import client_context, principal_of
from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import add_users, security_config
from mmlog.testing.wait import wait_for
from tests.security.conftest import closed_by_broker, raw

TIMEOUT = 5.0


def _metadata(peer, topics=None):
    body = metadata.REQUEST(topics=topics, allow_auto_topic_creation=False)
    return peer.request(metadata.API_KEY, 8, body, TIMEOUT)


def _handshake(peer, mechanism: str, version: int = 1):
    return peer.request(sasl_handshake.API_KEY, version, sasl_handshake.REQUEST(mechanism=mechanism), TIMEOUT)


def _authenticate(peer, token: bytes, version: int = 1):
    return peer.request(sasl_authenticate.API_KEY, version, sasl_authenticate.REQUEST(auth_bytes=token), TIMEOUT)


def test_a_wrong_password_answers_sasl_authentication_failed_late_and_closes(secure_broker, pki):
    peer = raw(secure_broker, "SASL_SSL", pki)
    assert _handshake(peer, "SCRAM-SHA-512").error_code == 0
    client = scram.ScramClient("SCRAM-SHA-512", "alice", "not-her-password")
    server_first = _authenticate(peer, client.first())
    assert server_first.error_code == 0
    started = time.monotonic()
    answer = _authenticate(peer, client.final(bytes(server_first.auth_bytes)))
    assert answer.error_code == SaslAuthenticationFailed.code
    assert "SCRAM-SHA-512" in answer.error_message and "not-her-password" not in answer.error_message
    assert time.monotonic() - started >= 0.04  # connection.failed.authentication.delay.ms = 50
    assert closed_by_broker(peer)
    lines = [line for line in secure_broker.log_lines if "failed authentication" in line]
    assert lines and "127.0.0.1" in lines[-1] and not any("not-her-password" in line for line in secure_broker.log_lines)


def test_a_wrong_plain_password_is_refused_the_same_way(secure_broker):
    peer = raw(secure_broker, "SASL_PLAINTEXT")
    assert _handshake(peer, "PLAIN").error_code == 0
    answer = _authenticate(peer, b"\0alice\0wrong")
    assert answer.error_code == SaslAuthenticationFailed.code
    assert closed_by_broker(peer)


def test_an_unknown_user_is_refused(secure_broker):
    peer = raw(secure_broker, "SASL_PLAINTEXT")
    assert _handshake(peer, "SCRAM-SHA-256").error_code == 0
    answer = _authenticate(peer, scram.ScramClient("SCRAM-SHA-256", "nobody", "x").first())
    assert answer.error_code == SaslAuthenticationFailed.code
    assert closed_by_broker(peer)


def test_a_mechanism_not_enabled_answers_unsupported_sasl_mechanism_with_the_enabled_list(secure_broker):
    peer = raw(secure_broker, "SASL_PLAINTEXT")
    answer = _handshake(peer, "GSSAPI")
    assert answer.error_code == UnsupportedSaslMechanism.code
    assert sorted(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert closed_by_broker(peer)


def test_requests_before_authentication_close_the_connection(secure_broker):
    peer = raw(secure_broker, "SASL_PLAINTEXT")
    assert peer.request(api_versions.API_KEY, 3, api_versions.REQUEST(client_software_name="t",
                                                                       client_software_version="1"), TIMEOUT).error_code == 0
    with pytest.raises((ConnectionError, OSError)):
        _metadata(peer)


def test_a_produce_before_authentication_appends_nothing(secure_broker):
    secure = ClientSecurity.from_options("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret")
    authed = PeerConnection(("127.0.0.1", secure_broker.listener_ports["SASL_PLAINTEXT"]), "t", secure)
    authed.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "refused"}],
                                                         allow_auto_topic_creation=True), TIMEOUT)
    batch = bytes(build_batch([(None, b"x")]))
    body = produce.REQUEST(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        {"name": "refused", "partition_data": [{"index": 0, "records": batch}]}])
    peer = raw(secure_broker, "SASL_PLAINTEXT")
    with pytest.raises((ConnectionError, OSError)):
        peer.request(produce.API_KEY, 8, body, TIMEOUT)
    assert _high_watermark(authed, "refused") == 0


def _high_watermark(peer, topic: str) -> int:
    answer = peer.request(list_offsets.API_KEY, 5, list_offsets.REQUEST(replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]),
        TIMEOUT)
    return answer.topics[0].partitions[0].offset


def test_a_plaintext_client_on_a_tls_port_is_closed_and_the_broker_serves_on(secure_broker, pki):
    peer = raw(secure_broker, "PLAINTEXT")
    peer.address = ("127.0.0.1", secure_broker.listener_ports["SSL"])
    with pytest.raises((ConnectionError, OSError, TimeoutError)):
        peer.request(api_versions.API_KEY, 0, api_versions.REQUEST(), TIMEOUT)
    assert _metadata(raw(secure_broker, "SSL", pki), []).brokers  # still serving TLS


def _tls_client(broker, pki, cert, key):
    context = client_context(str(pki.ca), str(cert), str(key))
    sock = socket.create_connection(("127.0.0.1", broker.listener_ports["SSL"]), timeout=TIMEOUT)
    tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
    tls.sendall(b"\0\0\0\x0b\0\x12\0\0\0\0\0\x01\0\x01t")  # ApiVersions v0: TLS 1.3 learns of a refusal here
    return tls.recv(4)


@pytest.mark.parametrize("which", ["untrusted", "expired"])
def test_an_untrusted_or_expired_client_certificate_is_refused(secure_broker, pki, which):
    cert, key = (pki.untrusted_cert, pki.untrusted_key) if which == "untrusted" else (pki.expired_cert, pki.expired_key)
    seen = len(secure_broker.log_lines)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        got = _tls_client(secure_broker, pki, cert, key)
        if not got:
            raise ConnectionError("closed")
    # the broker's log reaches us through a reader thread
    wait_for(lambda: any("TLS handshake" in line and "failed" in line for line in secure_broker.log_lines[seen:]),
             what="the refused handshake logged")
    assert len(_tls_client(secure_broker, pki, pki.client_cert, pki.client_key)) == 4  # a good one still gets in


def test_a_client_that_does_not_trust_the_broker_fails_its_handshake(secure_broker, pki):
    context = client_context(str(pki.dir / "other-ca.pem"))
    sock = socket.create_connection(("127.0.0.1", secure_broker.listener_ports["SASL_SSL"]), timeout=TIMEOUT)
    with pytest.raises(ssl.SSLCertVerificationError):
        context.wrap_socket(sock, server_hostname="127.0.0.1")
    sock.close()


def test_describe_configs_never_shows_a_password(secure_broker):
    from mmlog.protocol.messages import describe_configs

    answer = raw(secure_broker, "PLAINTEXT").request(describe_configs.API_KEY, 1, describe_configs.REQUEST(
        resources=[{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
        include_synonyms=False), TIMEOUT)
    entries = {e.name: e for e in answer.results[0].configs}
    assert entries["ssl.keystore.location"].value and not entries["ssl.keystore.location"].is_sensitive
    assert "ssl.key.password" in entries and entries["ssl.key.password"].value is None
    assert entries["ssl.key.password"].is_sensitive


def test_mutual_tls_required_refuses_a_client_without_a_certificate(pki, tmp_path):
    config = security_config(pki, listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", ssl_client_auth="required")
    with EmbeddedBroker(tmp_path / "data", processors=1, config=config) as broker:
        context = client_context(str(pki.ca))
        sock = socket.create_connection(("127.0.0.1", broker.listener_ports["SSL"]), timeout=TIMEOUT)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
            tls.sendall(b"\0\0\0\x0b\0\x12\0\0\0\0\0\x01\0\x01t")
            if not tls.recv(4):
                raise ConnectionError("closed")
        assert len(_tls_client(broker, pki, pki.client_cert, pki.client_key)) == 4


def test_the_certificate_principal_is_the_subject_dn_most_specific_first():
    cert = {"subject": ((("organizationName", "mmlog"),), (("commonName", "alice"),))}
    assert principal_of(cert) == "CN=alice,O=mmlog"
    assert principal_of({}) is None


def test_a_stalled_handshake_blocks_no_one_else(secure_broker, pki):
    """Connections that never finish (or never start) their TLS handshake, one or more per processor,
    while other clients are served at once on every listener."""
    stalled = [socket.create_connection(("127.0.0.1", secure_broker.listener_ports[name]), timeout=TIMEOUT)
               for name in ("SSL", "SASL_SSL") * 2]
    stalled[0].sendall(b"\x16\x03\x01\x00\xff")  # half a ClientHello: OpenSSL waits for the rest
    try:
        login = {"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
        for listener, options in (("PLAINTEXT", {}), ("SSL", {}), ("SASL_SSL", login)):
            # Served: a processor held by a stalled handshake would answer none within the request TIMEOUT.
            security = ClientSecurity.from_options(listener, ssl_cafile=str(pki.ca), **options)
            peer = PeerConnection(("127.0.0.1", secure_broker.listener_ports[listener]), "t", security)
            assert _metadata(peer, []).brokers
    finally:
        for sock in stalled:
            sock.close()


def test_failure_warnings_are_capped_per_second(pki, tmp_path):
    """Sixty wrong passwords at once, on one processor: at most ten warnings a second, the rest counted
    in a summary line, so every failure is either logged or counted (however slow the machine is)."""
    add_users(tmp_path / "data")
    with EmbeddedBroker(tmp_path / "data", processors=1, config=security_config(pki)) as broker:
        peers = [raw(broker, "SASL_PLAINTEXT") for _ in range(60)]
        for peer in peers:
            assert _handshake(peer, "PLAIN").error_code == 0
        with ThreadPoolExecutor(len(peers)) as pool:  # all at once: the held-back answers overlap
            codes = list(pool.map(lambda peer: _authenticate(peer, b"\0alice\0wrong").error_code, peers))
        assert codes == [SaslAuthenticationFailed.code] * len(peers)
        time.sleep(1.1)  # a failure in the next second (not a wait for an outcome): it writes the last one's summary
        assert _handshake(raw(broker, "SASL_PLAINTEXT"), "GSSAPI").error_code == UnsupportedSaslMechanism.code
        wait_for(lambda: any("more failed authentications were not logged" in line for line in broker.log_lines),
                 what="the summary of the failures not logged")
        logged = sum("failed authentication from" in line and "alice" in line for line in broker.log_lines)
        counted = [int(m.group(1)) for line in broker.log_lines
                   if (m := re.search(r"(\d+) more failed authentications were not logged", line))]
    assert counted and logged + sum(counted) == len(peers)  # some dropped, none unaccounted


def test_listener_overrides_ask_one_listener_for_certificates_and_enable_plain_on_another(pki, tmp_path):
    config = security_config(pki, listeners="SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                             listener_security_protocol_map="SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
                             ssl_client_auth="none", sasl_enabled_mechanisms="SCRAM-SHA-512")
    config.update({"listener.name.mtls.ssl.client.auth": "required",
                   "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN"})
    add_users(tmp_path / "data")
    with EmbeddedBroker(tmp_path / "data", processors=1, config=config) as broker:
        anonymous = {"security_protocol": "SSL", "ssl_cafile": str(pki.ca)}
        ssl_peer = PeerConnection(("127.0.0.1", broker.listener_ports["SSL"]), "t", ClientSecurity.from_options(
            **anonymous))
        assert _metadata(ssl_peer, []).brokers  # no certificate asked for here
        mtls_peer = PeerConnection(("127.0.0.1", broker.listener_ports["MTLS"]), "t", ClientSecurity.from_options(
            **anonymous))
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            _metadata(mtls_peer, [])
        peer = raw(broker, "SASL_PLAINTEXT")
        answer = _handshake(peer, "SCRAM-SHA-512")
        assert answer.error_code == UnsupportedSaslMechanism.code and answer.mechanisms == ["PLAIN"]

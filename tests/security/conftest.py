"""The session's PKI (mmlog/testing/security.py makes it with the `openssl` command), a broker with every kind
of listener, and bare connections to one listener."""

from __future__ import annotations

import shutil
import ssl

import pytest

from mmlog.replication.peer import PeerConnection
from mmlog.security.client import ClientSecurity
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON
from mmlog.testing.security import Pki, add_users, make_pki, security_config


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    return make_pki(tmp_path_factory.mktemp("pki"))


def raw(broker, listener: str, pki: Pki | None = None, **options) -> PeerConnection:
    """A bare request/response connection to one listener (TLS and SASL as options say, nothing implied)."""
    protocol = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SSL"}[listener]
    security = ClientSecurity.from_options(protocol, ssl_cafile=str(pki.ca) if pki else None, **options)
    return PeerConnection(("127.0.0.1", broker.listener_ports[listener]), "test", security)


def closed_by_broker(peer: PeerConnection, timeout: float = 5.0) -> bool:
    """Whether the broker closed the connection (EOF or reset within timeout)."""
    peer._sock.settimeout(timeout)
    try:
        return peer._sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


@pytest.fixture(scope="module")
def secure_broker(pki, tmp_path_factory):
    """One broker per test module with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners and users
    alice and admin; `.listener_ports[NAME]` is each listener's port. Its metrics are on (what a test waits for)."""
    data = tmp_path_factory.mktemp("secure") / "data"
    add_users(data)
    with EmbeddedBroker(data, processors=2, config={**security_config(pki), **METRICS_ON}) as broker:
        yield broker

"""Certificates made with the `openssl` command for the session, and a broker with every kind of listener.

The PKI: a CA; the broker's certificate for 127.0.0.1 / localhost; a client
certificate (CN=alice) for mutual TLS; a client certificate signed by another CA
(untrusted) and one that expired yesterday. EC P-256 keys: each takes milliseconds.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from mmlog.replication.peer import PeerConnection
from mmlog.security import credentials, scram
from mmlog.security.client import ClientSecurity
from mmlog.testing import EmbeddedBroker
from tests.metrics.scrape import METRICS_ON

PASSWORD = "alice-secret"
USERS = {"alice": PASSWORD, "admin": "admin-secret"}


@dataclass
class Pki:
    dir: Path
    ca: Path
    server: Path  # cert chain + key, PEM (ssl.keystore.location)
    client_cert: Path
    client_key: Path
    untrusted_cert: Path
    untrusted_key: Path
    expired_cert: Path
    expired_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _key_and_csr(d: Path, name: str, subject: str) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", subject, cwd=d)


def _sign(d: Path, name: str, ca: str, days: int, ext: str | None = None) -> None:
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", str(days)]
    if ext:
        (d / f"{name}.ext").write_text(ext)
        args += ["-extfile", f"{name}.ext"]
    _openssl(*args, cwd=d)


def make_pki(d: Path) -> Pki:
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                 f"{ca}.key", "-out", f"{ca}.pem", "-subj", f"/CN={ca}", "-days", "2", cwd=d)
    _key_and_csr(d, "server", "/CN=localhost")
    _sign(d, "server", "ca", 2, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (d / "server-keystore.pem").write_bytes((d / "server.pem").read_bytes() + (d / "server.key").read_bytes())
    _key_and_csr(d, "client", "/O=mmlog/CN=alice")
    _sign(d, "client", "ca", 2)
    _key_and_csr(d, "untrusted", "/CN=mallory")
    _sign(d, "untrusted", "other-ca", 2)
    _key_and_csr(d, "expired", "/CN=alice")
    _sign(d, "expired", "ca", -1)
    return Pki(d, d / "ca.pem", d / "server-keystore.pem", d / "client.pem", d / "client.key", d / "untrusted.pem",
               d / "untrusted.key", d / "expired.pem", d / "expired.key")


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    return make_pki(tmp_path_factory.mktemp("pki"))


def add_users(data_dir: Path, users: dict[str, str] = USERS, iterations: int = scram.MIN_ITERATIONS) -> None:
    """Standalone: write SCRAM credentials (both mechanisms) into the broker's store before it starts."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = credentials.path_in(data_dir)
    store = credentials.load(path)
    for name, password in users.items():
        for mechanism in scram.MECHANISMS:
            credentials.upsert(store, name, mechanism, scram.credential(mechanism, password, iterations))
    credentials.save(path, store)


def security_config(pki: Pki, **more) -> dict:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.server), "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "requested", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": "50", "group.initial.rebalance.delay.ms": "0",
    }
    config.update({k.replace("_", "."): v for k, v in more.items()})
    return config


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

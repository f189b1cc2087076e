"""TLS contexts from PEM files (stdlib `ssl`), for the broker's listeners and for clients.

Kafka's keystore and truststore settings map to PEM files: `ssl.keystore.location`
holds the certificate chain and private key (`ssl.key.password` if the key is
encrypted), `ssl.truststore.location` the CA certificates peers are checked
against. `ssl.client.auth` required/requested/none maps to CERT_REQUIRED /
CERT_OPTIONAL / CERT_NONE. A broker whose files do not load stops at start with
the file named, instead of failing each handshake.

Kernel TLS: OpenSSL 3 can hand the record layer to the kernel (`SSL_OP_ENABLE_KTLS`,
bit 3; Python names it `ssl.OP_ENABLE_KTLS` from 3.12). With it on and the kernel's
`tls` module present, `os.sendfile` on the socket sends encrypted file bytes
again. `ktls_active(sock)` tells whether a handshaken socket got it for sending;
where it did not, file ranges go through SSL writes (processors/sendfile.py).
"""

from __future__ import annotations

import socket
import ssl

OP_ENABLE_KTLS = getattr(ssl, "OP_ENABLE_KTLS", 1 << 3)  # OpenSSL 3's SSL_OP_ENABLE_KTLS
SOL_TLS, TLS_TX = 282, 1  # linux/socket.h, linux/tls.h
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """A PEM file that does not load, or a setting OpenSSL refuses."""


def _versions(context: ssl.SSLContext, protocols: str) -> None:
    names = sorted((p.strip() for p in protocols.split(",") if p.strip()), key=lambda n: _VERSIONS[n])
    context.minimum_version = _VERSIONS[names[0]]
    context.maximum_version = _VERSIONS[names[-1]]


def _load(context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str | None, cafile: str | None,
          ciphers: str) -> None:
    try:
        if certfile:
            context.load_cert_chain(certfile, keyfile or None, password or None)
        if cafile:
            context.load_verify_locations(cafile)
        elif context.verify_mode != ssl.CERT_NONE:
            context.load_default_certs()
        if ciphers:
            context.set_ciphers(ciphers)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"{exc}") from exc


def server_context(config, listener, ktls: bool = True) -> ssl.SSLContext:
    """A TLS listener's context from a BrokerConfig's ssl.* settings (listener.name.<name>.ssl.* first).
    On a SASL_SSL listener no client certificate is asked for unless that listener's own
    ssl.client.auth says so: SASL names the client (Kafka's rule)."""
    name = listener.name
    setting = lambda key: config.for_listener(name, key)  # noqa: E731
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, setting("ssl.enabled.protocols"))
    sasl_default = listener.sasl and not config.listener_sets(name, "ssl.client.auth")
    context.verify_mode = ssl.CERT_NONE if sasl_default else CLIENT_AUTH[setting("ssl.client.auth")]
    _load(context, setting("ssl.keystore.location"), None, setting("ssl.key.password"),
          setting("ssl.truststore.location"), setting("ssl.cipher.suites"))
    if ktls:
        context.options |= OP_ENABLE_KTLS
    return context


def client_context(cafile: str | None = None, certfile: str | None = None, keyfile: str | None = None,
                   password: str | None = None, check_hostname: bool = True, protocols: str = "TLSv1.2,TLSv1.3",
                   ciphers: str = "") -> ssl.SSLContext:
    """A client's context: the CA to trust, and a certificate of its own for mutual TLS."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = check_hostname
    _versions(context, protocols)
    _load(context, certfile or "", keyfile, password, cafile, ciphers)
    return context


def peer_context(config) -> ssl.SSLContext:
    """What a broker presents when it connects to another broker's TLS listener: its own keystore
    (for peers that require client certificates) and its truststore."""
    return client_context(config["ssl.truststore.location"] or None, config["ssl.keystore.location"], None,
                          config["ssl.key.password"],
                          check_hostname=config["ssl.endpoint.identification.algorithm"] == "https",
                          protocols=config["ssl.enabled.protocols"], ciphers=config["ssl.cipher.suites"])


def ktls_active(sock: socket.socket) -> bool:
    """Whether the kernel encrypts what is written to this socket (so sendfile works on it). The TX
    direction itself is asked (SOL_TLS / TLS_TX answers only once its keys are set), not the TCP ULP:
    with receive-only offload, bytes written around OpenSSL would leave in clear text."""
    try:
        sock.getsockopt(SOL_TLS, TLS_TX, 64)
        return True
    except OSError:
        return False


def principal_of(cert: dict | None) -> str | None:
    """Kafka's default SSL principal: the subject's distinguished name, `CN=...,OU=...,O=...` (RFC 2253
    order: most specific first); None without a client certificate."""
    if not cert or "subject" not in cert:
        return None
    rdns = [f"{_SHORT.get(k, k)}={v}" for rdn in reversed(cert["subject"]) for k, v in rdn]
    return ",".join(rdns)


_SHORT = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
          "stateOrProvinceName": "ST", "countryName": "C", "domainComponent": "DC", "emailAddress": "EMAILADDRESS"}

"""A client's side of a secured connection: TLS wrapping and the SASL exchange (v1: SaslHandshake then
SaslAuthenticate), for any blocking request/response connection.

One `ClientSecurity` serves mmlog's Producer/Consumer/Admin (kafka-python's option
names: security_protocol, sasl_mechanism, sasl_plain_username/password, ssl_cafile,
ssl_certfile, ssl_keyfile) and the broker's own connections to peers
(inter.broker.listener.name). `authenticate(call)` runs the exchange over
`call(api_module, version, body) -> response`, so it does no I/O of its own.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from mmlog.config.security_protocols import PROTOCOLS, SASL_PROTOCOLS, TLS_PROTOCOLS
from mmlog.errors import SaslAuthenticationFailed, error_for_code
from mmlog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from mmlog.protocol.messages import sasl_authenticate, sasl_handshake
from mmlog.security import sasl, tls


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    context: ssl.SSLContext | None = None
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @classmethod
    def from_options(cls, security_protocol: str = "PLAINTEXT", sasl_mechanism: str = "PLAIN",
                     sasl_plain_username: str | None = None, sasl_plain_password: str | None = None,
                     ssl_cafile: str | None = None, ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                     ssl_password: str | None = None, ssl_check_hostname: bool = True,
                     ssl_context: ssl.SSLContext | None = None) -> "ClientSecurity":
        """kafka-python's option names; a ValueError names what is wrong."""
        protocol = security_protocol.upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"security_protocol {security_protocol!r}: want one of {', '.join(PROTOCOLS)}")
        if protocol.startswith("SASL_"):
            if sasl_mechanism not in sasl.MECHANISMS:
                raise ValueError(f"sasl_mechanism {sasl_mechanism!r}: want one of {', '.join(sasl.MECHANISMS)}")
            if not sasl_plain_username or sasl_plain_password is None:
                raise ValueError(f"{protocol} needs sasl_plain_username and sasl_plain_password")
        context = ssl_context
        if context is None and protocol in TLS_PROTOCOLS:
            context = tls.client_context(ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password,
                                         check_hostname=ssl_check_hostname)
        return cls(protocol, context, sasl_mechanism, sasl_plain_username or "", sasl_plain_password or "")

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """The socket as this protocol speaks on it (TLS handshake done, blocking)."""
        if not self.tls:
            return sock
        return self.context.wrap_socket(sock, server_hostname=host)

    def secure(self, sock: socket.socket, host: str, client_id: str = "mmlog") -> socket.socket:
        """Wrap a connected blocking socket and authenticate on it (its timeout bounds each step)."""
        sock = self.wrap(sock, host)
        if self.sasl:
            ids = iter(range(1, 1 << 31))
            self.authenticate(lambda module, version, body: blocking_call(sock, module.API_KEY, version, body,
                                                                          client_id, next(ids)))
        return sock

    def authenticate(self, call) -> str | None:
        """The SASL exchange over call(module, version, body); SaslAuthenticationFailed (or the broker's
        error) when refused. Returns None (no SASL) or the session lifetime in ms (0: forever)."""
        if not self.sasl:
            return None
        answer = call(sasl_handshake, 1, sasl_handshake.REQUEST(mechanism=self.mechanism))
        if answer.error_code:
            raise error_for_code(answer.error_code, f"SASL mechanism {self.mechanism} refused; the broker "
                                                    f"enables {', '.join(answer.mechanisms)}")
        steps = sasl.client_tokens(self.mechanism, self.username, self.password)
        token, lifetime = next(steps), 0
        while True:
            response = call(sasl_authenticate, 1, sasl_authenticate.REQUEST(auth_bytes=token))
            if response.error_code:
                raise error_for_code(response.error_code, response.error_message or "")
            lifetime = response.session_lifetime_ms
            try:
                token = steps.send(bytes(response.auth_bytes))
            except StopIteration:
                return lifetime
            except sasl.AuthenticationFailed as exc:
                raise SaslAuthenticationFailed(str(exc)) from exc


# Kafka client property -> kafka-python option (what `from_options` takes). The keystore is a PEM file holding
# the certificate chain and key (ssl.keystore.type=PEM), as the broker's.
KAFKA_PROPERTIES = {
    "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
    "ssl.truststore.location": "ssl_cafile", "ssl.ca.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile", "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password",
}
IGNORED_PROPERTIES = {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"}


def options_from_properties(props: dict) -> dict:
    """Kafka client properties (a --command-config file, Spark's kafka.* options without the prefix) as
    `ClientSecurity.from_options` keywords. sasl.jaas.config gives the username and password;
    ssl.endpoint.identification.algorithm="" turns off the host name check. ValueError for a security
    property mmlog does not honour (a JKS store, a login module other than PLAIN/SCRAM)."""
    out = {}
    for name, value in props.items():
        value = str(value)
        if name in KAFKA_PROPERTIES:
            out[KAFKA_PROPERTIES[name]] = value
        elif name == "sasl.jaas.config":
            if "PlainLoginModule" not in value and "ScramLoginModule" not in value:
                raise ValueError("sasl.jaas.config: only PlainLoginModule and ScramLoginModule are supported")
            out["sasl_plain_username"], out["sasl_plain_password"] = sasl.parse_jaas(value)
        elif name == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = value.lower() == "https"
        elif name in IGNORED_PROPERTIES:
            if value.upper() != IGNORED_PROPERTIES[name]:
                raise ValueError(f"{name}={value}: only PEM files are supported")
        elif name.startswith(("ssl.", "sasl.")):
            raise ValueError(f"{name}: not a security setting mmlog's clients support")
    return out


def blocking_call(sock: socket.socket, api_key: int, version: int, body, client_id: str, correlation: int):
    """One request and its response on a blocking socket (the SASL exchange before any pipelining)."""
    sock.sendall(encode_request(RequestHeader(api_key, version, correlation, client_id), body))
    reader = FrameReader()
    while (frame := reader.next_frame()) is None:
        n = sock.recv_into(reader.get_buffer())
        if n == 0:
            raise ConnectionResetError("the broker closed the connection during authentication")
        reader.buffer_updated(n)
    got, response = decode_response(api_key, version, frame)
    if got != correlation:
        raise ConnectionResetError(f"correlation id {got}, expected {correlation}")
    return response


def inter_broker(config) -> ClientSecurity:
    """How this broker connects to its peers' inter.broker.listener.name (a BrokerConfig)."""
    listener = config.inter_broker_listener
    context = tls.peer_context(config) if listener.tls else None
    username = password = ""
    if listener.sasl:
        username, password = sasl.parse_jaas(config["sasl.jaas.config"])
    return ClientSecurity(listener.protocol, context, config["sasl.mechanism.inter.broker.protocol"], username,
                          password)

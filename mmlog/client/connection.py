"""A blocking connection to one broker, speaking the Kafka protocol through mmlog's codec.

The socket side of the sans-IO codec for clients: it frames requests with
`encode_request`, reads responses with the same `FrameReader` the broker uses,
and matches them to requests by correlation id. Requests may be pipelined
(`send` several, then `receive` in order); `request` does one round trip.
"""

from __future__ import annotations

import itertools
import socket
import time
from typing import Any

from mmlog.errors import KafkaError, RequestTimedOut
from mmlog.protocol import APIS, FrameReader, ProtocolError, RequestHeader, decode_response, encode_request
from mmlog.security.client import ClientSecurity


class ConnectionClosed(KafkaError):
    """The broker closed the connection (or it could not be opened)."""

    code = -1
    retriable = True


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """'host:port,host2:port2' (IPv6 in brackets) -> [(host, port), ...]."""
    out = []
    for item in filter(None, (p.strip() for p in bootstrap.split(","))):
        host, colon, port = item.rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError(f"bad bootstrap address {item!r}: want HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("empty bootstrap address")
    return out


def connect(host: str, port: int, timeout: float, security: ClientSecurity | None = None,
            client_id: str = "mmlog") -> socket.socket:
    """A TCP connection to a broker with Nagle off, TLS-wrapped and SASL-authenticated as `security` says
    (blocking, within timeout); ConnectionClosed if it cannot be made in time, the broker's SASL error
    (SaslAuthenticationFailed, UnsupportedSaslMechanism) if it refuses us."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise ConnectionClosed(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if security is not None and security.protocol != "PLAINTEXT":
        try:
            sock = security.secure(sock, host, client_id)
        except KafkaError:
            sock.close()
            raise
        except (OSError, ProtocolError) as exc:
            sock.close()
            raise ConnectionClosed(f"cannot secure the connection to {host}:{port} ({security.protocol}): "
                                   f"{exc}") from exc
    return sock


class BrokerConnection:
    """One TCP connection to a broker, used from one thread."""

    def __init__(self, host: str, port: int, *, client_id: str = "mmlog", timeout: float = 30.0,
                 connect_timeout: float = 10.0, security: ClientSecurity | None = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        self.sock = connect(host, port, connect_timeout, security, client_id)
        self.sock.settimeout(timeout)
        self._ids = itertools.count(1)
        self._reader = FrameReader(max_frame_size=1 << 30)
        self._inflight: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    def send(self, api_key: int, version: int, body: Any, expect_response: bool = True) -> int:
        """Send a request; return its correlation id."""
        correlation_id = next(self._ids)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), body)
        self.send_raw(frame)
        if expect_response:
            self._inflight.append((correlation_id, api_key, version))
        return correlation_id

    def send_raw(self, data) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise ConnectionClosed(f"send to {self.host}:{self.port} failed: {exc}") from exc

    def receive(self) -> Any:
        """The response to the oldest request in flight."""
        correlation_id, api_key, version = self._inflight.pop(0)
        got, body = decode_response(api_key, version, self.receive_frame())
        if got != correlation_id:
            raise ConnectionClosed(f"correlation id {got}, expected {correlation_id}")
        return body

    def receive_frame(self, timeout: float | None = None) -> memoryview:
        """The next whole response frame (without its size prefix)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            frame = self._reader.next_frame()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOut(f"no response from {self.host}:{self.port}")
            self.sock.settimeout(left)
            try:
                n = self.sock.recv_into(self._reader.get_buffer())
            except socket.timeout as exc:
                raise RequestTimedOut(f"no response from {self.host}:{self.port}") from exc
            except OSError as exc:
                raise ConnectionClosed(f"{self.host}:{self.port}: {exc}") from exc
            if n == 0:
                raise ConnectionClosed(f"{self.host}:{self.port} closed the connection")
            self._reader.buffer_updated(n)

    def request(self, api_key: int, version: int | None = None, body: Any = None, **fields: Any) -> Any:
        """One round trip. Without a version, the highest this codec knows; fields build the body."""
        api = APIS[api_key]
        version = api.max_version if version is None else version
        if body is None:
            body = api.request(**fields)
        self.send(api_key, version, body)
        return self.receive()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "BrokerConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

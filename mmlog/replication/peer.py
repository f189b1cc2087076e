"""A blocking request/response connection from this broker to another (or to itself).

What the replica fetcher and the transaction coordinator's marker sender share:
one socket, opened on first use, one request at a time, responses read through the
same sans-IO framer the broker reads requests with. Any error leaves it closed;
the next request opens it again.

It speaks the protocol of the peer's inter.broker.listener.name
(`security.client.inter_broker`): TLS with the broker's own keystore and
truststore, then SASL with its sasl.jaas.config login, before the first request.
"""

from __future__ import annotations

import socket

from mmlog.protocol import FrameReader, ProtocolError, RequestHeader, decode_response, encode_request
from mmlog.security.client import ClientSecurity

CONNECT_TIMEOUT_S = 10.0


class PeerConnection:
    """Requests to one broker address, one at a time (not thread-safe: one user thread)."""

    def __init__(self, address: tuple[str, int], client_id: str, security: ClientSecurity | None = None) -> None:
        self.address = address
        self.client_id = client_id
        self.security = security or ClientSecurity()
        self._sock: socket.socket | None = None
        self._reader: FrameReader | None = None
        self._correlation = 0

    def request(self, api_key: int, version: int, body, timeout: float):
        """Send one request and wait at most `timeout` s for its response body."""
        try:
            if self._sock is None:
                self._connect()
            return self._call(api_key, version, body, timeout)
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        sock = socket.create_connection(self.address, timeout=CONNECT_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock  # closed by close() if securing it fails
        self._sock = self.security.secure(sock, self.address[0], self.client_id)
        self._reader = FrameReader()

    def _call(self, api_key: int, version: int, body, timeout: float):
        # One socket for the whole exchange: another thread may close() the connection meanwhile (a fetch
        # plan that no longer follows this leader); the exchange then fails as a closed socket does, with
        # an OSError the caller takes as an event, never on a socket attribute gone to None.
        sock = self._sock
        if sock is None:
            raise ConnectionError(f"connection to {self.address[0]}:{self.address[1]} closed")
        sock.settimeout(timeout)
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        sock.sendall(encode_request(RequestHeader(api_key, version, self._correlation, self.client_id), body))
        correlation, response = decode_response(api_key, version, self._receive(sock))
        if correlation != self._correlation:
            raise ProtocolError(f"correlation id {correlation}, expected {self._correlation}")
        return response

    def _receive(self, sock: socket.socket):
        reader = self._reader
        while (frame := reader.next_frame()) is None:
            n = sock.recv_into(reader.get_buffer())
            if n == 0:
                raise ConnectionError(f"broker {self.address[0]}:{self.address[1]} closed the connection")
            reader.buffer_updated(n)
        return frame

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

"""Listening TCP sockets, bound once in the main process: the Kafka listeners (accepted from only there)
and the HTTP listeners (mmlog/web)."""

from __future__ import annotations

import socket


def bind(host: str, port: int, backlog: int = 4096) -> socket.socket:
    """A non-blocking listening TCP socket on host:port (IPv6 if host has a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock

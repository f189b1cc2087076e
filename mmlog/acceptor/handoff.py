"""Handing accepted sockets to processors over Unix SEQPACKET pairs with SCM_RIGHTS.

The acceptor sends each accepted socket's descriptor as ancillary data; the
processor receives a new descriptor for the same connection, and the acceptor
closes its own. A SEQPACKET pair keeps each message whole and tells the processor
(by EOF) when the acceptor has gone, which is its cue to shut down.
"""

from __future__ import annotations

import socket


def channel_pair() -> tuple[socket.socket, socket.socket]:
    """(acceptor end, processor end)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def hand_off(channel: socket.socket, conn: socket.socket) -> None:
    """Pass conn to the processor at the other end of channel, then close our copy."""
    try:
        socket.send_fds(channel, [b"c"], [conn.fileno()])
    finally:
        conn.close()

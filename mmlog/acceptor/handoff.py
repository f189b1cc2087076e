"""Handing accepted sockets to processors over Unix SEQPACKET pairs with SCM_RIGHTS.

The acceptor sends each accepted socket's descriptor as ancillary data, with the
connection's ticket in the broker's connection table and the index of the
listener it came in on (in `listeners` order) as the message (`HANDOFF`: uint32,
uint8), so the processor can report the close and knows the connection's security
protocol; the processor receives a new descriptor
for the same connection, and the acceptor closes its own. A SEQPACKET pair keeps
each message whole and tells the processor (by EOF) when the acceptor has gone,
which is its cue to shut down.
"""

from __future__ import annotations

import socket

from mmlog.ipc.connection_table import HANDOFF


def channel_pair() -> tuple[socket.socket, socket.socket]:
    """(acceptor end, processor end)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def hand_off(channel: socket.socket, conn: socket.socket, ticket: int, listener: int = 0) -> None:
    """Pass conn to the processor at the other end of channel, then close our copy.

    If it cannot be sent (the processor is backed up or gone: OSError), conn stays open for another."""
    socket.send_fds(channel, [HANDOFF.pack(ticket, listener)], [conn.fileno()])
    conn.close()

"""The connections the acceptor hands a processor, made `Connection`s.

Each comes as one message on the processor's hand-off socket: its ticket in the connection table and
the index of the listener it arrived on (`ipc/connection_table.HANDOFF`), with its descriptor. A TLS
listener's socket is wrapped here, its handshake left to the loop; a SASL listener's connection gets
a `SaslSession` that dispatch gates its requests on.
"""

from __future__ import annotations

import socket
import ssl
from typing import Iterator

from mmlog.config.broker import BrokerConfig
from mmlog.ipc.connection_table import HANDOFF
from mmlog.processors.connection import Connection
from mmlog.processors.memory import Allowance, ConnectionBudget, connection_limit
from mmlog.processors.sasl import SaslSession
from mmlog.security import tls


class Intake:
    """A processor's end of the hand-off socket (non-blocking; made after the fork: it loads TLS keys)."""

    def __init__(self, handoff: socket.socket, config: BrokerConfig, memory: Allowance) -> None:
        self.handoff = handoff
        handoff.setblocking(False)
        self.listeners = config.listeners  # the hand-off message names one by its index here
        self.tls_contexts: dict[str, ssl.SSLContext] = {  # by listener name
            lst.name: tls.server_context(config, lst) for lst in self.listeners if lst.tls}
        self.max_frame = config["socket.request.max.bytes"]
        self.memory = memory
        self.connection_limit = connection_limit(self.max_frame, memory.pool.limit)
        self.closed = False  # the acceptor went away

    def take(self) -> Iterator[Connection]:
        """The connections handed off and not taken yet, each made as its message is read; `closed` is
        set when the hand-off socket ended."""
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(self.handoff, 16, 64)  # one message: a ticket and its socket
            except BlockingIOError:
                return
            except OSError:
                fds = []
            if not fds:
                self.closed = True
                return
            ticket, index = HANDOFF.unpack(msg) if len(msg) == HANDOFF.size else (-1, 0)
            listener = self.listeners[index]
            for fd in fds:
                sock = socket.socket(fileno=fd)
                if listener.tls:
                    sock.setblocking(False)
                    sock = self.tls_contexts[listener.name].wrap_socket(sock, server_side=True,
                                                                        do_handshake_on_connect=False)
                budget = ConnectionBudget(self.memory, self.connection_limit)
                yield Connection(sock, self.max_frame, budget, ticket, listener.name,
                                 SaslSession() if listener.sasl else None)

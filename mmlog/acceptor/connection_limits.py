"""max.connections and max.connections.per.ip: which accepted connections the supervisor keeps.

As Kafka's acceptor does for a client over its per-address limit, a connection
over either limit is closed as soon as it is accepted (Kafka blocks the acceptor
at max.connections instead; closing at once tells the client now rather than
leaving it in the listen backlog). Counts go up when a connection is handed to
a processor and down when that processor closes it, which it reports through
the shared `ConnectionTable`. The supervisor collects those reports only when a
limit would refuse a connection (and once per loop turn), so an accept costs a
few dict operations and no system call beyond accept itself; nothing here
touches the disk or ZooKeeper. Host names in max.connections.per.ip.overrides
are resolved once, at start.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

from mmlog.config.broker import BROKER_SETTINGS, BrokerConfig, parse_connection_overrides
from mmlog.ipc.connection_table import ConnectionTable

log = logging.getLogger("mmlog.broker")


def resolve_overrides(value: str) -> dict[str, int]:
    """Per-address limits by IP: names resolved now (every address they have), IPs taken as written."""
    out = {}
    for host, limit in parse_connection_overrides(value).items():
        try:
            out[str(ipaddress.ip_address(host))] = limit
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s); ignored", host, exc)
            continue
        for info in infos:
            out[info[4][0]] = limit
    return out


class ConnectionLimits:
    """Open connections in all and per client address; tickets in the shared table (supervisor side)."""

    def __init__(self, config: BrokerConfig, table: ConnectionTable) -> None:
        self.config = config
        self.reconfigure({})
        self.table = table
        self.open = 0
        self.by_ip: dict[str, int] = {}
        self._owner: dict[int, tuple[str, int]] = {}  # ticket -> (address, processor slot; -1 before hand-off)
        self._free: list[int] = []
        self._used = 0  # tickets below this have been handed out at least once
        self.refused = 0

    def reconfigure(self, dynamic: dict[str, str]) -> None:
        """Take the limits from the dynamic broker configs in force (config/dynamic.py), else server.properties."""
        def value(name):
            return BROKER_SETTINGS[name].parse(dynamic[name]) if name in dynamic else self.config[name]

        self.max_total = value("max.connections")
        self.per_ip = value("max.connections.per.ip")
        self.overrides = resolve_overrides(value("max.connections.per.ip.overrides"))

    def admit(self, ip: str) -> int | None:
        """A ticket for a new connection from `ip`, or None when a limit refuses it."""
        if ip.startswith("::ffff:") and "." in ip:
            ip = ip[7:]  # an IPv4 client on a dual-stack listener counts as its IPv4 address
        if self._over(ip):
            self.collect()  # closes reported since the last collection may make room
            if self._over(ip):
                self.refused += 1
                return None
        ticket = self._free.pop() if self._free else self._used
        if ticket == self._used:
            self._used += 1
        self.table.opened(ticket)
        self._owner[ticket] = (ip, -1)
        self.by_ip[ip] = self.by_ip.get(ip, 0) + 1
        self.open += 1
        return ticket

    def handed(self, ticket: int, slot: int) -> None:
        """The connection of `ticket` went to processor `slot` (freed with it if that processor dies)."""
        self._owner[ticket] = (self._owner[ticket][0], slot)

    def forget(self, ticket: int) -> None:
        """The connection of `ticket` was closed here (or by a processor that has been reaped)."""
        ip, _ = self._owner.pop(ticket)
        count = self.by_ip[ip] - 1
        if count:
            self.by_ip[ip] = count
        else:
            del self.by_ip[ip]
        self.open -= 1
        self.table.free(ticket)
        self._free.append(ticket)

    def collect(self) -> int:
        """Stop counting the connections processors have closed; return how many."""
        closed = self.table.closed_tickets(self._used)
        for ticket in closed.tolist():
            self.forget(ticket)
        return len(closed)

    def reclaim(self, slot: int) -> int:
        """A processor died: its connections died with it; return how many."""
        tickets = [t for t, (_, s) in self._owner.items() if s == slot]
        for ticket in tickets:
            self.forget(ticket)
        return len(tickets)

    def _over(self, ip: str) -> bool:
        return (self.open >= self.max_total or self.by_ip.get(ip, 0) >= self.overrides.get(ip, self.per_ip)
                or (not self._free and self._used >= self.table.capacity))

"""The group member's connection to its coordinator: FindCoordinator, connecting, timeouts, forgetting it.

A mixin of `GroupMembership` (group.py). The member's own `Channel` in the consumer's selector,
never shared with fetches: a JoinGroup parks at the coordinator for a whole rebalance."""

from __future__ import annotations

import logging
import time

from mmlog.client.channel import Channel
from mmlog.client.cluster import BrokerInfo
from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.group_states import JOINING, SYNCING
from mmlog.errors import KafkaError, error_for_code
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import find_coordinator

log = logging.getLogger("mmlog.client.group")

FIND_COORDINATOR_VERSION = 2


class CoordinatorConnection:
    """Finds the group's coordinator and keeps one channel to it, with backoff between attempts."""

    def ensure_coordinator(self, now: float) -> Channel | None:
        """The connection to the coordinator, looking it up and connecting if needed (None: backing off)."""
        if self.channel is not None and not self.channel.closed:
            return self.channel
        if now < self._coordinator_retry_at:
            return None
        self.sweep()  # a failed channel's fd leaves the selector before a new socket can reuse it
        try:
            if self.coordinator is None:
                self.coordinator = self._find_coordinator()
                log.debug("group %s: coordinator is node %d at %s", self.group_id, self.coordinator.node_id,
                          self.coordinator.address)
            c = self.coordinator
            self.channel = Channel(c.node_id, c.host, c.port, client_id=self.client_id,
                                   connect_timeout=min(self.request_timeout, 5.0), security=self._cluster.security)
        except (KafkaError, OSError, ProtocolError) as exc:
            self._note_failure(exc)
            self.coordinator = None
            self._coordinator_retry_at = time.monotonic() + self._coordinator_delay
            self._coordinator_delay = min(self._coordinator_delay * 2, self.backoff_max)
            return None
        self._coordinator_delay = self.retry_backoff
        self._registered = self.channel.events()
        self._selector.register(self.channel.sock, self._registered, self.channel)
        with self._lock:
            if self._target is not None:
                self._target = (c.host, c.port) + self._target[2:]
        return self.channel

    def coordinator_wait(self, now: float) -> float:
        return max(0.0, self._coordinator_retry_at - now)

    def _find_coordinator(self) -> BrokerInfo:
        candidates = [(b.host, b.port) for b in self._cluster.brokers.values()] + self._cluster.bootstrap
        last: BaseException | None = None
        for host, port in dict.fromkeys(candidates):
            try:
                with BrokerConnection(host, port, client_id=self.client_id, security=self._cluster.security,
                                      timeout=min(self.request_timeout, 10.0),
                                      connect_timeout=min(self.request_timeout, 5.0)) as conn:
                    body = conn.request(find_coordinator.API_KEY, FIND_COORDINATOR_VERSION,
                                        find_coordinator.REQUEST(key=self.group_id, key_type=0))
            except (ConnectionClosed, KafkaError, OSError, ProtocolError) as exc:
                last = exc
                continue
            if body.error_code:
                raise error_for_code(body.error_code, f"FindCoordinator for group {self.group_id!r}: "
                                                      f"{body.error_message or ''}".rstrip(": "))
            return BrokerInfo(body.node_id, body.host, body.port)
        raise ConnectionClosed(f"no broker answered FindCoordinator for group {self.group_id!r} ({last})")

    def forget_coordinator(self) -> None:
        self.coordinator = None
        if self.channel is not None:
            self.channel.close()  # in-flight requests fail; their callbacks retry
        self.sweep()

    def update_registration(self) -> None:
        ch = self.channel
        if ch is not None and not ch.closed:
            events = ch.events()
            if events != self._registered:
                self._selector.modify(ch.sock, events, ch)
                self._registered = events

    def sweep(self) -> None:
        """Forget a failed coordinator connection (its requests have failed already)."""
        ch = self.channel
        if ch is None or not ch.closed:
            return
        self.channel = None
        self.coordinator = None
        try:
            self._selector.unregister(ch.sock)
        except (KeyError, ValueError, OSError):
            pass

    def check_timeouts(self, now: float) -> None:
        """Fail the coordinator connection if a request has waited too long. A JoinGroup (and the
        SyncGroup after it) may rightly wait a whole rebalance timeout."""
        ch = self.channel
        if ch is None or ch.closed or not ch.in_flight:
            return
        limit = self.request_timeout
        if self.state in (JOINING, SYNCING):
            limit += self.max_poll_interval_ms / 1000
        if ch.oldest_request_age() > limit:
            ch.fail(ConnectionClosed(f"no response from the coordinator {ch.host}:{ch.port} within {limit:g} s"))

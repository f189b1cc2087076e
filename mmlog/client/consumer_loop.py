"""The consumer's event loop: one selector over a channel per leader, metadata, reconnects, reachability.

A mixin of `Consumer` (consumer.py): the loop that every poll, commit and position lookup runs,
apart from what it carries (fetches: fetcher.py; resets and committed offsets: positions.py)."""

from __future__ import annotations

import random
import selectors
import time

from mmlog.client.channel import Channel
from mmlog.client.connection import ConnectionClosed
from mmlog.client.partition_state import LISTED, PartitionState
from mmlog.errors import KafkaError
from mmlog.protocol import ProtocolError


class EventLoop:
    """Runs the consumer's I/O: keeps each leader's channel open and its requests flowing."""

    def _wait(self, done, deadline: float) -> bool:
        """Run the event loop (fetches keep flowing) until done() or the deadline."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._io(left)
        return True

    def _pause(self, deadline: float) -> bool:
        """Back off before a retry, running the event loop; False if the deadline has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        until = time.monotonic() + min(self._retry_backoff, left)
        self._wait(lambda: time.monotonic() >= until, until)
        return True

    def _io(self, timeout: float) -> None:
        """One round: metadata, connections, resets, fetches; wait up to timeout for I/O; run callbacks."""
        now = time.monotonic()
        wait = self._maintain(now, timeout)
        for node, ch in self._channels.items():
            if ch.closed:
                continue  # swept below; its fd may already belong to another thread's socket
            events = ch.events()
            if self._registered.get(node) != events:
                self._selector.modify(ch.sock, events, ch)
                self._registered[node] = events
        if self._group is not None:
            self._group.update_registration()
        for key, mask in self._selector.select(wait):
            ch = key.data
            if ch.closed:
                continue
            if mask & selectors.EVENT_WRITE:
                ch.on_writable()
            if mask & selectors.EVENT_READ and not ch.closed:
                ch.on_readable()
        self._sweep()
        self._check_reachable()

    def _sweep(self) -> None:
        """Forget failed channels (their requests have failed already) and schedule reconnects."""
        for node in [n for n, ch in self._channels.items() if ch.closed]:
            self._connection_lost(node, self._channels[node].last_error)
        if self._group is not None:
            self._group.sweep()

    def _maintain(self, now: float, timeout: float) -> float:
        """Start whatever work is due; return how long the select may wait."""
        wait = timeout
        limit = self._max_wait_ms / 1000 + self._request_timeout
        for ch in self._channels.values():
            if ch.in_flight and ch.oldest_request_age() > limit:
                ch.fail(ConnectionClosed(f"no response from {ch.host}:{ch.port} within {limit:g} s"))
        self._sweep()
        if self._group is not None:
            self._group.check_timeouts(now)
            self._group.sweep()
            wait = min(wait, self._send_committed_lookups(now))
        if not self._assigned:
            return wait
        if self._need_metadata or any(st.leader < 0 for st in self._assigned.values()) or (
                now - self._metadata_at > self._metadata_max_age):
            if now >= self._metadata_retry_at:
                self._refresh_metadata()
                now = time.monotonic()
            if self._need_metadata:
                wait = min(wait, max(0.0, self._metadata_retry_at - now))
        by_node: dict[int, list[PartitionState]] = {}
        for st in self._assigned.values():
            if st.leader >= 0:
                by_node.setdefault(st.leader, []).append(st)
            if st.retry_at > now:
                wait = min(wait, st.retry_at - now)
        for node, states in by_node.items():
            if not any(st.fetchable or (st.reset in LISTED and not st.resetting) for st in states):
                continue
            ch = self._channel(node, now)
            if ch is None:
                retry_at = self._reconnect.get(node, (now + self._retry_backoff,))[0]
                wait = min(wait, max(0.0, retry_at - now))
                continue
            self._send_resets(node, states, now)
            self._send_fetch(node, states, now)
        return max(wait, 0.0)

    def _refresh_metadata(self) -> None:
        topics = sorted({tp.topic for tp in self._assigned})
        # A tiny timeout makes Cluster.refresh a single pass over the known brokers (each attempt
        # keeps its own connect/request timeouts), so poll() stays bounded and other brokers'
        # fetches keep flowing; our own backoff schedules the next pass.
        try:
            self._cluster.refresh(topics, allow_auto_create=False, timeout=0.01)
        except (KafkaError, OSError, ProtocolError) as exc:  # ProtocolError: something else listens there
            self._note_failure(exc)
            self._metadata_retry_at = time.monotonic() + self._metadata_delay
            self._metadata_delay = min(self._metadata_delay * 2, self._backoff_max)
            return
        self._note_success()
        self._metadata_at = time.monotonic()
        missing = False
        for st in self._assigned.values():
            info = self._cluster.topics.get(st.tp.topic)
            leader = -1
            if info is not None and info.error == 0 and st.tp.partition < info.partitions:
                leader = info.leaders[st.tp.partition]
            st.leader = leader if leader in self._cluster.brokers else -1
            missing |= st.leader < 0
        self._need_metadata = missing
        if missing:  # a topic not created yet, or a leader election: ask again, less and less often
            self._metadata_retry_at = self._metadata_at + self._metadata_delay
            self._metadata_delay = min(self._metadata_delay * 2, self._backoff_max)
        else:
            self._metadata_delay = self._retry_backoff

    def _channel(self, node: int, now: float) -> Channel | None:
        ch = self._channels.get(node)
        if ch is not None:
            if not ch.closed:
                return ch
            self._connection_lost(node, ch.last_error)
        retry = self._reconnect.get(node)
        if retry is not None and now < retry[0]:
            return None
        self._sweep()  # a failed channel's fd must leave the selector before a new socket can reuse it
        broker = self._cluster.brokers.get(node)
        if broker is None:
            self._need_metadata = True
            return None
        try:
            ch = Channel(node, broker.host, broker.port, client_id=self.client_id,
                         connect_timeout=min(self._request_timeout, 5.0), security=self._cluster.security)
        except ConnectionClosed as exc:
            self._connect_failed(node, exc)
            return None
        self._channels[node] = ch
        self._selector.register(ch.sock, ch.events(), ch)
        self._registered[node] = ch.events()
        return ch

    def _connection_lost(self, node: int, exc: BaseException | None) -> None:
        self._forget_channel(node)
        self._connect_failed(node, exc or ConnectionClosed(f"connection to node {node} closed"))

    def _forget_channel(self, node: int) -> None:
        ch = self._channels.pop(node)
        self._registered.pop(node, None)
        try:
            self._selector.unregister(ch.sock)
        except (KeyError, ValueError, OSError):
            pass
        ch.close()  # fails whatever is still in flight: their callbacks clear the fetching flags
        self._fetching.discard(node)

    def _connect_failed(self, node: int, exc: BaseException) -> None:
        """Back off exponentially (with jitter) before the next attempt; refresh metadata after repeats."""
        _, delay, failures = self._reconnect.get(node, (0.0, 0.0, 0))
        delay = self._backoff_min if delay == 0 else min(delay * 2, self._backoff_max)
        self._reconnect[node] = (time.monotonic() + delay * random.uniform(0.8, 1.2), delay, failures + 1)
        if failures + 1 >= 2:
            self._need_metadata = True  # the broker may be gone for good and its partitions led elsewhere
        self._note_failure(exc)

    def _note_failure(self, exc: BaseException) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        self._last_error = exc

    def _note_success(self, node: int | None = None) -> None:
        self._failing_since = None
        if node is not None:
            self._reconnect.pop(node, None)

    def _check_reachable(self) -> None:
        since = self._failing_since
        if since is None or not (self._assigned or (self._group is not None and self._group.subscribed)):
            return
        waited = time.monotonic() - since
        if waited >= self._request_timeout:
            self._failing_since = time.monotonic()  # a later poll gets a whole new window
            raise ConnectionClosed(f"no broker reachable at {self._where()} for {waited:.1f} s: {self._last_error}")

    def _where(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self._cluster.bootstrap)

    @staticmethod
    def _left(deadline: float | None) -> float:
        if deadline is None:
            return 3600.0
        return max(0.0, deadline - time.monotonic())

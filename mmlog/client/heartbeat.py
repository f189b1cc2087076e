"""The group member's heartbeat thread: Heartbeat every interval while STABLE, LeaveGroup when polls stop.

A mixin of `GroupMembership` (group.py), whose docstring tells why this is a thread: it keeps
session_timeout_ms (a dead process) apart from max_poll_interval_ms (a slow application)."""

from __future__ import annotations

import logging
import threading
import time

from mmlog.client.connection import BrokerConnection
from mmlog.client.group_states import MEMBERSHIP_LOST, POLL_EXPIRED
from mmlog.errors import FencedInstanceId, KafkaError
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import heartbeat, leave_group

log = logging.getLogger("mmlog.client.group")

HEARTBEAT_VERSION = 3
LEAVE_GROUP_VERSION = 3
ENDS_MEMBERSHIP = MEMBERSHIP_LOST | {FencedInstanceId.code, POLL_EXPIRED}


class Heartbeats:
    """The thread's loop; it shares with the consumer's thread only the fields under `_lock`."""

    def _start_heartbeats(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._heartbeat_loop, name=f"mmlog-heartbeat-{self.group_id}",
                                            daemon=True)
            self._thread.start()

    def _heartbeat_loop(self) -> None:
        """The heartbeat thread: beat while STABLE, report errors, leave when the poll interval passes."""
        conn: BrokerConnection | None = None
        beating: tuple | None = None  # the target the schedule below is for
        next_beat = 0.0
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        return
                    target, last_poll = self._target, self._last_poll
                now = time.monotonic()
                if target is None:
                    beating = None
                    self._wake.wait(1.0)
                    self._wake.clear()
                    continue
                if target != beating:  # a new generation: SyncGroup just refreshed the session
                    beating, next_beat = target, now + self.heartbeat_interval
                poll_deadline = last_poll + self.max_poll_interval_ms / 1000
                if now >= poll_deadline:
                    conn = self._poll_expired(target, conn)
                    continue
                if now < next_beat:
                    self._wake.wait(min(next_beat, poll_deadline) - now)
                    self._wake.clear()
                    continue
                code, conn = self._beat(target, conn)
                next_beat = time.monotonic() + (self.retry_backoff if code is None else self.heartbeat_interval)
                if code:
                    self._report(target, code)
        except Exception:  # noqa: BLE001 - a bug here must not pass silently: the member would be evicted
            log.exception("group %s: the heartbeat thread failed", self.group_id)
        finally:
            if conn is not None:
                conn.close()

    def _connect(self, target: tuple, conn: BrokerConnection | None) -> BrokerConnection:
        host, port = target[0], target[1]
        if conn is not None and (conn.host, conn.port) == (host, port):
            return conn
        if conn is not None:
            conn.close()
        timeout = max(0.5, min(self.request_timeout, self.session_timeout_ms / 1000))
        return BrokerConnection(host, port, client_id=self.client_id, timeout=timeout,
                                connect_timeout=min(timeout, 5.0), security=self._cluster.security)

    def _beat(self, target: tuple, conn: BrokerConnection | None) -> tuple[int | None, BrokerConnection | None]:
        """One Heartbeat: (error code, connection), code None if it got no answer."""
        _, _, member_id, generation, instance = target
        try:
            conn = self._connect(target, conn)
            body = conn.request(heartbeat.API_KEY, HEARTBEAT_VERSION, heartbeat.REQUEST(
                group_id=self.group_id, generation_id=generation, member_id=member_id,
                group_instance_id=instance))
            return body.error_code, conn
        except (KafkaError, OSError, ProtocolError) as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            if conn is not None:
                conn.close()
            return None, None

    def _report(self, target: tuple, what: int | str) -> None:
        with self._lock:
            if self._target != target:
                return
            self._beat_event = (target[3], what)
            if what in ENDS_MEMBERSHIP:
                self._target = None  # this membership is over: stop beating for it
        self.notifier.notify()

    def _poll_expired(self, target: tuple, conn: BrokerConnection | None) -> BrokerConnection | None:
        _, _, member_id, generation, instance = target
        log.warning("group %s: no poll for more than max_poll_interval_ms (%d ms): member %s leaves the group so "
                    "that the others take its partitions over; the next poll rejoins. Poll more often, or "
                    "process fewer records per poll, or raise max_poll_interval_ms.", self.group_id,
                    self.max_poll_interval_ms, member_id)
        if instance is None:
            try:
                conn = self._connect(target, conn)
                conn.request(leave_group.API_KEY, LEAVE_GROUP_VERSION, leave_group.REQUEST(
                    group_id=self.group_id, members=[{"member_id": member_id, "group_instance_id": None}]))
            except (KafkaError, OSError, ProtocolError) as exc:
                log.debug("group %s: LeaveGroup failed: %s", self.group_id, exc)
                if conn is not None:
                    conn.close()
                conn = None
        self._report(target, POLL_EXPIRED)
        return conn

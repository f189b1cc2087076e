"""Joining a group: JoinGroup, the leader's assignment, SyncGroup, up to a STABLE member.

A mixin of `GroupMembership` (group.py); the state diagram is in group.py's docstring."""

from __future__ import annotations

import logging
import time

from mmlog.client import consumer_protocol as cp
from mmlog.client.assignors import ASSIGNORS
from mmlog.client.group_states import COORDINATOR_MOVED, JOINING, NEED_JOIN, STABLE, SYNCING
from mmlog.errors import (FencedInstanceId, InconsistentGroupProtocol, InvalidGroupId, InvalidSessionTimeout,
                          KafkaError, MemberIdRequired, UnknownMemberId, error_for_code)
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import join_group, sync_group

log = logging.getLogger("mmlog.client.group")

JOIN_GROUP_VERSION = 5  # group_instance_id (static membership); v4+ understands MEMBER_ID_REQUIRED
SYNC_GROUP_VERSION = 3

FATAL_JOIN = {InconsistentGroupProtocol.code, InvalidGroupId.code, InvalidSessionTimeout.code,
              FencedInstanceId.code, 30, 81}  # 30 GROUP_AUTHORIZATION_FAILED, 81 GROUP_MAX_SIZE_REACHED


class Joining:
    """Sends JoinGroup and SyncGroup; as the leader, runs the assignor over every member's subscription."""

    def join(self, now: float) -> float:
        """Send a JoinGroup if one is due; return how long until the next attempt may be made."""
        if not self.subscribed or self.state != NEED_JOIN or self.fatal is not None:
            return 3600.0
        if now < self._join_retry_at:
            return self._join_retry_at - now
        ch = self.ensure_coordinator(now)
        if ch is None:
            return self.coordinator_wait(now) or self.retry_backoff
        self._watched = set(self.topics)
        self._snapshot = self.partition_counts(self.topics)
        subscription = cp.encode_subscription(cp.Subscription(self.topics))
        self.state = JOINING
        self._rejoin_after_sync = None
        self._join_token += 1
        token = self._join_token
        log.info("group %s: joining as %s (%s), topics %s", self.group_id, self.member_id or "a new member",
                 self.reason, list(self.topics))
        ch.send(join_group.API_KEY, JOIN_GROUP_VERSION, join_group.REQUEST(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type=cp.PROTOCOL_TYPE,
            protocols=[{"name": name, "metadata": subscription} for name in self.strategies]),
            lambda body, exc: self._on_join(token, body, exc))
        return 3600.0

    def _join_failed(self, token: int, reason: str, delay: float | None = None) -> None:
        if token != self._join_token:
            return
        self.state = NEED_JOIN
        self.reason = reason
        self._join_token += 1
        self._join_retry_at = time.monotonic() + (self.retry_backoff if delay is None else delay)

    def _on_join(self, token: int, body, exc: BaseException | None) -> None:
        if token != self._join_token or self.state != JOINING:
            return
        if exc is not None:
            self._note_failure(exc)
            self._join_failed(token, f"JoinGroup failed: {exc}")
            return
        self._note_success()
        code = body.error_code
        if code == 0:
            self.member_id = body.member_id
            self.generation = body.generation_id
            self.protocol = body.protocol_name
            self.leader_id = body.leader
            try:
                assignments = self._assign(body.members) if body.leader == body.member_id else []
            except (KafkaError, OSError, ProtocolError) as exc:
                self._note_failure(exc)
                self._join_failed(token, f"the leader could not assign the partitions: {exc}")
                return
            if self.channel is None or self.channel.closed:
                self._join_failed(token, "the coordinator connection closed")
                return
            self.state = SYNCING
            self.channel.send(sync_group.API_KEY, SYNC_GROUP_VERSION, sync_group.REQUEST(
                group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=self.group_instance_id, assignments=assignments),
                lambda body, exc: self._on_sync(token, body, exc))
        elif code == MemberIdRequired.code:
            self.member_id = body.member_id
            self._join_failed(token, "joining with the member id the coordinator handed out", delay=0.0)
        elif code == UnknownMemberId.code:
            self.member_id = ""
            self._join_failed(token, "the coordinator does not know the member id", delay=0.0)
        elif code in FATAL_JOIN:
            self.fatal = error_for_code(code, f"JoinGroup of group {self.group_id!r} (strategies "
                                              f"{list(self.strategies)}, session timeout {self.session_timeout_ms} ms)")
            self._join_failed(token, str(self.fatal))
        else:
            if code in COORDINATOR_MOVED:
                self.forget_coordinator()
            self._join_failed(token, f"JoinGroup answered {error_for_code(code)!r}")

    def _assign(self, members) -> list[dict]:
        """The leader's work: every member's share, by the protocol the coordinator chose."""
        assignor = ASSIGNORS.get(self.protocol or "")
        if assignor is None:
            raise InconsistentGroupProtocol(f"the coordinator chose protocol {self.protocol!r}, "
                                            f"not one of {sorted(ASSIGNORS)}")
        subscriptions, instances = {}, {}
        for m in members:
            try:
                subscriptions[m.member_id] = cp.decode_subscription(m.metadata).topics
            except ProtocolError as exc:
                log.warning("group %s: member %s sent a subscription that does not decode (%s); "
                            "it gets no partitions", self.group_id, m.member_id, exc)
                subscriptions[m.member_id] = ()
            instances[m.member_id] = m.group_instance_id
        topics = sorted(set().union(*subscriptions.values())) if subscriptions else []
        if topics:
            self._cluster.refresh(topics, allow_auto_create=False, timeout=0.01)
        counts = self.partition_counts(topics)
        result = assignor(subscriptions, counts, instances)
        self._watched = set(topics) | set(self.topics)
        self._snapshot = self.partition_counts(self._watched)
        log.info("group %s: generation %d assigned by %s over %d members: %s", self.group_id, self.generation,
                 self.protocol, len(result), {m: len(tps) for m, tps in result.items()})
        return [{"member_id": m, "assignment": cp.encode_assignment(cp.Assignment(tuple(tps)))}
                for m, tps in result.items()]

    def _on_sync(self, token: int, body, exc: BaseException | None) -> None:
        if token != self._join_token or self.state != SYNCING:
            return
        if exc is not None:
            self._note_failure(exc)
            self._join_failed(token, f"SyncGroup failed: {exc}")
            return
        self._note_success()
        code = body.error_code
        if code:
            if code == UnknownMemberId.code:
                self.member_id = ""
            elif code in COORDINATOR_MOVED:
                self.forget_coordinator()
            elif code == FencedInstanceId.code:
                self.fatal = error_for_code(code, f"group {self.group_id}: instance {self.group_instance_id!r}")
            self._join_failed(token, f"SyncGroup answered {error_for_code(code)!r}", delay=0.0)
            return
        try:
            assignment = cp.decode_assignment(body.assignment)
        except ProtocolError as exc:
            self._join_failed(token, f"the leader's assignment does not decode: {exc}")
            return
        self.state = STABLE
        self.lost = False
        log.info("group %s: generation %d, member %s%s, assigned %s", self.group_id, self.generation,
                 self.member_id, " (leader)" if self.leader_id == self.member_id else "",
                 [f"{tp.topic}-{tp.partition}" for tp in assignment.partitions])
        c = self.coordinator
        with self._lock:
            self._target = (c.host, c.port, self.member_id, self.generation, self.group_instance_id)
            self._beat_event = None
        self._wake.set()
        if self._rejoin_after_sync is not None:
            self._set_need_join(self._rejoin_after_sync)
            return
        self._assignment = sorted(assignment.partitions)

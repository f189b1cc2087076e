"""The consumer's side of a consumer group: coordinator, membership, heartbeats, committed offsets.

This is Kafka's classic (eager) group protocol as its consumers speak it (Java's
`ConsumerCoordinator`, librdkafka's cgrp), driven by `Consumer`; the broker's side
is `mmlog/coordinator/`.

Theory of operation
-------------------

*Coordinator.* FindCoordinator (any broker) names the broker that coordinates
the group; the member keeps one connection of its own to it, a `Channel` in the
consumer's selector, next to the fetch connections and never shared with them:
a JoinGroup parks at the coordinator for a whole rebalance, and Kafka answers a
connection's requests in order, so fetches behind it would stall. A failed
connection, NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE forget the coordinator;
the next request that needs it looks it up again (with backoff).

*Joining* (states, all driven from the consumer's thread)::

    NEED_JOIN --JoinGroup--> JOINING --(leader: assign)--SyncGroup--> SYNCING --> STABLE
        ^                       |                                         |          |
        +------- error ---------+--------------------- error -------------+          |
        +---------- heartbeat error, poll timeout, new metadata, subscribe() --------+

A member joins with no member id; the coordinator answers MEMBER_ID_REQUIRED with
one (KIP-394) and the member joins again with it. JoinGroup offers one protocol
per assignor in `partition_assignment_strategy`, each carrying the same
`consumer_protocol.Subscription`; the coordinator picks one every member lists.
The leader receives every member's subscription, refreshes the metadata of all
their topics, runs the assignor (`assignors.py`) and sends everyone's share in
its SyncGroup; the others send an empty one. Every member receives its own
`Assignment`. Errors that a retry cures (a coordinator that moved, a rebalance
that started over) go back to NEED_JOIN; UNKNOWN_MEMBER_ID also forgets the
member id. Errors no retry cures (INCONSISTENT_GROUP_PROTOCOL,
INVALID_SESSION_TIMEOUT, FENCED_INSTANCE_ID, ...) are kept in `fatal` and raised
by every poll.

The consumer owns the partitions: it revokes them (commit, `on_revoke`) before the
member leaves STABLE for NEED_JOIN, and takes a finished assignment with
`take_assignment()` to assign it (`on_assign`). App callbacks therefore only run
inside poll, never inside a socket callback.

*Heartbeats: a small thread.* A background thread sends Heartbeat over a
blocking connection of its own every `heartbeat_interval_ms` while the member is
STABLE, reads nothing else, and writes only two things: what the coordinator
answered (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, ...; the
consumer's thread acts on it in its next poll, and the thread wakes a blocked
poll through a socketpair) and whether `max_poll_interval_ms` has passed since
the last poll. Why a thread rather than heartbeats from poll: it separates the
two things Kafka separates since KIP-62 — `session_timeout_ms` says how soon a
*dead process* loses its partitions (seconds), `max_poll_interval_ms` how long
the application may spend on one batch (minutes) — so an application may take
longer than the session timeout between polls without its group rebalancing
under it, while a SIGKILLed consumer is still evicted within the session
timeout. The thread shares nothing with the consumer's data path (no partition
state, no channels, no selector); one lock guards the few fields it reads and
writes. When the poll interval passes, the thread leaves the group (LeaveGroup;
a static member just stops heartbeating, KIP-345) so the others take the
partitions over, and the next poll rejoins, as Java's consumer does. Heartbeats
continue while a rebalance waits for this member's next poll (each answer
REBALANCE_IN_PROGRESS keeps the session alive), so the application has
`max_poll_interval_ms` (the rebalance timeout) to come back.

*Metadata.* An assignment is only right for the partition counts it was made
from, so each member remembers them (the leader for every topic of the group,
the others for their own) and rejoins when a poll's metadata check (every
`metadata_max_age_ms`, every second while a subscribed topic does not exist
yet) finds them changed, or finds that a pattern now matches other topics.

*Offsets.* OffsetCommit carries the member id and generation of a STABLE member,
or generation -1 and an empty member id for an `assign()` consumer; OffsetFetch
gives the committed offsets that positions start from. Both go over the
coordinator channel, asynchronously; the consumer waits for them where it must.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Callable, Iterable

from mmlog.client import consumer_protocol as cp
from mmlog.client.assignors import ASSIGNORS
from mmlog.client.channel import Channel
from mmlog.client.cluster import BrokerInfo, Cluster
from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.notifier import Notifier
from mmlog.client.records import TopicPartition
from mmlog.errors import (CoordinatorNotAvailable, FencedInstanceId, IllegalGeneration, InconsistentGroupProtocol,
                          InvalidGroupId, InvalidSessionTimeout, KafkaError, MemberIdRequired, NotCoordinator,
                          RebalanceInProgress, UnknownMemberId, error_for_code)
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import (find_coordinator, heartbeat, join_group, leave_group, offset_commit,
                                     offset_fetch, sync_group)

log = logging.getLogger("mmlog.client.group")

FIND_COORDINATOR_VERSION = 2
JOIN_GROUP_VERSION = 5  # group_instance_id (static membership); v4+ understands MEMBER_ID_REQUIRED
SYNC_GROUP_VERSION = 3
HEARTBEAT_VERSION = 3
LEAVE_GROUP_VERSION = 3
OFFSET_COMMIT_VERSION = 7
OFFSET_FETCH_VERSION = 5

NEED_JOIN, JOINING, SYNCING, STABLE = "need-join", "joining", "syncing", "stable"

# A subscribed topic that does not exist yet is looked for every second (otherwise every
# metadata_max_age_ms): a consumer started before its producer picks the topic up within
# a second, for one small Metadata request a second.
MISSING_TOPIC_RECHECK = 1.0

_COORDINATOR_MOVED = {CoordinatorNotAvailable.code, NotCoordinator.code}
_MEMBERSHIP_LOST = {IllegalGeneration.code, UnknownMemberId.code}
_FATAL_JOIN = {InconsistentGroupProtocol.code, InvalidGroupId.code, InvalidSessionTimeout.code,
               FencedInstanceId.code, 30, 81}  # 30 GROUP_AUTHORIZATION_FAILED, 81 GROUP_MAX_SIZE_REACHED
POLL_EXPIRED = "poll-expired"  # a heartbeat-thread event, next to the error codes
_ENDS_MEMBERSHIP = _MEMBERSHIP_LOST | {FencedInstanceId.code, POLL_EXPIRED}


class CommitFailedError(KafkaError):
    """The commit came too late: the group rebalanced (or dropped this member) first, so the partitions
    may belong to another member now. Nothing is lost: the records since the last successful commit
    are delivered again, to whoever holds the partition. The next poll rejoins the group."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def is_pattern(topics) -> bool:
    """A subscription by pattern: a compiled regex, or a string that starts with '^' (librdkafka's rule)."""
    return isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^"))


class GroupMembership:
    """One consumer's membership of one group, and its connection to the group's coordinator."""

    def __init__(self, cluster: Cluster, group_id: str, *, client_id: str, session_timeout_ms: int,
                 heartbeat_interval_ms: int, max_poll_interval_ms: int, strategies: tuple[str, ...],
                 group_instance_id: str | None, request_timeout: float, retry_backoff: float,
                 backoff_max: float, metadata_max_age: float, selector,
                 note_failure: Callable[[BaseException], None], note_success: Callable[[], None]) -> None:
        self.group_id = group_id
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.max_poll_interval_ms = max_poll_interval_ms
        self.strategies = strategies
        self.group_instance_id = group_instance_id
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.backoff_max = backoff_max
        self.metadata_max_age = metadata_max_age
        self._cluster = cluster
        self._selector = selector
        self._note_failure = note_failure
        self._note_success = note_success
        # the coordinator
        self.coordinator: BrokerInfo | None = None
        self.channel: Channel | None = None
        self._registered = 0
        self._coordinator_retry_at = 0.0
        self._coordinator_delay = retry_backoff
        # membership (meaningful while subscribed)
        self.topics: tuple[str, ...] | None = None  # the subscription (a pattern's current matches)
        self.pattern: re.Pattern | None = None
        self.state = NEED_JOIN
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id = ""
        self.lost = False  # left NEED_JOIN because the membership is gone: committing is pointless
        self.reason = ""  # why the member (re)joins: logged with the join
        self.fatal: KafkaError | None = None
        self._join_token = 0  # bumped to make in-flight join/sync answers stale
        self._join_retry_at = 0.0
        self._rejoin_after_sync: str | None = None
        self._assignment: list[TopicPartition] | None = None  # finished, for the consumer to take
        self._snapshot: dict[str, int] = {}  # partition counts the assignment was made for
        self._watched: set[str] = set()  # topics whose partition counts are watched for changes
        self._metadata_check_at = 0.0
        # shared with the heartbeat thread, under _lock
        self._lock = threading.Lock()
        self._target: tuple | None = None  # (host, port, member id, generation, instance id) while STABLE
        self._beat_event: tuple[int, int | str] | None = None  # (generation, error code or POLL_EXPIRED)
        self._last_poll = time.monotonic()
        self._stopping = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.notifier = Notifier()
        selector.register(self.notifier.sock, self.notifier.events(), self.notifier)

    # ------------------------------------------------------------------ subscription

    @property
    def subscribed(self) -> bool:
        return self.topics is not None

    def subscribe(self, topics) -> None:
        """Set the subscription (a list of topic names, or a pattern); a change makes the member rejoin."""
        was, old_pattern = self.topics, self.pattern
        if is_pattern(topics):
            self.pattern = topics if isinstance(topics, re.Pattern) else re.compile(topics)
            same_pattern = old_pattern is not None and old_pattern.pattern == self.pattern.pattern
            new = was if same_pattern and was is not None else ()  # the next metadata check finds the matches
        else:
            self.pattern = None
            new = tuple(sorted(set(topics)))
        self.topics = new
        self._metadata_check_at = 0.0  # look at the metadata (a pattern's matches) in the next poll
        if was is None:
            self.state = NEED_JOIN
            self.reason = "subscribe"
            self._join_retry_at = 0.0
            self._start_heartbeats()
        elif new != was:
            self.request_rejoin("subscription changed")

    def unsubscribe(self) -> None:
        """Forget the subscription and the membership (the caller has revoked and left)."""
        self.topics = None
        self.pattern = None
        self._reset_member(forget_id=True)
        self._assignment = None
        self._snapshot = {}
        self._watched = set()

    def request_rejoin(self, reason: str, lost: bool = False) -> None:
        if not self.subscribed:
            return
        if self.state == STABLE:
            self._set_need_join(reason, lost)
        elif self.state in (JOINING, SYNCING):
            self._rejoin_after_sync = reason  # this round's assignment is already out of date
        else:
            self.lost = self.lost or lost

    def _set_need_join(self, reason: str, lost: bool = False) -> None:
        if self.state != NEED_JOIN:
            log.info("group %s: member %s rejoins: %s", self.group_id, self.member_id or "(new)", reason)
        self.state = NEED_JOIN
        self.reason = reason
        self.lost = self.lost or lost
        self._join_token += 1
        with self._lock:
            self._target = None
            self._beat_event = None

    def _reset_member(self, forget_id: bool) -> None:
        self._join_token += 1
        self.state = NEED_JOIN
        self.generation = -1
        if forget_id:
            self.member_id = ""
        with self._lock:
            self._target = None
            self._beat_event = None

    def polled(self, now: float) -> None:
        """The application polled (the heartbeat thread measures max_poll_interval_ms from here)."""
        with self._lock:
            self._last_poll = now

    def take_heartbeat_event(self) -> None:
        """Act on what the heartbeat thread heard since the last poll."""
        with self._lock:
            event, self._beat_event = self._beat_event, None
        if event is None:
            return
        generation, what = event
        if self.state != STABLE or generation != self.generation:
            return  # about a generation this member has already left
        if what == POLL_EXPIRED:
            if self.group_instance_id is None:
                self.member_id = ""  # the thread sent LeaveGroup for it
            self._set_need_join(f"more than max_poll_interval_ms ({self.max_poll_interval_ms} ms) passed "
                                "between two polls, so the member left the group", lost=True)
        elif what == RebalanceInProgress.code:
            self._set_need_join("the group is rebalancing")
        elif what == UnknownMemberId.code:
            self.member_id = ""
            self._set_need_join("the coordinator no longer knows this member (session expired?)", lost=True)
        elif what == IllegalGeneration.code:
            self._set_need_join(f"generation {generation} is over", lost=True)
        elif what in _COORDINATOR_MOVED:
            self.forget_coordinator()
        elif what == FencedInstanceId.code:
            self.fatal = FencedInstanceId(f"group {self.group_id}: another consumer uses group instance id "
                                          f"{self.group_instance_id!r}")
        else:
            log.warning("group %s: heartbeat answered error %s", self.group_id, what)

    # ------------------------------------------------------------------ metadata watch

    def watch_metadata(self, now: float) -> float:
        """Rejoin when a pattern matches other topics or a subscribed topic's partition count changed.
        Returns the seconds until the next check."""
        if not self.subscribed:
            return 3600.0
        if now < self._metadata_check_at:
            return self._metadata_check_at - now
        try:
            if self.pattern is not None:
                self._cluster.refresh(None, allow_auto_create=False, timeout=0.01)
            else:
                self._cluster.refresh(sorted(set(self.topics) | self._watched), allow_auto_create=False,
                                      timeout=0.01)
        except (KafkaError, OSError, ProtocolError) as exc:
            self._note_failure(exc)
            self._metadata_check_at = now + self.backoff_max
            return self.backoff_max
        if self.pattern is not None:
            matches = tuple(sorted(name for name, info in self._cluster.topics.items()
                                   if info.error == 0 and self.pattern.match(name)))
            if matches != self.topics:
                self.topics = matches
                self.request_rejoin(f"the pattern {self.pattern.pattern!r} now matches {list(matches)}")
        counts = self.partition_counts(set(self.topics) | self._watched)
        missing = any(t not in counts for t in self.topics)
        if self.state == STABLE and counts != self._snapshot:
            self.request_rejoin(f"partitions changed: {_diff(self._snapshot, counts)}")
        wait = MISSING_TOPIC_RECHECK if missing else self.metadata_max_age
        self._metadata_check_at = now + wait
        return wait

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """From the cached metadata: the partition count of each topic that exists."""
        out = {}
        for topic in topics:
            info = self._cluster.topics.get(topic)
            if info is not None and info.error == 0 and info.partitions > 0:
                out[topic] = info.partitions
        return out

    # ------------------------------------------------------------------ the coordinator

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

    # ------------------------------------------------------------------ JoinGroup and SyncGroup

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
        elif code in _FATAL_JOIN:
            self.fatal = error_for_code(code, f"JoinGroup of group {self.group_id!r} (strategies "
                                              f"{list(self.strategies)}, session timeout {self.session_timeout_ms} ms)")
            self._join_failed(token, str(self.fatal))
        else:
            if code in _COORDINATOR_MOVED:
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
            elif code in _COORDINATOR_MOVED:
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

    def next_due(self, now: float) -> float:
        """Seconds until the member has something to do in a poll (a join to retry, metadata to check)."""
        due = 3600.0
        if self.subscribed:
            if self._assignment is not None:
                return 0.0
            due = max(0.0, self._metadata_check_at - now)
            if self.state == NEED_JOIN and self.fatal is None:
                due = min(due, max(0.0, self._join_retry_at - now, self._coordinator_retry_at - now))
        return due

    def take_assignment(self) -> list[TopicPartition] | None:
        """The partitions of a generation just joined (once), or None."""
        out, self._assignment = self._assignment, None
        return out

    # ------------------------------------------------------------------ offsets

    def commit_identity(self) -> tuple[int, str, str | None]:
        """(generation, member id, group instance id) to commit with: the member's while subscribed,
        (-1, "", None) for an assign() consumer."""
        if self.subscribed and self.generation >= 0 and self.member_id:
            return self.generation, self.member_id, self.group_instance_id
        return -1, "", None

    def send_commit(self, offsets: dict[TopicPartition, int], callback) -> bool:
        """Send an OffsetCommit; callback(exception or None) runs when it is answered. False (and no
        callback) when there is no coordinator connection right now."""
        ch = self.ensure_coordinator(time.monotonic())
        if ch is None:
            return False
        generation, member_id, instance = self.commit_identity()
        topics: dict[str, list] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""})
        ch.send(offset_commit.API_KEY, OFFSET_COMMIT_VERSION, offset_commit.REQUEST(
            group_id=self.group_id, generation_id=generation, member_id=member_id, group_instance_id=instance,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]),
            lambda body, exc: callback(self._commit_result(generation, body, exc)))
        return True

    def _commit_result(self, generation: int, body, exc: BaseException | None) -> BaseException | None:
        if exc is not None:
            self._note_failure(exc)
            return exc if isinstance(exc, KafkaError) else ConnectionClosed(str(exc))
        self._note_success()
        codes = {p.error_code for t in body.topics for p in t.partitions if p.error_code}
        if not codes:
            return None
        code = min(codes)
        if codes & _COORDINATOR_MOVED:
            self.forget_coordinator()
        if codes & (_MEMBERSHIP_LOST | {RebalanceInProgress.code}):
            code = min(codes & (_MEMBERSHIP_LOST | {RebalanceInProgress.code}))
            if self.subscribed and self.state == STABLE and generation == self.generation:
                if code == UnknownMemberId.code:
                    self.member_id = ""
                self.request_rejoin(f"a commit answered {error_for_code(code)!r}",
                                    lost=code in _MEMBERSHIP_LOST)
            return CommitFailedError(
                f"group {self.group_id}: commit failed with {error_for_code(code)!r}: the group rebalanced or "
                "dropped this member (was the time between polls longer than max_poll_interval_ms?); the "
                "records since the last commit will be delivered again", code)
        return error_for_code(code, f"OffsetCommit for group {self.group_id!r}")  # its class says if retriable

    def send_offset_fetch(self, tps: list[TopicPartition], callback) -> bool:
        """Send an OffsetFetch; callback(result, exc): result {tp: committed offset, -1 if none}."""
        ch = self.ensure_coordinator(time.monotonic())
        if ch is None:
            return False
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)

        def done(body, exc):
            if exc is not None:
                self._note_failure(exc)
                callback(None, exc)
                return
            self._note_success()
            codes = {p.error_code for t in body.topics for p in t.partitions if p.error_code}
            if body.error_code:
                codes.add(body.error_code)
            if codes:
                if codes & _COORDINATOR_MOVED:
                    self.forget_coordinator()
                callback(None, error_for_code(min(codes), f"OffsetFetch for group {self.group_id!r}"))
                return
            callback({TopicPartition(t.name, p.partition_index): p.committed_offset
                      for t in body.topics for p in t.partitions}, None)

        ch.send(offset_fetch.API_KEY, OFFSET_FETCH_VERSION, offset_fetch.REQUEST(
            group_id=self.group_id, topics=[{"name": t, "partition_indexes": ps} for t, ps in topics.items()]),
            done)
        return True

    # ------------------------------------------------------------------ leaving

    def send_leave(self, callback) -> bool:
        """LeaveGroup for a dynamic member that has a member id (static members stay, KIP-345).
        False if there is nothing to send or no coordinator; else callback(exc) when answered."""
        member_id = self.member_id
        self._reset_member(forget_id=True)
        if not member_id or self.group_instance_id is not None:
            return False
        if self.channel is not None and self.channel.in_flight:
            # A parked JoinGroup/SyncGroup holds the connection (the coordinator answers a connection's
            # requests in order): leave over a new one rather than wait for the rebalance.
            self.channel.close()
            self.sweep()
        ch = self.ensure_coordinator(time.monotonic())
        if ch is None:
            return False
        log.info("group %s: member %s leaves the group", self.group_id, member_id)
        ch.send(leave_group.API_KEY, LEAVE_GROUP_VERSION, leave_group.REQUEST(
            group_id=self.group_id, members=[{"member_id": member_id, "group_instance_id": None}]),
            lambda body, exc: callback(exc))
        return True

    def close(self) -> None:
        with self._lock:
            self._stopping = True
            self._target = None
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.request_timeout + 1)
        if self.channel is not None:
            self.channel.close()
            self.sweep()
        try:
            self._selector.unregister(self.notifier.sock)
        except (KeyError, ValueError, OSError):
            pass
        self.notifier.close()

    # ------------------------------------------------------------------ the heartbeat thread

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
            if what in _ENDS_MEMBERSHIP:
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


def _diff(old: dict[str, int], new: dict[str, int]) -> str:
    parts = []
    for topic in sorted(set(old) | set(new)):
        if old.get(topic) != new.get(topic):
            parts.append(f"{topic} {old.get(topic, 'none')} -> {new.get(topic, 'none')}")
    return ", ".join(parts)

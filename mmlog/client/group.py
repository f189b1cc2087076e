"""The consumer's side of a consumer group: coordinator, membership, heartbeats, committed offsets.

This is Kafka's classic (eager) group protocol as its consumers speak it (Java's
`ConsumerCoordinator`, librdkafka's cgrp), driven by `Consumer`; the broker's side
is `mmlog/coordinator/`. `GroupMembership` is put together from parts, each a module: joining
(`group_join.py`), the coordinator connection (`group_coordinator.py`), committed offsets
(`group_offsets.py`) and the heartbeat thread (`heartbeat.py`); `group_states.py` has the states.

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

from mmlog.client.channel import Channel
from mmlog.client.cluster import BrokerInfo, Cluster
from mmlog.client.group_coordinator import CoordinatorConnection
from mmlog.client.group_join import Joining
from mmlog.client.group_offsets import GroupOffsets
from mmlog.client.group_states import COORDINATOR_MOVED, JOINING, NEED_JOIN, POLL_EXPIRED, STABLE, SYNCING
from mmlog.client.heartbeat import LEAVE_GROUP_VERSION, Heartbeats
from mmlog.client.notifier import Notifier
from mmlog.client.records import TopicPartition
from mmlog.errors import FencedInstanceId, IllegalGeneration, KafkaError, RebalanceInProgress, UnknownMemberId
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import leave_group

log = logging.getLogger("mmlog.client.group")

# A subscribed topic that does not exist yet is looked for every second (otherwise every
# metadata_max_age_ms): a consumer started before its producer picks the topic up within
# a second, for one small Metadata request a second.
MISSING_TOPIC_RECHECK = 1.0


def is_pattern(topics) -> bool:
    """A subscription by pattern: a compiled regex, or a string that starts with '^' (librdkafka's rule)."""
    return isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^"))


class GroupMembership(Joining, CoordinatorConnection, GroupOffsets, Heartbeats):
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
        elif what in COORDINATOR_MOVED:
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


def _diff(old: dict[str, int], new: dict[str, int]) -> str:
    parts = []
    for topic in sorted(set(old) | set(new)):
        if old.get(topic) != new.get(topic):
            parts.append(f"{topic} {old.get(topic, 'none')} -> {new.get(topic, 'none')}")
    return ", ".join(parts)

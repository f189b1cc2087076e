"""The consumer: partitions read as never-ending streams, with fetches pipelined ahead of the app.

    consumer = Consumer("127.0.0.1:9092", auto_offset_reset="earliest")
    consumer.assign([("clicks", 0), ("clicks", 1)])
    for record in consumer:                    # blocks for new data; never ends
        handle(record.offset, record.key, record.value)

    for arrays in consumer.poll_batch(1.0):    # the bulk path: numpy columns per partition chunk
        total += int(arrays.value_lengths.sum())

    consumer = Consumer("127.0.0.1:9092", group_id="billing")   # a consumer group
    consumer.subscribe(["clicks"], on_assign=lambda c, tps: print("got", tps))
    for record in consumer:                    # this member's share of the partitions; commits every 5 s
        handle(record)

Theory of operation
-------------------

One consumer is used from one thread (like Kafka's). Everything happens inside
`poll` / `poll_batch` / iteration, which run a small event loop over one
non-blocking `Channel` per leader broker; nothing runs in the background.

*Partition state.* Each assigned partition has a **position** (the offset of
the next record the application will get) and a **fetch offset** (where the next
Fetch starts; ahead of the position by whatever has been fetched and not yet
handed over). A partition without a known offset first resolves one with
ListOffsets: earliest (-2) or latest (-1) per `auto_offset_reset` ("none" raises
`NoOffsetForPartition` until the application seeks). With a `group_id`, a new
partition first asks the group's committed offset (OffsetFetch) and falls back to
`auto_offset_reset` only when there is none; a `seek` before the answer wins.

*Groups.* `subscribe` makes the consumer a member of `group_id`
(`mmlog/client/group.py` has the protocol, `assignors.py` the assignors): the
group's coordinator shares the partitions of the subscribed topics out among the
members, and shares them again whenever a member joins, leaves or dies. The
rebalance is eager, as with Kafka's range and roundrobin assignors: in the poll
that learns of it, the consumer commits its positions (`enable_auto_commit`),
calls `on_revoke(consumer, partitions)`, gives every partition up and rejoins;
the poll that completes the join assigns the new share and calls
`on_assign(consumer, partitions)`. Callbacks run inside poll, on the
application's thread. Positions start from the committed offsets. A heartbeat
thread keeps the membership alive between polls (why a thread: group.py), so
the application may spend up to `max_poll_interval_ms` between two polls, and a
consumer that dies loses its partitions after `session_timeout_ms`.

*Commits and delivery.* `commit()` stores the positions (the offset of the next
record the application has not been handed yet) of the assigned partitions, or
given offsets; with `enable_auto_commit` poll does that every
`auto_commit_interval_ms`, and so do a revoke and `close()`. Positions move only
when poll hands records over, so everything committed was handed to the
application before the poll that commits it: delivery is at-least-once. After a
crash or a rebalance, the records after the last commit are delivered again (to
whoever holds the partition then); nothing is skipped. An `assign()` consumer
with a `group_id` commits as Kafka's do, with generation -1 and no member id.

*Fetching.* Each leader broker always has one Fetch v11 in flight covering every
fetchable partition it leads, long-polled with `fetch_max_wait_ms` /
`fetch_min_bytes`. When a response arrives, the partition chunks' batch headers
are scanned (`bulk.scan_chunk`, microseconds per MiB) to advance the fetch
offsets, the **next Fetch is sent at once**, and only then are the chunks
decoded (`bulk.decode_chunk`, CRC-32C checked unless `check_crcs=False`) and
queued for the application. So the broker is already reading the next chunk
while the application works on this one. Chunks start at the batch holding the
fetch offset and may end in part of a batch; the bulk decoder drops records
below the fetch offset, the partial tail (fetched again next time) and control
batches. At most two undelivered chunks are buffered per partition; the
application's poll drains them.

*Transactions.* `isolation_level="read_committed"` (the default, as librdkafka's;
Kafka's Java consumer defaults to read_uncommitted) fetches with isolation level 1:
the broker stops at the last stable offset, so records of open transactions wait,
and each chunk comes with the aborted transactions it overlaps, whose batches the
bulk decoder drops whole (`bulk.aborted_batches`, per batch, no per-record loop).
`read_uncommitted` reads up to the high watermark and keeps aborted records. Offset
resets and `end_offsets` ask for the latest offset under the same isolation level
(the last stable offset for read_committed).

*Positions move on hand-over.* `poll` returns every chunk buffered and sets each
partition's position past it. `seek`, `seek_to_beginning`/`end` and an offset
reset bump the partition's *epoch*: buffered chunks and in-flight responses of
an older epoch are dropped on arrival, and the record iterator stops yielding a
stale chunk at the next record. A seek while that partition's Fetch is parked at
the broker takes effect when the parked Fetch returns (at most
`fetch_max_wait_ms`), as in Kafka's consumer.

*Errors.* OFFSET_OUT_OF_RANGE resets per `auto_offset_reset` (or raises
`OffsetOutOfRange` with "none"). NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
LEADER_NOT_AVAILABLE and storage errors refresh metadata and retry with backoff.
A lost connection fails its in-flight requests; the consumer reconnects with
exponential backoff (`reconnect_backoff_ms` .. `reconnect_backoff_max_ms`) and
refetches from the fetch offsets, so a broker restart loses and repeats nothing.
A partition error that retrying cannot fix (a corrupt batch, "none" reset) is
raised from `poll` after the records before it, and keeps being raised until
the application seeks. If no broker has answered for `request_timeout_ms`, `poll`
raises `ConnectionClosed` (then keeps trying if called again): an unreachable
cluster is a clear error after a bounded wait, never a silent hang.

`wakeup()` is the one method other threads may call: it makes a blocked `poll`
(or iteration) raise `WakeupError` in the consuming thread.
"""

from __future__ import annotations

import collections
import itertools
import logging
import random
import re
import selectors
import time
from typing import Iterable, Iterator

from mmlog.security.client import ClientSecurity
from mmlog.client.assignors import ASSIGNORS
from mmlog.client.channel import Channel
from mmlog.client.cluster import Cluster
from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.group import CommitFailedError  # noqa: F401  (commit() raises it; importable from here too)
from mmlog.client.group import NEED_JOIN, STABLE, GroupMembership, is_pattern
from mmlog.client.notifier import Notifier
from mmlog.client.records import ConsumerRecord, TopicPartition, as_topic_partition
from mmlog.errors import (CoordinatorNotAvailable, CorruptMessage, KafkaError, KafkaStorageError, LeaderNotAvailable,
                          NotLeaderOrFollower, OffsetOutOfRange, RequestTimedOut, UnknownTopicOrPartition,
                          error_for_code)
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import fetch, list_offsets

MiB = 1 << 20
FETCH_VERSION = 11  # the highest non-flexible Fetch; records are the last field of each partition
LIST_OFFSETS_VERSION = 5
# isolation_level (Kafka's isolation.level): read_committed, librdkafka's default and ours, reads up to the
# last stable offset and drops aborted transactions; read_uncommitted (the Java client's default) reads
# up to the high watermark, aborted records included. Both skip transaction markers.
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
EARLIEST = -2  # ListOffsets timestamps
LATEST = -1
COMMITTED = "committed"  # a pending reset that asks the group's committed offset (OffsetFetch), not ListOffsets
RESETS = {"earliest": EARLIEST, "latest": LATEST, "none": None}
_LISTED = (EARLIEST, LATEST)  # the resets ListOffsets answers
MAX_BUFFERED_CHUNKS = 2  # per partition: the one being handed over and the next
# Errors a metadata refresh (new leader, topic created) can cure: retry with backoff.
REFRESH_CODES = {NotLeaderOrFollower.code, UnknownTopicOrPartition.code, LeaderNotAvailable.code,
                  KafkaStorageError.code}


log = logging.getLogger("mmlog.client.consumer")


class NoOffsetForPartition(KafkaError):
    """A partition has no position, and auto_offset_reset is "none": seek first."""


class WakeupError(Exception):
    """`Consumer.wakeup()` interrupted a blocking poll."""


class _Partition:
    """The consumer's state for one assigned partition."""

    __slots__ = ("tp", "position", "fetch_offset", "reset", "resetting", "epoch", "leader", "fetching",
                 "halted", "error", "buffered", "fetch_bytes", "retry_at", "high_watermark", "committed")

    def __init__(self, tp: TopicPartition, fetch_bytes: int) -> None:
        self.tp = tp
        self.position: int | None = None  # next offset for the application
        self.fetch_offset: int | None = None  # next offset to fetch
        self.reset: int | str | None = None  # EARLIEST/LATEST: a ListOffsets is due; COMMITTED: an OffsetFetch
        self.resetting = False  # that ListOffsets (or OffsetFetch) is in flight
        self.epoch = 0  # bumped on every jump of the position; older data is dropped
        self.leader = -1  # node id, -1 unknown
        self.fetching = False  # part of a Fetch in flight
        self.halted = False  # an error is queued for the application: fetch nothing more until a seek
        self.error: BaseException | None = None  # raised by poll until a seek
        self.buffered = 0  # chunks waiting in the consumer's ready queue
        self.fetch_bytes = fetch_bytes  # partition_max_bytes (doubled while no whole batch fits)
        self.retry_at = 0.0  # backoff after a retriable error
        self.high_watermark = -1
        self.committed: int | None = None  # the offset this consumer last committed (or read) for it

    def jump(self, offset: int | None, reset: int | None = None) -> None:
        """Move to offset (or to a pending reset), dropping everything fetched for the old position."""
        self.epoch += 1
        self.position = self.fetch_offset = offset
        self.reset = reset
        self.halted = False
        self.error = None
        self.retry_at = 0.0

    @property
    def fetchable(self) -> bool:
        return (self.fetch_offset is not None and self.reset is None and not self.fetching and not self.halted
                and self.buffered < MAX_BUFFERED_CHUNKS)


class Consumer:
    """Reads partitions from mmlog (or any Kafka-protocol broker); see the module docstring.

    Group options (Kafka's consumer settings of the same names, in milliseconds): `group_id`;
    `enable_auto_commit` / `auto_commit_interval_ms`; `session_timeout_ms` (how soon a dead member
    loses its partitions; the broker bounds it with group.min/max.session.timeout.ms);
    `heartbeat_interval_ms` (below the session timeout; a third of it is usual);
    `max_poll_interval_ms` (the longest the application may take between polls, also the
    rebalance timeout); `partition_assignment_strategy` ("range", "roundrobin", in order of
    preference); `group_instance_id` (static membership, KIP-345).
    """

    def __init__(self, bootstrap: str, *, group_id: str | None = None, auto_offset_reset: str = "latest",
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 5_000,
                 session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 3_000,
                 max_poll_interval_ms: int = 300_000,
                 partition_assignment_strategy: tuple[str, ...] | list[str] | str = ("range", "roundrobin"),
                 group_instance_id: str | None = None,
                 fetch_max_bytes: int = 50 * MiB, max_partition_fetch_bytes: int = 1 * MiB,
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1, client_id: str = "mmlog",
                 request_timeout_ms: int = 30_000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1_000, retry_backoff_ms: int = 100,
                 metadata_max_age_ms: int = 300_000, check_crcs: bool = True,
                 isolation_level: str = "read_committed", **security) -> None:
        if auto_offset_reset not in RESETS:
            raise ValueError(f"auto_offset_reset must be one of {', '.join(RESETS)}, not {auto_offset_reset!r}")
        for name, value, low in (("fetch_max_bytes", fetch_max_bytes, 1),
                                 ("max_partition_fetch_bytes", max_partition_fetch_bytes, 1),
                                 ("fetch_max_wait_ms", fetch_max_wait_ms, 0), ("fetch_min_bytes", fetch_min_bytes, 0),
                                 ("request_timeout_ms", request_timeout_ms, 1),
                                 ("reconnect_backoff_ms", reconnect_backoff_ms, 1),
                                 ("reconnect_backoff_max_ms", reconnect_backoff_max_ms, 1),
                                 ("retry_backoff_ms", retry_backoff_ms, 1),
                                 ("metadata_max_age_ms", metadata_max_age_ms, 1),
                                 ("auto_commit_interval_ms", auto_commit_interval_ms, 1),
                                 ("session_timeout_ms", session_timeout_ms, 1),
                                 ("heartbeat_interval_ms", heartbeat_interval_ms, 1),
                                 ("max_poll_interval_ms", max_poll_interval_ms, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation_level!r}")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError(f"heartbeat_interval_ms ({heartbeat_interval_ms}) must be lower than "
                             f"session_timeout_ms ({session_timeout_ms})")
        strategies = ((partition_assignment_strategy,) if isinstance(partition_assignment_strategy, str)
                      else tuple(partition_assignment_strategy))
        if not strategies or any(name not in ASSIGNORS for name in strategies):
            raise ValueError(f"partition_assignment_strategy must name some of {', '.join(ASSIGNORS)}, "
                             f"not {partition_assignment_strategy!r}")
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise ValueError(f"group_id must be a non-empty string, not {group_id!r}")
        if group_instance_id is not None and (group_id is None or not group_instance_id):
            raise ValueError("group_instance_id needs a group_id (and must not be empty)")
        from mmlog.client import bulk  # numba: paid by consumers only, not by `import mmlog.client`

        bulk.warm()  # load the compiled kernels now (about 0.3 s once per process), not on the first record
        self._bulk = bulk
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.client_id = client_id
        self._reset_policy = RESETS[auto_offset_reset]
        self.isolation_level = isolation_level
        self._isolation = ISOLATION_LEVELS[isolation_level]
        self._fetch_max_bytes = fetch_max_bytes
        self._partition_bytes = max_partition_fetch_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._min_bytes = fetch_min_bytes
        self._request_timeout = request_timeout_ms / 1000
        self._backoff_min = reconnect_backoff_ms / 1000
        self._backoff_max = max(reconnect_backoff_max_ms, reconnect_backoff_ms) / 1000
        self._retry_backoff = retry_backoff_ms / 1000
        self._metadata_max_age = metadata_max_age_ms / 1000
        self._check_crcs = check_crcs
        self._cluster = Cluster(bootstrap, client_id=client_id, timeout=self._request_timeout,
                                security=ClientSecurity.from_options(**security))
        self._assigned: dict[TopicPartition, _Partition] = {}
        self._ready: collections.deque = collections.deque()  # (state, epoch, RecordArrays | exception)
        self._channels: dict[int, Channel] = {}
        self._registered: dict[int, int] = {}  # node -> selector events
        self._fetching: set[int] = set()  # nodes with a Fetch in flight
        self._reconnect: dict[int, tuple[float, float, int]] = {}  # node -> (retry at, last delay, failures)
        self._need_metadata = True
        self._metadata_at = float("-inf")
        self._metadata_retry_at = 0.0
        self._metadata_delay = self._retry_backoff
        self._failing_since: float | None = None
        self._last_error: BaseException | None = None
        self._yielding: tuple[_Partition, list] | None = None  # the chunk the iterator is yielding
        self._selector = selectors.DefaultSelector()
        self._waker = Notifier(on_wake=self._woke)  # wakeup(): makes the poll raise WakeupError
        self._selector.register(self._waker.sock, self._waker.events(), self._waker)
        self._woken = False
        self._closed = False
        # the group (None without a group_id)
        self._auto_commit = enable_auto_commit and group_id is not None
        self._auto_commit_interval = auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._on_assign = self._on_revoke = None
        self._group: GroupMembership | None = None
        if group_id is not None:
            self._group = GroupMembership(
                self._cluster, group_id, client_id=client_id, session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms, max_poll_interval_ms=max_poll_interval_ms,
                strategies=strategies, group_instance_id=group_instance_id, request_timeout=self._request_timeout,
                retry_backoff=self._retry_backoff, backoff_max=self._backoff_max,
                metadata_max_age=self._metadata_max_age, selector=self._selector,
                note_failure=self._note_failure, note_success=self._note_success)

    # ------------------------------------------------------------------ assignment and positions

    def assign(self, partitions: Iterable) -> None:
        """Consume exactly these partitions ((topic, partition) pairs); positions of kept ones stay.
        With a group_id, new ones start from the group's committed offsets. Not while subscribed."""
        wanted = list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        self._check_open()
        if self._group is not None and self._group.subscribed:
            raise ValueError("the consumer is subscribed: assign() and subscribe() do not mix (unsubscribe first)")
        self._set_assignment(wanted)

    def _set_assignment(self, wanted: list[TopicPartition]) -> None:
        old = self._assigned
        self._assigned = {}
        for tp in wanted:
            st = old.pop(tp, None)
            if st is None:
                st = _Partition(tp, self._partition_bytes)
                self._start_position(st)
                self._need_metadata = True
            self._assigned[tp] = st
        for st in old.values():  # dropped: forget their buffered data
            self._drop(st)
            st.epoch += 1

    def unassign(self) -> None:
        self.assign([])

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    # ------------------------------------------------------------------ groups

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:
        """Join `group_id` and consume this member's share of the topics' partitions (see the module docstring).

        `topics`: a list of topic names, or a pattern (an `re.Pattern`, or a string starting with
        "^", as librdkafka spells them) matched with `re.match` against every topic name, as
        kafka-python does, and rechecked every `metadata_max_age_ms`. The join happens in
        the following polls; `on_assign(consumer, partitions)` and `on_revoke(consumer, partitions)`
        run inside poll when the share changes. Subscribing again replaces the subscription and the
        callbacks (a changed subscription rejoins); an empty list unsubscribes.
        """
        self._check_open()
        group = self._group
        if group is None:
            raise ValueError("subscribe() needs a group_id (Consumer(..., group_id=...))")
        if is_pattern(topics):
            if isinstance(topics, str):
                try:
                    topics = re.compile(topics)
                except re.error as exc:
                    raise ValueError(f"bad topic pattern {topics!r}: {exc}") from None
        else:
            if isinstance(topics, str):
                topics = [topics]
            topics = list(topics)
            if not all(isinstance(t, str) and t for t in topics):
                raise TypeError(f"subscribe() wants topic names (non-empty strings), got {topics!r}")
            if not topics:
                self.unsubscribe()
                return
        if not group.subscribed and self._assigned:
            raise ValueError("the consumer has assigned partitions: assign() and subscribe() do not mix "
                             "(unassign() first)")
        for callback in (on_assign, on_revoke):
            if callback is not None and not callable(callback):
                raise TypeError(f"on_assign/on_revoke must be callable, not {callback!r}")
        self._on_assign, self._on_revoke = on_assign, on_revoke
        group.subscribe(topics)

    def unsubscribe(self) -> None:
        """Give the partitions up (commit, on_revoke) and leave the group."""
        self._check_open()
        group = self._group
        if group is None or not group.subscribed:
            return
        try:
            if self._assigned:
                self._revoke(commit=not group.lost)
        finally:
            self._leave(time.monotonic() + min(self._request_timeout, 5.0))
            group.unsubscribe()
            self._on_assign = self._on_revoke = None

    def subscription(self) -> set[str]:
        """The topics subscribed to (a pattern's current matches); empty when not subscribed."""
        return set(self._group.topics or ()) if self._group is not None else set()

    def commit(self, offsets=None, asynchronous: bool = False, callback=None) -> None:
        """Store offsets in the group: the positions of the assigned partitions (the next record each will
        hand over), or the given {(topic, partition): offset}.

        Synchronous by default: returns once the coordinator has stored them (retrying while the
        coordinator moves or loads, up to request_timeout_ms) and raises `CommitFailedError` if the
        group rebalanced first. With asynchronous=True it returns at once; `callback(offsets, exc)`
        (exc None on success) then runs inside a later poll, commit or close.
        """
        self._check_open()
        if self._group is None:
            raise ValueError("commit() needs a group_id (Consumer(..., group_id=...))")
        if offsets is None:
            wanted = self._positions()
        else:
            wanted = {}
            for tp, offset in dict(offsets).items():
                if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                    raise ValueError(f"offset must be an integer >= 0, not {offset!r}")
                wanted[as_topic_partition(tp)] = offset
        if not wanted:
            if callback is not None and asynchronous:
                callback({}, None)
            return
        if asynchronous:
            self._commit_async(wanted, callback)
        else:
            self._commit_sync(wanted, time.monotonic() + self._request_timeout)

    def committed(self, partitions: Iterable, timeout: float | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where nothing was committed)."""
        self._check_open()
        if self._group is None:
            raise ValueError("committed() needs a group_id (Consumer(..., group_id=...))")
        tps = list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        if not tps:
            return {}
        timeout = self._request_timeout if timeout is None else timeout
        answer = self._group_request(
            lambda answer: self._group.send_offset_fetch(
                tps, lambda result, exc: answer.update(result=result, exc=exc)),
            time.monotonic() + timeout, f"committed offsets of group {self.group_id!r} not read within {timeout:g} s")
        return {tp: (offset if offset >= 0 else None) for tp, offset in answer["result"].items()}

    def _commit_async(self, offsets: dict[TopicPartition, int], callback=None) -> None:
        def done(exc: BaseException | None) -> None:
            if exc is None:
                self._mark_committed(offsets)
            else:
                log.warning("group %s: asynchronous commit of %d offsets failed: %s", self.group_id, len(offsets),
                            exc)
            if callback is not None:
                callback(offsets, exc)

        if not self._group.send_commit(offsets, done):
            done(CoordinatorNotAvailable(f"no connection to the coordinator of group {self.group_id!r}"))

    def _commit_sync(self, offsets: dict[TopicPartition, int], deadline: float) -> None:
        """Commit and wait for the answer, retrying retriable errors until the deadline."""
        self._group_request(lambda answer: self._group.send_commit(offsets, lambda exc: answer.update(exc=exc)),
                            deadline, f"commit to group {self.group_id!r} not done in time")
        self._mark_committed(offsets)

    def _group_request(self, send, deadline: float, failed: str) -> dict:
        """Send a request to the coordinator and run the event loop until it is answered, again after a
        retriable error until the deadline (then RequestTimedOut: `failed`, and the last error).
        `send(answer)` sends it with a callback that fills the dict `answer` ("exc": None on success),
        or returns False when there is no coordinator connection right now. Returns the answer."""
        while True:
            answer: dict = {}
            if send(answer):
                self._wait(lambda: bool(answer), deadline)
            exc = answer.get("exc") if answer else (self._last_error or CoordinatorNotAvailable(
                f"no connection to the coordinator of group {self.group_id!r}"))
            if answer and exc is None:
                return answer
            if answer and not getattr(exc, "retriable", False):
                raise exc
            if not self._pause(deadline):
                raise RequestTimedOut(f"{failed} ({exc})")

    def _positions(self, changed_only: bool = False) -> dict[TopicPartition, int]:
        """The positions of the assigned partitions that have one; with changed_only, only those that
        differ from what this consumer last committed."""
        return {st.tp: st.position for st in self._assigned.values()
                if st.position is not None and not (changed_only and st.position == st.committed)}

    def _mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            st = self._assigned.get(tp)
            if st is not None:
                st.committed = offset

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

    def _revoke(self, commit: bool) -> None:
        """Give every partition up before a rejoin: commit the positions (auto-commit), on_revoke, unassign.
        An on_revoke that raises still loses the partitions; its exception is raised afterwards."""
        group = self._group
        revoked = sorted(self._assigned)
        if commit and self._auto_commit:
            positions = self._positions()
            if positions:
                try:
                    self._commit_sync(positions, time.monotonic() + self._request_timeout)
                except KafkaError as exc:  # the records since the last commit are delivered again: at-least-once
                    log.warning("group %s: commit before giving up %d partitions failed: %s", group.group_id,
                                len(positions), exc)
        try:
            if self._on_revoke is not None and revoked:
                self._on_revoke(self, revoked)
        finally:
            self._set_assignment([])
            group.lost = False

    def _leave(self, deadline: float) -> None:
        """LeaveGroup, waiting (at most until the deadline) for the answer so the others rebalance at once."""
        answer: dict = {}
        try:
            if self._group.send_leave(lambda exc: answer.update(exc=exc)):
                self._wait(lambda: bool(answer), deadline)
        except KafkaError as exc:
            log.warning("group %s: leaving the group failed: %s", self.group_id, exc)

    def _group_step(self) -> None:
        """The group's part of a poll: heartbeat news, revoke and rejoin, a new assignment, auto-commit.
        Application callbacks run here, in the application's thread, never inside a socket callback."""
        group = self._group
        now = time.monotonic()
        group.polled(now)
        group.take_heartbeat_event()
        if group.fatal is not None:
            raise group.fatal
        if group.subscribed:
            group.watch_metadata(now)
            if group.state == NEED_JOIN:
                if self._assigned:
                    self._revoke(commit=not group.lost)
                group.join(time.monotonic())
            partitions = group.take_assignment()
            if partitions is not None:
                self._set_assignment(partitions)
                if self._on_assign is not None:
                    self._on_assign(self, list(partitions))
        if self._auto_commit:
            now = time.monotonic()
            if now >= self._next_auto_commit:
                self._next_auto_commit = now + self._auto_commit_interval
                if not group.subscribed or group.state == STABLE:
                    changed = self._positions(changed_only=True)
                    if changed:
                        self._commit_async(changed)

    def _group_wait(self, now: float) -> float:
        """How long a poll may block before the group has work due (a join to retry, a check, a commit)."""
        wait = self._group.next_due(now)
        if self._auto_commit:
            wait = min(wait, max(0.0, self._next_auto_commit - now))
        return wait

    def seek(self, tp, offset: int) -> None:
        """Make `offset` the next record of the partition (takes effect on the next poll)."""
        st = self._state(tp)
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an integer >= 0, not {offset!r}")
        self._drop(st)
        st.jump(offset)

    def seek_to_beginning(self, *partitions) -> None:
        """Move to the log start offset of the partitions (all assigned ones if none given), lazily."""
        for st in self._states(partitions):
            self._drop(st)
            st.jump(None, EARLIEST)

    def seek_to_end(self, *partitions) -> None:
        """Move to the end (the high watermark) of the partitions (all assigned if none given), lazily:
        records produced after the offset is looked up (on the next poll or position call) are consumed."""
        for st in self._states(partitions):
            self._drop(st)
            st.jump(None, LATEST)

    def position(self, tp, timeout: float | None = None) -> int:
        """The offset of the next record the application will get, looking it up if it is not known yet
        (RequestTimedOut after timeout seconds; default request_timeout_ms)."""
        st = self._state(tp)
        timeout = self._request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while st.position is None:
            if st.error is not None:
                raise st.error
            left = self._left(deadline)
            if left == 0:
                raise RequestTimedOut(f"position of {st.tp.topic}-{st.tp.partition} not known within {timeout} s")
            self._io(left)
            if self._assigned.get(st.tp) is not st:
                raise ValueError(f"{st.tp.topic}-{st.tp.partition} was unassigned")
        return st.position

    def highwater(self, tp) -> int | None:
        """The partition's high watermark as of the last fetch response (None before one)."""
        st = self._state(tp)
        return None if st.high_watermark < 0 else st.high_watermark

    def partitions_for(self, topic: str) -> set[int]:
        """The partition ids of a topic (UnknownTopicOrPartition if it does not exist)."""
        self._check_open()
        try:
            return set(range(self._cluster.topic(topic, allow_auto_create=False).partitions))
        except UnknownTopicOrPartition:
            raise UnknownTopicOrPartition(f"topic {topic!r} does not exist") from None
        except ProtocolError as exc:
            raise ConnectionClosed(f"{self._where()} does not speak the Kafka protocol: {exc}") from None

    def beginning_offsets(self, partitions: Iterable, timeout: float | None = None) -> dict[TopicPartition, int]:
        """The log start offset of each partition (a blocking ListOffsets per leader)."""
        return self._list_offsets(partitions, EARLIEST, timeout)

    def end_offsets(self, partitions: Iterable, timeout: float | None = None) -> dict[TopicPartition, int]:
        """The end offset (high watermark: the offset the next record will get) of each partition."""
        return self._list_offsets(partitions, LATEST, timeout)

    # ------------------------------------------------------------------ consuming

    def poll_batch(self, timeout: float | None = None) -> list:
        """Every decoded chunk ready, as `bulk.RecordArrays` (one per partition and fetch), waiting up to
        timeout seconds (None: until there is one) for the first. Empty after the timeout."""
        return [arrays for _, _, arrays in self._poll_chunks(timeout)]

    def poll(self, timeout: float | None = None) -> list[ConsumerRecord]:
        """Every record ready, waiting up to timeout seconds (None: until there is one). [] after the timeout."""
        chunks = self._poll_chunks(timeout)
        if len(chunks) == 1:
            return chunks[0][2].records()
        with self._bulk.gc_paused():
            return list(itertools.chain.from_iterable(arrays.iter_records() for _, _, arrays in chunks))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """The never-ending stream of records of the assigned partitions, in offset order per partition.

        Records are built lazily, chunk by chunk, by C-level iterators chained
        together: no Python frame runs per record (a generator's `yield from`
        would resume one for each).
        """
        return itertools.chain.from_iterable(self._chunk_iterators())

    def _chunk_iterators(self) -> Iterator[Iterator[ConsumerRecord]]:
        while True:
            for st, epoch, arrays in self._poll_chunks(None):
                if st.epoch != epoch:
                    continue  # seeked while an earlier chunk was being yielded
                records, guard = arrays._record_iterator()
                self._yielding = (st, guard)
                yield records
            self._yielding = None

    def wakeup(self) -> None:
        """Make the poll blocked in another thread raise WakeupError (safe to call from any thread)."""
        self._waker.notify()

    def _woke(self) -> None:
        self._woken = True

    def close(self) -> None:
        """Close the consumer: with a group, commit the positions (enable_auto_commit), give the partitions
        up (on_revoke) and leave the group (a static member stays until its session ends); then close
        the connections. The consumer cannot be used afterwards."""
        if self._closed:
            return
        try:
            if self._group is not None:
                self._close_group()
        finally:
            self._closed = True
            if self._group is not None:
                self._group.close()
            self._close_connections()

    def _close_group(self) -> None:
        group = self._group
        deadline = time.monotonic() + self._request_timeout
        try:
            if group.subscribed:
                if self._assigned:
                    try:
                        self._revoke(commit=not group.lost)
                    except Exception:  # noqa: BLE001 - on_revoke failed: leave anyway, as Java's close does
                        log.exception("group %s: on_revoke failed while closing", self.group_id)
            elif self._auto_commit:
                positions = self._positions(changed_only=True)
                if positions:
                    self._commit_sync(positions, deadline)
        except KafkaError as exc:
            log.warning("group %s: final commit failed: %s", self.group_id, exc)
        if group.subscribed:
            self._leave(min(deadline, time.monotonic() + 5.0))

    def _close_connections(self) -> None:
        for node in list(self._channels):
            self._forget_channel(node)
        self._selector.close()
        self._waker.close()
        self._ready.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ handing chunks over

    def _poll_chunks(self, timeout: float | None) -> list:
        self._check_open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._raise_errors()
            if self._group is not None:
                self._group_step()
            self._io(0)  # read what has arrived and keep each broker's Fetch in flight
            chunks = self._take_ready()
            if chunks:
                return chunks
            self._raise_errors()
            left = self._left(deadline)
            if left == 0:
                return []
            if self._group is not None:  # wake up for the group's next step (a join to retry, a commit due)
                left = min(left, self._group_wait(time.monotonic()))
            self._io(left)
            chunks = self._take_ready()
            if chunks:
                return chunks

    def _take_ready(self) -> list:
        out = []
        ready = self._ready
        while ready:
            st, epoch, item = ready.popleft()
            st.buffered -= 1
            if st.epoch != epoch or self._assigned.get(st.tp) is not st:
                continue
            if isinstance(item, BaseException):
                st.error = item
                continue
            st.position = item.next_offset
            if len(item):
                out.append((st, epoch, item))
        return out

    def _raise_errors(self) -> None:
        if self._woken:
            self._woken = False
            raise WakeupError("consumer.wakeup() was called")
        for st in self._assigned.values():
            if st.error is not None:
                raise st.error

    def _drop(self, st: _Partition) -> None:
        """Forget the partition's buffered chunks, and stop the iterator yielding its current one."""
        if st.buffered:
            self._ready = collections.deque(entry for entry in self._ready if entry[0] is not st)
            st.buffered = 0
        if self._yielding is not None and self._yielding[0] is st:
            self._yielding[1].clear()
            self._yielding = None

    def _start_position(self, st: _Partition) -> None:
        """A new partition starts at the group's committed offset if there is one, else per auto_offset_reset."""
        if self._group is not None:
            st.jump(None, COMMITTED)
        else:
            self._reset_position(st)

    def _reset_position(self, st: _Partition) -> None:
        """No committed offset: start per auto_offset_reset ("none": an error until the application seeks)."""
        if self._reset_policy is None:
            st.jump(None)
            st.error = NoOffsetForPartition(
                f"{st.tp.topic}-{st.tp.partition} has no position and auto_offset_reset is 'none': seek first")
            st.halted = True
        else:
            st.jump(None, self._reset_policy)

    # ------------------------------------------------------------------ the event loop

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
        by_node: dict[int, list[_Partition]] = {}
        for st in self._assigned.values():
            if st.leader >= 0:
                by_node.setdefault(st.leader, []).append(st)
            if st.retry_at > now:
                wait = min(wait, st.retry_at - now)
        for node, states in by_node.items():
            if not any(st.fetchable or (st.reset in _LISTED and not st.resetting) for st in states):
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

    # ------------------------------------------------------------------ ListOffsets for resets

    def _send_resets(self, node: int, states: list[_Partition], now: float) -> None:
        due = [st for st in states if st.reset in _LISTED and not st.resetting and st.retry_at <= now]
        if not due:
            return
        sent = {st.tp: (st, st.epoch) for st in due}
        for st in due:
            st.resetting = True
        body = _list_offsets_request([(st.tp, st.reset) for st in due], self._isolation)
        self._channels[node].send(list_offsets.API_KEY, LIST_OFFSETS_VERSION, body,
                                  lambda body, exc: self._on_reset(node, sent, body, exc))

    def _on_reset(self, node: int, sent: dict, body, exc: BaseException | None) -> None:
        for st, _ in sent.values():
            st.resetting = False
        if exc is not None:
            self._note_failure(exc)
            return
        self._note_success(node)
        now = time.monotonic()
        for tp, code, offset in _list_offsets_results(body):
            st, epoch = sent.get(tp, (None, None))
            if st is None or st.epoch != epoch or self._assigned.get(tp) is not st or st.reset is None:
                continue
            if code == 0 and offset >= 0:
                st.position = st.fetch_offset = offset
                st.reset = None
            elif code in REFRESH_CODES:
                self._retry_later(st, now)
            else:
                st.error = error_for_code(code, f"ListOffsets for {tp.topic}-{tp.partition}")
                st.halted = True
        if node in self._channels and not self._channels[node].closed:
            self._send_fetch(node, [st for st in self._assigned.values() if st.leader == node], now)

    # ------------------------------------------------------------------ OffsetFetch for starting positions

    def _send_committed_lookups(self, now: float) -> float:
        """Ask the coordinator for the committed offsets of the partitions waiting for one; return how
        long the event loop may wait before trying again."""
        due = [st for st in self._assigned.values()
               if st.reset == COMMITTED and not st.resetting and st.retry_at <= now]
        if not due:
            return 3600.0
        sent = {st.tp: (st, st.epoch) for st in due}
        for st in due:
            st.resetting = True
        if not self._group.send_offset_fetch(list(sent), lambda result, exc: self._on_committed(sent, result, exc)):
            for st in due:
                st.resetting = False
                st.retry_at = now + self._retry_backoff
            return max(self._retry_backoff, self._group.coordinator_wait(now))
        return 3600.0

    def _on_committed(self, sent: dict, result: dict | None, exc: BaseException | None) -> None:
        now = time.monotonic()
        for st, _ in sent.values():
            st.resetting = False
        for tp, (st, epoch) in sent.items():
            if st.epoch != epoch or self._assigned.get(tp) is not st or st.reset != COMMITTED:
                continue  # seeked or unassigned meanwhile
            if exc is not None or tp not in result:
                if exc is not None and not getattr(exc, "retriable", False):
                    st.error = exc
                    st.halted = True
                    continue
                st.retry_at = now + self._retry_backoff
                continue
            offset = result[tp]
            if offset >= 0:
                st.position = st.fetch_offset = st.committed = offset
                st.reset = None
            else:
                self._reset_position(st)

    def _retry_later(self, st: _Partition, now: float) -> None:
        st.leader = -1
        st.retry_at = now + self._retry_backoff
        self._need_metadata = True

    def _list_offsets(self, partitions: Iterable, timestamp: int, timeout: float | None) -> dict:
        """Blocking ListOffsets, one short-lived connection per leader (so no parked Fetch delays it)."""
        self._check_open()
        tps = list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        timeout = self._request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        result: dict[TopicPartition, int] = {}
        last: BaseException | None = None
        while True:
            pending = [tp for tp in tps if tp not in result]
            if not pending:
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOut(f"ListOffsets for {len(pending)} partitions not answered within "
                                      f"{timeout:g} s ({last})")
            try:
                self._cluster.refresh(sorted({tp.topic for tp in pending}), allow_auto_create=False,
                                      timeout=max(0.05, left))
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in pending:
                    info = self._cluster.topics.get(tp.topic)
                    if info is not None and info.error not in (0, LeaderNotAvailable.code):
                        raise error_for_code(info.error, f"topic {tp.topic!r}")
                    if info is not None and tp.partition >= info.partitions and info.error == 0:
                        raise UnknownTopicOrPartition(f"{tp.topic} has no partition {tp.partition}")
                    leader = info.leaders[tp.partition] if info is not None and info.error == 0 else -1
                    if leader in self._cluster.brokers:
                        by_leader.setdefault(leader, []).append(tp)
                for node, group in by_leader.items():
                    broker = self._cluster.brokers[node]
                    with BrokerConnection(broker.host, broker.port, client_id=self.client_id,
                                          security=self._cluster.security,
                                          timeout=max(0.1, deadline - time.monotonic()),
                                          connect_timeout=max(0.1, min(5.0, deadline - time.monotonic()))) as conn:
                        body = conn.request(list_offsets.API_KEY, LIST_OFFSETS_VERSION,
                                            _list_offsets_request([(tp, timestamp) for tp in group],
                                                                  self._isolation))
                    for tp, code, offset in _list_offsets_results(body):
                        if code == 0:
                            result[tp] = offset
                        elif code not in REFRESH_CODES:
                            raise error_for_code(code, f"ListOffsets for {tp.topic}-{tp.partition}")
            except (ConnectionClosed, RequestTimedOut, OSError, ProtocolError) as exc:
                last = exc
            if any(tp not in result for tp in tps):
                time.sleep(min(self._retry_backoff, max(0.0, deadline - time.monotonic())))

    # ------------------------------------------------------------------ Fetch

    def _send_fetch(self, node: int, states: list[_Partition], now: float) -> None:
        """Send the node's next Fetch if none is in flight and some partition of it can fetch."""
        if node in self._fetching:
            return
        due = [st for st in states if st.leader == node and st.fetchable and st.retry_at <= now]
        if not due:
            return
        topics: dict[str, list] = {}
        sent = {}
        for st in due:
            st.fetching = True
            sent[st.tp] = (st, st.epoch, st.fetch_offset)
            topics.setdefault(st.tp.topic, []).append({
                "partition": st.tp.partition, "current_leader_epoch": -1, "fetch_offset": st.fetch_offset,
                "log_start_offset": -1, "partition_max_bytes": st.fetch_bytes})
        body = fetch.REQUEST(
            replica_id=-1, max_wait_ms=self._max_wait_ms, min_bytes=self._min_bytes,
            max_bytes=max(self._fetch_max_bytes, max(st.fetch_bytes for st in due)), isolation_level=self._isolation,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[{"topic": t, "partitions": parts} for t, parts in topics.items()])
        self._fetching.add(node)
        self._channels[node].send(fetch.API_KEY, FETCH_VERSION, body,
                                  lambda body, exc: self._on_fetch(node, sent, body, exc))

    def _on_fetch(self, node: int, sent: dict, body, exc: BaseException | None) -> None:
        self._fetching.discard(node)
        for st, _, _ in sent.values():
            st.fetching = False
        if exc is not None:
            self._note_failure(exc)
            return
        self._note_success(node)
        now = time.monotonic()
        bulk = self._bulk
        chunks = []
        if body.error_code:  # a top-level error (fetch sessions, which mmlog does not use): retry
            for st, _, _ in sent.values():
                st.retry_at = now + self._retry_backoff
        for topic in body.responses:
            for part in topic.partitions:
                entry = sent.get((topic.topic, part.partition_index))
                if entry is None:
                    continue
                st, epoch, offset = entry
                if st.epoch != epoch or st.halted or self._assigned.get(st.tp) is not st:
                    continue  # seeked, reset or unassigned since the request left
                code = part.error_code
                if code == 0:
                    st.high_watermark = part.high_watermark
                    data = part.records
                    if not data:
                        continue
                    scan = bulk.scan_chunk(data, offset)
                    if scan.status == bulk.TRUNCATED:  # the first batch is larger than we asked for
                        st.fetch_bytes = min(st.fetch_bytes * 2, 0x7FFFFFFF)
                        continue
                    st.fetch_bytes = self._partition_bytes
                    if scan.status != bulk.OK:
                        self._halt(st, epoch, CorruptMessage(
                            f"{st.tp.topic}-{st.tp.partition} at offset {offset}: batch at byte {scan.end} of "
                            f"the fetched chunk: {bulk.STATUS_TEXT[scan.status]}"), offset)
                        continue
                    st.fetch_offset = scan.next_offset
                    chunks.append((st, epoch, data, offset, scan, part.aborted_transactions if self._isolation else None))
                elif code == OffsetOutOfRange.code:
                    self._out_of_range(st, offset, part)
                elif code in REFRESH_CODES:
                    self._retry_later(st, now)
                else:
                    self._halt(st, epoch, error_for_code(code, f"fetch {st.tp.topic}-{st.tp.partition} "
                                                                f"at offset {offset}"), offset)
        # The next Fetch leaves before any of these records reach the application.
        states = [st for st in self._assigned.values() if st.leader == node]
        self._send_resets(node, states, now)
        self._send_fetch(node, states, now)
        for st, epoch, data, offset, scan, aborted in chunks:
            try:
                arrays = bulk.decode_chunk(data, offset, topic=st.tp.topic, partition=st.tp.partition,
                                           check_crcs=self._check_crcs, scan=scan, aborted=aborted)
            except CorruptMessage as err:
                self._halt(st, epoch, err, offset)
                continue
            self._ready.append((st, epoch, arrays))
            st.buffered += 1

    def _halt(self, st: _Partition, epoch: int, exc: BaseException, offset: int) -> None:
        """Queue an error behind the partition's good chunks; fetch nothing more for it until a seek."""
        st.halted = True
        empty = self._bulk.RecordArrays.empty(st.tp.topic, st.tp.partition, offset)
        self._ready.append((st, epoch, empty))  # the position stops at the failing offset...
        self._ready.append((st, epoch, exc))  # ...and then poll raises
        st.buffered += 2

    def _out_of_range(self, st: _Partition, offset: int, part) -> None:
        if self._reset_policy is None:
            self._halt(st, st.epoch, OffsetOutOfRange(
                f"{st.tp.topic}-{st.tp.partition}: offset {offset} is outside the log "
                f"[{part.log_start_offset}, {part.high_watermark}] and auto_offset_reset is 'none'"), offset)
            return
        self._drop(st)
        st.jump(None, self._reset_policy)  # position() waits for the reset to resolve

    # ------------------------------------------------------------------ helpers

    def _state(self, tp) -> _Partition:
        self._check_open()
        tp = as_topic_partition(tp)
        st = self._assigned.get(tp)
        if st is None:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return st

    def _states(self, partitions) -> list[_Partition]:
        if not partitions:
            self._check_open()
            return list(self._assigned.values())
        if len(partitions) == 1 and not isinstance(partitions[0], TopicPartition) and isinstance(
                partitions[0], (list, set, frozenset)):
            partitions = tuple(partitions[0])  # seek_to_end([tp1, tp2]) as well as seek_to_end(tp1, tp2)
        return [self._state(tp) for tp in partitions]

    def _where(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self._cluster.bootstrap)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    @staticmethod
    def _left(deadline: float | None) -> float:
        if deadline is None:
            return 3600.0
        return max(0.0, deadline - time.monotonic())


def _list_offsets_request(items: list[tuple[TopicPartition, int]], isolation: int = 0):
    topics: dict[str, list] = {}
    for tp, timestamp in items:
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": timestamp})
    return list_offsets.REQUEST(replica_id=-1, isolation_level=isolation,
                                topics=[{"name": t, "partitions": parts} for t, parts in topics.items()])


def _list_offsets_results(body) -> Iterator[tuple[TopicPartition, int, int]]:
    for topic in body.topics:
        for part in topic.partitions:
            yield TopicPartition(topic.name, part.partition_index), part.error_code, part.offset

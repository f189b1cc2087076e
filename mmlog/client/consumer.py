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

`Consumer` is put together from parts, each a module: the event loop (`consumer_loop.py`), the
fetches (`fetcher.py`), where positions start (`positions.py`), the group methods
(`consumer_group.py`) and each partition's state (`partition_state.py`).

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
import selectors
import time
from typing import Iterable, Iterator

from mmlog.security.client import ClientSecurity
from mmlog.client.assignors import ASSIGNORS
from mmlog.client.channel import Channel
from mmlog.client.cluster import Cluster
from mmlog.client.connection import ConnectionClosed
from mmlog.client.consumer_group import ConsumerGroup
from mmlog.client.consumer_loop import EventLoop
from mmlog.client.fetch_requests import FetchRequests
from mmlog.client.fetcher import Fetching
from mmlog.client.group_offsets import CommitFailedError  # noqa: F401  (commit() raises it; importable from here too)
from mmlog.client.group import GroupMembership
from mmlog.client.notifier import Notifier
from mmlog.client.partition_state import COMMITTED, EARLIEST, LATEST, PartitionState
from mmlog.client.positions import Positions
from mmlog.client.records import ConsumerRecord, TopicPartition, as_topic_partition
from mmlog.errors import KafkaError, RequestTimedOut, UnknownTopicOrPartition
from mmlog.protocol import ProtocolError

MiB = 1 << 20
# isolation_level (Kafka's isolation.level): read_committed, librdkafka's default and ours, reads up to the
# last stable offset and drops aborted transactions; read_uncommitted (the Java client's default) reads
# up to the high watermark, aborted records included. Both skip transaction markers.
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
RESETS = {"earliest": EARLIEST, "latest": LATEST, "none": None}


class NoOffsetForPartition(KafkaError):
    """A partition has no position, and auto_offset_reset is "none": seek first."""


class WakeupError(Exception):
    """`Consumer.wakeup()` interrupted a blocking poll."""


class Consumer(ConsumerGroup, Positions, Fetching, EventLoop):
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
        from mmlog.client import bulk, record_arrays  # numba: paid by consumers only, not by `import mmlog.client`

        bulk.warm()  # load the compiled kernels now (about 0.3 s once per process), not on the first record
        self._bulk = bulk
        self._record_arrays = record_arrays
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
        self._fetch_requests = FetchRequests(client_id, fetch_max_wait_ms, fetch_min_bytes, self._isolation)
        self._request_timeout = request_timeout_ms / 1000
        self._backoff_min = reconnect_backoff_ms / 1000
        self._backoff_max = max(reconnect_backoff_max_ms, reconnect_backoff_ms) / 1000
        self._retry_backoff = retry_backoff_ms / 1000
        self._metadata_max_age = metadata_max_age_ms / 1000
        self._check_crcs = check_crcs
        self._cluster = Cluster(bootstrap, client_id=client_id, timeout=self._request_timeout,
                                security=ClientSecurity.from_options(**security))
        self._assigned: dict[TopicPartition, PartitionState] = {}
        self._ready: collections.deque = collections.deque()  # (state, epoch, RecordArrays | exception)
        self._channels: dict[int, Channel] = {}
        self._registered: dict[int, int] = {}  # node -> selector events
        self._fetching: set[int] = set()  # nodes with a Fetch in flight
        self._throttle_ms = self._throttle_ms_max = 0  # a broker quota's throttle_time_ms: the last, the most
        self._reconnect: dict[int, tuple[float, float, int]] = {}  # node -> (retry at, last delay, failures)
        self._need_metadata = True
        self._metadata_at = float("-inf")
        self._metadata_retry_at = 0.0
        self._metadata_delay = self._retry_backoff
        self._failing_since: float | None = None
        self._last_error: BaseException | None = None
        self._yielding: tuple[PartitionState, list] | None = None  # the chunk the iterator is yielding
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
                st = PartitionState(tp, self._partition_bytes)
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
        """Every decoded chunk ready, as `RecordArrays` (record_arrays.py; one per partition and fetch), waiting up to
        timeout seconds (None: until there is one) for the first. Empty after the timeout."""
        return [arrays for _, _, arrays in self._poll_chunks(timeout)]

    def poll(self, timeout: float | None = None) -> list[ConsumerRecord]:
        """Every record ready, waiting up to timeout seconds (None: until there is one). [] after the timeout."""
        chunks = self._poll_chunks(timeout)
        if len(chunks) == 1:
            return chunks[0][2].records()
        with self._record_arrays.gc_paused():
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

    def metrics(self) -> dict:
        """The throttle_time_ms of a broker's client quota: in the last Fetch answer, and the most so far."""
        return {"throttle_time_ms": self._throttle_ms, "throttle_time_ms_max": self._throttle_ms_max}

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

    def _drop(self, st: PartitionState) -> None:
        """Forget the partition's buffered chunks, and stop the iterator yielding its current one."""
        if st.buffered:
            self._ready = collections.deque(entry for entry in self._ready if entry[0] is not st)
            st.buffered = 0
        if self._yielding is not None and self._yielding[0] is st:
            self._yielding[1].clear()
            self._yielding = None

    def _start_position(self, st: PartitionState) -> None:
        """A new partition starts at the group's committed offset if there is one, else per auto_offset_reset."""
        if self._group is not None:
            st.jump(None, COMMITTED)
        else:
            self._reset_position(st)

    def _reset_position(self, st: PartitionState) -> None:
        """No committed offset: start per auto_offset_reset ("none": an error until the application seeks)."""
        if self._reset_policy is None:
            st.jump(None)
            st.error = NoOffsetForPartition(
                f"{st.tp.topic}-{st.tp.partition} has no position and auto_offset_reset is 'none': seek first")
            st.halted = True
        else:
            st.jump(None, self._reset_policy)

    # ------------------------------------------------------------------ helpers

    def _state(self, tp) -> PartitionState:
        self._check_open()
        tp = as_topic_partition(tp)
        st = self._assigned.get(tp)
        if st is None:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return st

    def _states(self, partitions) -> list[PartitionState]:
        if not partitions:
            self._check_open()
            return list(self._assigned.values())
        if len(partitions) == 1 and not isinstance(partitions[0], TopicPartition) and isinstance(
                partitions[0], (list, set, frozenset)):
            partitions = tuple(partitions[0])  # seek_to_end([tp1, tp2]) as well as seek_to_end(tp1, tp2)
        return [self._state(tp) for tp in partitions]

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

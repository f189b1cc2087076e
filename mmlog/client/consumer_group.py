"""The consumer's group methods: subscribe, commit, committed offsets, and the rebalance inside poll.

A mixin of `Consumer` (consumer.py): what the application sees of a group. The group protocol
itself (coordinator, join, heartbeats) is `GroupMembership` (group.py)."""

from __future__ import annotations

import logging
import re
import time
from typing import Iterable

from mmlog.client.group import is_pattern
from mmlog.client.group_states import NEED_JOIN, STABLE
from mmlog.client.records import TopicPartition, as_topic_partition
from mmlog.errors import CoordinatorNotAvailable, KafkaError, RequestTimedOut

log = logging.getLogger("mmlog.client.consumer")


class ConsumerGroup:
    """The consumer's side of its group: subscription, offset commits, revoke and rejoin, auto-commit."""

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:
        """Join `group_id` and consume this member's share of the topics' partitions (consumer.py's docstring).

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

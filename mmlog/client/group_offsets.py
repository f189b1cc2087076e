"""A group's committed offsets: OffsetCommit with the member's identity, OffsetFetch.

A mixin of `GroupMembership` (group.py). Both go over the coordinator channel, asynchronously; the
consumer waits for them where it must (consumer_group.py)."""

from __future__ import annotations

import time

from mmlog.client.connection import ConnectionClosed
from mmlog.client.group_states import COORDINATOR_MOVED, MEMBERSHIP_LOST, STABLE
from mmlog.client.records import TopicPartition
from mmlog.errors import KafkaError, RebalanceInProgress, UnknownMemberId, error_for_code
from mmlog.protocol.messages import offset_commit, offset_fetch

OFFSET_COMMIT_VERSION = 7
OFFSET_FETCH_VERSION = 5


class CommitFailedError(KafkaError):
    """The commit came too late: the group rebalanced (or dropped this member) first, so the partitions
    may belong to another member now. Nothing is lost: the records since the last successful commit
    are delivered again, to whoever holds the partition. The next poll rejoins the group."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class GroupOffsets:
    """Commits offsets as the member (or as an assign() consumer) and reads the committed ones."""

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
        if codes & COORDINATOR_MOVED:
            self.forget_coordinator()
        if codes & (MEMBERSHIP_LOST | {RebalanceInProgress.code}):
            code = min(codes & (MEMBERSHIP_LOST | {RebalanceInProgress.code}))
            if self.subscribed and self.state == STABLE and generation == self.generation:
                if code == UnknownMemberId.code:
                    self.member_id = ""
                self.request_rejoin(f"a commit answered {error_for_code(code)!r}",
                                    lost=code in MEMBERSHIP_LOST)
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
                if codes & COORDINATOR_MOVED:
                    self.forget_coordinator()
                callback(None, error_for_code(min(codes), f"OffsetFetch for group {self.group_id!r}"))
                return
            callback({TopicPartition(t.name, p.partition_index): p.committed_offset
                      for t in body.topics for p in t.partitions}, None)

        ch.send(offset_fetch.API_KEY, OFFSET_FETCH_VERSION, offset_fetch.REQUEST(
            group_id=self.group_id, topics=[{"name": t, "partition_indexes": ps} for t, ps in topics.items()]),
            done)
        return True

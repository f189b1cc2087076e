"""A group's committed offsets: OffsetCommit and OffsetFetch, transactional offsets (TxnOffsetCommit and
the markers that end them), OffsetDelete, and what removes offsets by itself (a deleted topic,
`offsets.retention.minutes`). `GroupOffsets` is a part of `GroupCoordinator`, which holds the state
named below (coordinator.py tells the rules)."""

from __future__ import annotations

import logging
import time
from typing import Callable

from mmlog.coordinator.answers import (COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND,
                                       GROUP_SUBSCRIBED_TO_TOPIC, ILLEGAL_GENERATION, INVALID_COMMIT_OFFSET_SIZE,
                                       INVALID_GROUP_ID, NON_EMPTY_GROUP, NONE, OFFSET_METADATA_TOO_LARGE,
                                       PRODUCER_FENCED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
                                       UNKNOWN_TOPIC_OR_PARTITION, UNSTABLE_OFFSET_COMMIT)
from mmlog.coordinator.groups import COMPLETING, DEAD, EMPTY, Group, Reply
from mmlog.coordinator.offset_log import FrameTooLarge
from mmlog.coordinator.offsets import (GroupDelete, OffsetCommit, OffsetDelete, TopicDelete, TxnOffsetCommit,
                                      TxnOffsetEnd)
from mmlog.coordinator.rebalance import Rebalance

log = logging.getLogger(__name__)

MAX_TXN_EPOCHS = 100_000  # (group, producer id) epochs remembered; a producer idle past this many others is forgotten


class GroupOffsets(Rebalance):
    """The offsets groups commit, transactionally or not, and their removal."""

    partitions_of: Callable[[str], int | None]
    max_metadata: int
    retention_ms: int
    _txn_epochs: dict[tuple[str, int], int]
    _txn_writes: dict[tuple[str, int], list]

    def offset_commit(self, args: dict, reply: Reply) -> None:
        group_id, member_id, generation = args["group_id"], args["member_id"], args["generation_id"]
        topics = args["topics"]  # [(topic, [(partition, offset, leader_epoch, metadata)])]
        group = self.groups.get(group_id)

        def answer_all(code: int) -> None:
            reply({"topics": [{"name": t, "partitions": [{"partition_index": p[0], "error_code": code} for p in ps]}
                              for t, ps in topics]})

        if group is None:
            if generation >= 0:  # a member of a generation this coordinator never had
                answer_all(ILLEGAL_GENERATION)
                return
        elif group.is_(DEAD):
            answer_all(COORDINATOR_NOT_AVAILABLE)
            return
        elif group.is_static_member_fenced(member_id, args["group_instance_id"]):
            answer_all(FENCED_INSTANCE_ID)
            return
        elif not (generation < 0 and group.is_(EMPTY)):
            # Kafka's order: membership and generation first, then the state.
            if member_id not in group.members:
                answer_all(UNKNOWN_MEMBER_ID)
                return
            if generation != group.generation:
                answer_all(ILLEGAL_GENERATION)
                return
            if group.is_(COMPLETING):
                answer_all(REBALANCE_IN_PROGRESS)
                return
            member = group.members[member_id]
            self._expire_later(group, member, member.session_timeout_ms)
        self._store_offsets(group_id, topics, reply)

    def txn_offset_commit(self, args: dict, reply: Reply) -> None:
        """TxnOffsetCommit: offsets held pending for the producer until its transaction's marker. Kafka's
        checks: a producer epoch older than one a marker or a commit of this producer already carried is
        fenced (Kafka's log refuses such a batch in __consumer_offsets); a dead group is not available; a
        fenced static member is fenced (v3+); a named member must be in the group, a generation current."""
        group_id, member_id, generation = args["group_id"], args["member_id"], args["generation_id"]
        topics, pid, epoch = args["topics"], args["producer_id"], args.get("producer_epoch", -1)
        group = self.groups.get(group_id)
        key = (group_id, pid)
        code = NONE
        if epoch < self._txn_epochs.get(key, -1):
            code = PRODUCER_FENCED
        elif group is not None and group.is_(DEAD):
            code = COORDINATOR_NOT_AVAILABLE
        elif group is not None and group.is_static_member_fenced(member_id, args.get("group_instance_id")):
            code = FENCED_INSTANCE_ID
        elif member_id and (group is None or member_id not in group.members):
            code = UNKNOWN_MEMBER_ID
        elif generation >= 0 and (group is None or generation != group.generation):
            code = ILLEGAL_GENERATION
        if code != NONE:
            reply({"topics": [{"name": t, "partitions": [{"partition_index": p[0], "error_code": code} for p in ps]}
                              for t, ps in topics]})
            return
        self._fence(key, epoch)
        writes = self._txn_writes.setdefault(key, [0, []])
        writes[0] += 1

        def stored(value) -> None:
            reply(value)
            writes[0] -= 1
            if writes[0] == 0:
                del self._txn_writes[key]
                for marker in writes[1]:
                    marker()

        self._store_offsets(group_id, topics, stored, lambda t, p, offset, epoch, metadata, now: TxnOffsetCommit(
            group_id, pid, t, p, offset, epoch, metadata, now))

    def _fence(self, key: tuple[str, int], epoch: int) -> None:
        """Remember the newest epoch of a (group, producer id); kept in memory, at most MAX_TXN_EPOCHS of them."""
        if epoch > self._txn_epochs.get(key, -1):
            self._txn_epochs.pop(key, None)  # to the end: the oldest entries go first
            self._txn_epochs[key] = epoch
            if len(self._txn_epochs) > MAX_TXN_EPOCHS:
                del self._txn_epochs[next(iter(self._txn_epochs))]

    def txn_offsets_end(self, args: dict, reply: Reply) -> None:
        """A transaction's marker for this group: its pending offsets become committed (or are dropped).
        Its epoch fences older commits of the producer; a commit of the producer being written is waited for."""
        group_id, pid, commit = args["group_id"], args["producer_id"], args["commit"]
        key = (group_id, pid)
        self._fence(key, args.get("producer_epoch", -1))
        writes = self._txn_writes.get(key)
        if writes is not None:
            writes[1].append(lambda: self.txn_offsets_end(args, reply))
            return

        def done(exc: BaseException | None) -> None:
            if exc is not None:
                log.error("group %s: cannot end the offsets of producer %d: %s", group_id, pid, exc)
            elif commit and group_id not in self.groups and self.store.table.group_offsets(group_id):
                self.groups[group_id] = Group(group_id)
            reply({"error_code": COORDINATOR_NOT_AVAILABLE if exc else NONE})

        if not self.store.table.pending_offsets(group_id, pid):
            reply({"error_code": NONE})  # a marker sent again, or a transaction without offsets here
            return
        self.store.write([TxnOffsetEnd(group_id, pid, commit)], done)

    def _store_offsets(self, group_id: str, topics: list, reply: Reply, record=None) -> None:
        """Write the offsets that can be stored (record(topic, partition, offset, epoch, metadata, now)
        makes each record, an OffsetCommit by default) and answer each partition."""
        record = record or (lambda t, p, offset, epoch, metadata, now: OffsetCommit(group_id, t, p, offset, epoch,
                                                                                    metadata, now))
        now_ms = int(time.time() * 1000)
        codes: dict[tuple[str, int], int] = {}
        records = []
        for topic, partitions in topics:
            count = self.partitions_of(topic)
            for partition, offset, epoch, metadata in partitions:
                if count is None or not 0 <= partition < count:
                    codes[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
                elif metadata is not None and len(metadata) > self.max_metadata:
                    codes[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                else:
                    codes[(topic, partition)] = NONE
                    records.append(record(topic, partition, offset, epoch, metadata or "", now_ms))

        def done(exc: BaseException | None) -> None:
            if exc is not None:
                failed = INVALID_COMMIT_OFFSET_SIZE if isinstance(exc, FrameTooLarge) else COORDINATOR_NOT_AVAILABLE
                log.error("group %s: cannot store %d offsets: %s", group_id, len(records), exc)
                for r in records:
                    codes[(r.topic, r.partition)] = failed
            elif records and group_id not in self.groups:
                self.groups[group_id] = Group(group_id)  # a simple group: offsets only
            reply({"topics": [{"name": t, "partitions": [{"partition_index": p[0], "error_code": codes[(t, p[0])]}
                                                         for p in ps]} for t, ps in topics]})

        self.store.write(records, done)

    def offset_fetch(self, args: dict, reply: Reply) -> None:
        """The committed offsets asked for; with require_stable (v7+), a partition an open transaction
        holds offsets for answers UNSTABLE_OFFSET_COMMIT instead (Kafka's KIP-447 rule)."""
        committed = self.store.table.group_offsets(args["group_id"])
        unstable = self.store.table.pending_partitions(args["group_id"]) if args.get("require_stable") else ()
        wanted = args["topics"]  # None: everything the group has committed
        if wanted is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                by_topic.setdefault(topic, []).append(partition)
            wanted = list(by_topic.items())
        topics = []
        for topic, partitions in wanted:
            out = []
            for p in partitions:
                if (topic, p) in unstable:
                    out.append({"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                                "metadata": "", "error_code": UNSTABLE_OFFSET_COMMIT})
                    continue
                c = committed.get((topic, p))
                out.append({"partition_index": p, "committed_offset": c.offset if c else -1,
                            "committed_leader_epoch": c.leader_epoch if c else -1,
                            "metadata": c.metadata if c else "", "error_code": NONE})
            topics.append({"name": topic, "partitions": out})
        reply({"error_code": NONE, "topics": topics})

    def delete_topic(self, topic: str) -> None:
        """A topic was deleted: so are its committed offsets (every group's), as Kafka does."""
        if not any(t == topic for offsets in self.store.table.offsets.values() for t, _ in offsets):
            return

        def done(exc: BaseException | None) -> None:
            if exc is not None:
                log.error("cannot delete the offsets of topic %s: %s", topic, exc)
            else:
                self._remove_dead_groups()

        self.store.write([TopicDelete(topic)], done)

    def expire_offsets(self) -> None:
        """`offsets.retention.minutes`: drop offsets of groups empty that long (simple groups: per commit)."""
        now_ms = int(time.time() * 1000)
        records = []
        for group_id, offsets in self.store.table.offsets.items():
            group = self.groups.get(group_id)
            if group is not None and group.protocol_type is not None:
                if not group.is_(EMPTY) or now_ms - group.state_since_ms < self.retention_ms:
                    continue
                records += [OffsetDelete(group_id, t, p) for t, p in offsets]
            else:
                records += [OffsetDelete(group_id, t, p) for (t, p), c in offsets.items()
                            if now_ms - c.commit_ms >= self.retention_ms]

        def done(exc: BaseException | None) -> None:
            if exc is not None:
                log.error("cannot expire offsets: %s", exc)
            else:
                if records:
                    log.info("expired %d committed offsets", len(records))
                self._remove_dead_groups()

        self.store.write(records, done)

    def _remove_dead_groups(self) -> None:
        """Empty groups without offsets go away (Kafka: Dead, and a tombstone)."""
        table = self.store.table
        dead = [g for g in self.groups.values()
                if g.is_(EMPTY) and not g.pending and not table.group_offsets(g.group_id)]
        for group in dead:
            group.transition(DEAD)
            del self.groups[group.group_id]
        gone = [GroupDelete(g.group_id) for g in dead if g.group_id in table.groups]
        if gone:
            self.store.write(gone, lambda exc: exc and log.error("cannot delete empty groups: %s", exc))

    # ================================================================ deleting offsets (admin)

    def offset_delete(self, args: dict, reply: Reply) -> None:
        """OffsetDelete: an Empty group's offsets go; while members consume, those of topics they subscribe
        to are GROUP_SUBSCRIBED_TO_TOPIC and the others go (Kafka's handleDeleteOffsets); a group of another
        protocol type with members is NON_EMPTY_GROUP. Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION."""
        group_id = args["group_id"]
        group = self.groups.get(group_id)
        if not group_id:
            reply({"error_code": INVALID_GROUP_ID, "topics": []})
            return
        if group is None or group.is_(DEAD):
            reply({"error_code": GROUP_ID_NOT_FOUND, "topics": []})
            return
        subscribed: set[str] = set()
        if not group.is_(EMPTY):
            subscribed = group.subscribed_topics()
            if subscribed is None and group.protocol_type != "consumer":
                reply({"error_code": NON_EMPTY_GROUP, "topics": []})
                return
            subscribed = subscribed or set()
        codes: dict[tuple[str, int], int] = {}
        records = []
        committed = self.store.table.group_offsets(group_id)
        for topic, partitions in args["topics"]:
            count = self.partitions_of(topic)
            for p in partitions:
                if count is None or not 0 <= p < count:
                    codes[(topic, p)] = UNKNOWN_TOPIC_OR_PARTITION
                elif topic in subscribed:
                    codes[(topic, p)] = GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    codes[(topic, p)] = NONE
                    if (topic, p) in committed:
                        records.append(OffsetDelete(group_id, topic, p))

        def done(exc: BaseException | None) -> None:
            if exc is not None:
                log.error("group %s: cannot delete %d offsets: %s", group_id, len(records), exc)
                reply({"error_code": COORDINATOR_NOT_AVAILABLE, "topics": []})
                return
            self._remove_dead_groups()
            reply({"error_code": NONE, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "error_code": codes[(t, p)]} for p in ps]}
                for t, ps in args["topics"]]})

        self.store.write(records, done)

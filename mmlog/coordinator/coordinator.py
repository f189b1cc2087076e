"""The group coordinator: Kafka's classic consumer-group protocol, run on the control thread.

Theory of operation
-------------------
Processors forward every group request to the main process (one control op per
API: "join_group", "sync_group", ...). Each op is a method here taking the
request's fields as a dict and a `reply` callable; the reply value is a dict named
as the response schema's fields, which the processor's handler wraps in the
response of the version it was asked in. Everything runs on the one control
thread, so no locks: a request, a timer and a storage callback never interleave.

JoinGroup and SyncGroup do not answer at once. Their `reply` is parked on the
member (`join_reply`, `sync_reply`, see groups.py) and called when the rebalance
gets there; the processor's connection waits without blocking anything (Kafka
mutes the channel the same way). The rebalance itself follows Kafka's
GroupCoordinator:

1. A member joins (or rejoins with new metadata, or the leader rejoins, or a
   member leaves or expires): the group goes to PreparingRebalance. From Empty,
   the first rebalance waits `group.initial.rebalance.delay.ms`, again for each
   member that joins meanwhile (generation 0 only), at most the rebalance
   timeout; otherwise it completes as soon as every member has rejoined, or when
   the rebalance timeout (the largest of the members') passes. Heartbeats answer
   REBALANCE_IN_PROGRESS meanwhile, which is how members learn to rejoin.
2. Completing the join removes the dynamic members that did not rejoin, bumps
   the generation, picks the protocol every member lists that most prefer, and
   answers every parked JoinGroup: the leader gets every member's metadata, the
   others none. The group is CompletingRebalance.
3. The leader's SyncGroup carries the assignment; every parked SyncGroup (and
   every later one in this generation) gets its member's share. Stable.

Timers (`call_later`): a member's session expires when nothing (join, sync,
heartbeat, commit) refreshed it within its session timeout; a member awaiting a
rebalance is kept alive by the rebalance instead (a new member at most
`NEW_MEMBER_JOIN_TIMEOUT_MS`). Timers are never cancelled: each carries what it
was armed for and does nothing if that is no longer current (the group's
`join_timer` counter, the member's `deadline`).

Static members (`group_instance_id`, KIP-345) keep their member id: a rejoin
with an empty member id and a known instance id is that member again, and a
Stable group hands it its old assignment without a rebalance unless the chosen
protocol would change. A different member id with a known instance id is
FENCED_INSTANCE_ID. Static members that miss a rebalance stay in the group until
their session expires.

Offsets: OffsetCommit validates the member and generation as Kafka does
(generation -1 with no member is a "simple" commit, allowed while the group has
no members), then writes one record per partition to the `OffsetStore` and
answers when the store says they are durable. OffsetFetch reads the table.
Deleting a topic deletes its offsets; `expire_offsets` implements
`offsets.retention.minutes` (KIP-211: the offsets of a group expire once it has
been empty that long; those of a simple group, that long after their commit).

Generations survive restarts (a GroupMeta record per generation), so a
generation number never repeats for a group; members do not (after a restart
every member gets UNKNOWN_MEMBER_ID and joins again).

Ownership (cluster mode): `owns(group_id)` says whether this broker coordinates a
group now. Requests for other groups get NOT_COORDINATOR, so clients look the
coordinator up again. A group is loaded from the store when this broker first
serves it, and `sync_ownership` (on every change of live brokers) unloads groups
that moved away, answering their parked requests with NOT_COORDINATOR, and loads
the ones won. Standalone, this broker owns every group and everything is loaded
at start-up.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from mmlog.coordinator.answers import (COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID,
                                       NON_EMPTY_GROUP, NONE, NOT_COORDINATOR, dead_group, join_error, sync_result)
from mmlog.coordinator.group_offsets import GroupOffsets
from mmlog.coordinator.groups import DEAD, EMPTY, Group, Reply
from mmlog.coordinator.membership import Membership
from mmlog.coordinator.offsets import GroupDelete, OffsetStore
from mmlog.coordinator.rebalance import CallLater
from mmlog.ipc.control_ops import (DELETE_GROUPS, DESCRIBE_GROUPS, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, LIST_GROUPS,
                                   OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, SYNC_GROUP, TXN_OFFSETS_END,
                                   TXN_OFFSET_COMMIT)

log = logging.getLogger(__name__)


class GroupCoordinator(Membership, GroupOffsets):
    """Every group of this broker, their rebalances and committed offsets: the state, the control ops,
    ownership, group admin (list, describe, delete) and the lifecycle; membership.py, rebalance.py and
    group_offsets.py hold the group APIs."""

    def __init__(self, config, store: OffsetStore, partitions_of: Callable[[str], int | None],
                 call_later: CallLater, owns: Callable[[str], bool] = lambda group_id: True) -> None:
        self.owns = owns
        self.min_session_ms = config["group.min.session.timeout.ms"]
        self.max_session_ms = config["group.max.session.timeout.ms"]
        self.initial_delay_ms = config["group.initial.rebalance.delay.ms"]
        self.retention_ms = config["offsets.retention.minutes"] * 60_000
        self.max_metadata = config["offset.metadata.max.bytes"]
        self.store = store
        self.partitions_of = partitions_of  # topic -> partition count, None if unknown
        self.call_later = call_later
        self.groups: dict[str, Group] = {}
        self.stopping = False
        # Transactional offsets, per (group, producer id): the newest producer epoch a marker or a commit carried
        # (a commit of an older epoch is fenced), and the TxnOffsetCommit writes in flight with the markers that
        # wait for them (a marker ends what was written before it, never a write that lands after it).
        self._txn_epochs: dict[tuple[str, int], int] = {}
        self._txn_writes: dict[tuple[str, int], list] = {}  # -> [writes in flight, markers waiting]

    def load(self) -> list[str]:
        """Read the store; every group with offsets or a generation becomes an Empty group."""
        notes = self.store.load()
        table = self.store.table
        for group_id in sorted(table.group_ids()):
            self.groups[group_id] = self._stored_group(group_id)
        log.info("loaded groups=%d committed offsets=%d", len(self.groups),
                 sum(len(t) for t in table.offsets.values()))
        return notes

    def _stored_group(self, group_id: str) -> Group:
        """An Empty group at the generation the store has for it."""
        meta = self.store.table.groups.get(group_id)
        return Group(group_id, meta.generation if meta else 0, (meta.protocol_type or None) if meta else None)

    def ops(self) -> dict[str, Callable[[Any, Reply], None]]:
        """The control ops this coordinator serves."""
        def commit_refusal(args: dict) -> dict:
            return {"topics": [{"name": t, "partitions": [{"partition_index": p[0], "error_code": NOT_COORDINATOR}
                                                          for p in ps]} for t, ps in args["topics"]]}

        def fetch_refusal(args: dict) -> dict:
            return {"error_code": NOT_COORDINATOR, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                                            "metadata": "", "error_code": NOT_COORDINATOR} for p in ps]}
                for t, ps in args["topics"] or []]}

        return {
            JOIN_GROUP: self._owned(self.join_group, lambda a: join_error(a["member_id"], NOT_COORDINATOR)),
            SYNC_GROUP: self._owned(self.sync_group, lambda a: sync_result(NOT_COORDINATOR)),
            HEARTBEAT: self._owned(self.heartbeat, lambda a: {"error_code": NOT_COORDINATOR}),
            LEAVE_GROUP: self._owned(self.leave_group, lambda a: {"error_code": NOT_COORDINATOR, "members": []}),
            OFFSET_COMMIT: self._owned(self.offset_commit, commit_refusal),
            OFFSET_FETCH: self._owned(self.offset_fetch, fetch_refusal),
            TXN_OFFSET_COMMIT: self._owned(self.txn_offset_commit, commit_refusal),
            TXN_OFFSETS_END: self._owned(self.txn_offsets_end, lambda a: {"error_code": NOT_COORDINATOR}),
            LIST_GROUPS: self.list_groups,
            DESCRIBE_GROUPS: self.describe_groups,
            DELETE_GROUPS: self.delete_groups,
            OFFSET_DELETE: self._owned(self.offset_delete, lambda a: {"error_code": NOT_COORDINATOR, "topics": []}),
        }

    def _owned(self, op: Callable[[dict, Reply], None], refusal: Callable[[dict], dict]):
        """op for the groups this broker coordinates; NOT_COORDINATOR (refusal's answer) for the others."""
        def run(args: dict, reply: Reply) -> None:
            group_id = args["group_id"]
            if group_id and not self.owns(group_id):
                reply(refusal(args))
                return
            self._ensure_loaded(group_id)
            op(args, reply)

        return run

    # ================================================================ ownership (cluster mode)

    def _ensure_loaded(self, group_id: str) -> None:
        if not group_id or self.store.is_loaded(group_id):
            return
        self.store.load_group(group_id)
        if group_id not in self.groups and group_id in self.store.table.group_ids():
            self.groups[group_id] = self._stored_group(group_id)

    def sync_ownership(self) -> None:
        """Live brokers changed: unload the groups that moved away, load the ones this broker won."""
        for group_id in [g for g in self.groups if not self.owns(g)]:
            self._unload(group_id)
        for group_id in self.store.loaded_groups():  # loaded by a look (OffsetFetch), never a live group
            if not self.owns(group_id):
                self.store.unload_group(group_id)
        try:
            stored = self.store.group_ids()
        except Exception as exc:  # noqa: BLE001 - loaded on first use instead
            log.warning("cannot list stored groups: %s", exc)
            return
        for group_id in stored:
            if self.owns(group_id):
                self._ensure_loaded(group_id)

    def _unload(self, group_id: str) -> None:
        group = self.groups.pop(group_id)
        log.info("group %s: coordinated elsewhere now; unloading it", group_id)
        self._refuse_parked(group)
        self.store.unload_group(group_id)

    # ================================================================ deleting (admin)

    def delete_groups(self, group_ids: list[str], reply: Reply) -> None:
        """DeleteGroups: an Empty group (members none, offsets or not) goes with its offsets; one with
        members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND (Kafka's handleDeleteGroups)."""
        codes: dict[str, int] = {}
        doomed: list[Group] = []
        for group_id in group_ids:
            if not group_id:
                codes[group_id] = INVALID_GROUP_ID
            elif self.stopping:
                codes[group_id] = COORDINATOR_NOT_AVAILABLE
            elif not self.owns(group_id):
                codes[group_id] = NOT_COORDINATOR
            else:
                self._ensure_loaded(group_id)
                group = self.groups.get(group_id)
                if group is None or group.is_(DEAD):
                    codes[group_id] = GROUP_ID_NOT_FOUND
                elif not group.is_(EMPTY) or group.pending:
                    codes[group_id] = NON_EMPTY_GROUP
                else:
                    codes[group_id] = NONE
                    doomed.append(group)

        def done(exc: BaseException | None) -> None:
            for group in doomed:
                if exc is not None:
                    codes[group.group_id] = COORDINATOR_NOT_AVAILABLE
                elif self.groups.get(group.group_id) is group:
                    group.transition(DEAD)
                    del self.groups[group.group_id]
                    log.info("group %s deleted", group.group_id)
            if exc is not None:
                log.error("cannot delete groups %s: %s", [g.group_id for g in doomed], exc)
            reply({"results": [{"group_id": g, "error_code": codes[g]} for g in group_ids]})

        self.store.write([GroupDelete(g.group_id) for g in doomed], done)

    # ================================================================ listing

    def list_groups(self, states: Any, reply: Reply) -> None:
        """The groups this broker coordinates (clients ask every broker for all of them); `states`, if
        not empty, keeps those in one of these states (ListGroups v4+, names as Kafka's, case-sensitive)."""
        reply({"error_code": NONE, "groups": [
            {"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value}
            for g in sorted(self.groups.values(), key=lambda g: g.group_id) if not states or g.state.value in states]})

    def describe_groups(self, group_ids: list[str], reply: Reply) -> None:
        reply({"groups": [self._describe(g) for g in group_ids]})

    def _describe(self, group_id: str) -> dict:
        if not self.owns(group_id):
            return {**dead_group(group_id), "error_code": NOT_COORDINATOR, "group_state": ""}
        self._ensure_loaded(group_id)
        return self.groups[group_id].summary() if group_id in self.groups else dead_group(group_id)

    # ================================================================ lifecycle

    def flush_due(self, interval_ms: int) -> None:
        self.store.flush_due(interval_ms)

    def shutdown(self) -> None:
        """The broker is stopping: answer every parked JoinGroup/SyncGroup now (NOT_COORDINATOR, as Kafka
        answers when it unloads a group), so no processor waits on us; later ones are refused."""
        self.stopping = True
        for group in self.groups.values():
            self._refuse_parked(group)

    @staticmethod
    def _refuse_parked(group: Group) -> None:
        """Answer the group's parked JoinGroup/SyncGroup requests with NOT_COORDINATOR."""
        for member in group.members.values():
            if member.join_reply is not None:
                reply, member.join_reply = member.join_reply, None
                reply(join_error(member.member_id, NOT_COORDINATOR))
            if member.sync_reply is not None:
                reply, member.sync_reply = member.sync_reply, None
                reply(sync_result(NOT_COORDINATOR))

    def close(self) -> None:
        self.store.close()

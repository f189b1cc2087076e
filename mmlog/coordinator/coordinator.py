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
import time
from typing import Any, Callable

from mmlog.coordinator.groups import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    Member,
    Reply,
    new_member_id,
)
from mmlog.coordinator.offset_log import FrameTooLarge
from mmlog.coordinator.offsets import (
    GroupDelete,
    GroupMeta,
    OffsetCommit,
    OffsetDelete,
    OffsetStore,
    TopicDelete,
    TxnOffsetCommit,
    TxnOffsetEnd,
)
from mmlog import errors
from mmlog.ipc.control_ops import (DELETE_GROUPS, DESCRIBE_GROUPS, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, LIST_GROUPS,
                                   OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, SYNC_GROUP, TXN_OFFSETS_END,
                                   TXN_OFFSET_COMMIT)

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartition.code
OFFSET_METADATA_TOO_LARGE = errors.OffsetMetadataTooLarge.code
COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailable.code
NOT_COORDINATOR = errors.NotCoordinator.code
ILLEGAL_GENERATION = errors.IllegalGeneration.code
INCONSISTENT_GROUP_PROTOCOL = errors.InconsistentGroupProtocol.code
INVALID_GROUP_ID = errors.InvalidGroupId.code
UNKNOWN_MEMBER_ID = errors.UnknownMemberId.code
INVALID_SESSION_TIMEOUT = errors.InvalidSessionTimeout.code
REBALANCE_IN_PROGRESS = errors.RebalanceInProgress.code
INVALID_COMMIT_OFFSET_SIZE = errors.InvalidCommitOffsetSize.code
MEMBER_ID_REQUIRED = errors.MemberIdRequired.code
FENCED_INSTANCE_ID = errors.FencedInstanceId.code
GROUP_ID_NOT_FOUND = errors.GroupIdNotFound.code
NON_EMPTY_GROUP = errors.NonEmptyGroup.code
GROUP_SUBSCRIBED_TO_TOPIC = errors.GroupSubscribedToTopic.code
UNSTABLE_OFFSET_COMMIT = errors.UnstableOffsetCommit.code

PRODUCER_FENCED = errors.ProducerFenced.code
MAX_TXN_EPOCHS = 100_000  # (group, producer id) epochs remembered; a producer idle past this many others is forgotten
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's: a new member cannot heartbeat while its join is parked

CallLater = Callable[[float, Callable[[], None]], None]


def join_error(member_id: str, code: int) -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_name": "", "leader": "", "member_id": member_id,
            "members": []}


def sync_result(code: int, assignment: bytes = b"", group: Group | None = None) -> dict:
    """A SyncGroup answer; a successful one names the group's protocol type and name (v5+)."""
    if code != NONE or group is None:
        return {"error_code": code, "assignment": assignment}
    return {"error_code": code, "assignment": assignment, "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name}


def dead_group(group_id: str) -> dict:
    """DescribeGroups of an unknown group: Kafka answers state Dead with no error (before v6)."""
    return {"error_code": NONE, "group_id": group_id, "group_state": DEAD.value, "protocol_type": "",
            "protocol_data": "", "members": []}


class GroupCoordinator:
    """Every group of this broker, their rebalances and committed offsets."""

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

    # ================================================================ JoinGroup

    def join_group(self, args: dict, reply: Reply) -> None:
        group_id, member_id = args["group_id"], args["member_id"]
        if self.stopping:
            reply(join_error(member_id, NOT_COORDINATOR))
            return
        if not group_id:
            reply(join_error(member_id, INVALID_GROUP_ID))
            return
        if not self.min_session_ms <= args["session_timeout_ms"] <= self.max_session_ms:
            reply(join_error(member_id, INVALID_SESSION_TIMEOUT))
            return
        group = self.groups.get(group_id)
        if group is None:
            if member_id:  # a member of a group we do not know: it must start over
                reply(join_error(member_id, UNKNOWN_MEMBER_ID))
                return
            group = self.groups[group_id] = Group(group_id)
        if not member_id:
            self._join_unknown_member(group, args, reply)
        else:
            self._join_known_member(group, member_id, args, reply)
        self._try_complete_join(group)

    def _join_unknown_member(self, group: Group, args: dict, reply: Reply) -> None:
        instance = args["group_instance_id"]
        names = [name for name, _ in args["protocols"]]
        if group.is_(DEAD):
            reply(join_error("", COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(args["protocol_type"], names, group.static.get(instance or "")):
            reply(join_error("", INCONSISTENT_GROUP_PROTOCOL))
        elif instance is not None and instance in group.static:
            self._rejoin_static_member(group, group.members[group.static[instance]], args, reply)
        elif args["require_known_member_id"] and instance is None:
            # KIP-394: hand out the id first, so a client that times out and retries does not leave
            # a ghost member behind; it joins for real with the id within its session timeout.
            member_id = new_member_id(args["client_id"], None)
            group.pending.add(member_id)
            self._expire_pending_later(group, member_id, args["session_timeout_ms"])
            reply(join_error(member_id, MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id(args["client_id"], instance), args, reply)

    def _join_known_member(self, group: Group, member_id: str, args: dict, reply: Reply) -> None:
        instance = args["group_instance_id"]
        names = [name for name, _ in args["protocols"]]
        if group.is_(DEAD):
            reply(join_error(member_id, COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(args["protocol_type"], names, member_id):
            reply(join_error(member_id, INCONSISTENT_GROUP_PROTOCOL))
        elif member_id in group.pending and instance is None:
            self._add_member_and_rebalance(group, member_id, args, reply)
        elif group.is_static_member_fenced(member_id, instance):
            reply(join_error(member_id, FENCED_INSTANCE_ID))
        elif member_id not in group.members or (instance is not None and instance not in group.static):
            reply(join_error(member_id, UNKNOWN_MEMBER_ID))
        else:
            member = group.members[member_id]
            if group.is_(PREPARING):
                self._update_member_and_rebalance(group, member, args, reply)
            elif group.is_(COMPLETING):
                if member.matches(args["protocols"]):
                    reply(self._join_result(group, member))  # a retry of the join we answered: same answer
                else:
                    self._update_member_and_rebalance(group, member, args, reply)
            elif group.is_(STABLE):
                if group.is_leader(member_id) or not member.matches(args["protocols"]):
                    # the leader rejoins to make the group rebalance (e.g. its topics changed)
                    self._update_member_and_rebalance(group, member, args, reply)
                else:
                    reply(self._join_result(group, member))
            else:
                reply(join_error(member_id, UNKNOWN_MEMBER_ID))

    def _rejoin_static_member(self, group: Group, member: Member, args: dict, reply: Reply) -> None:
        """A known group instance rejoins without its member id: the same member again."""
        self._update_member(member, args, reply)
        self._expire_later(group, member, member.session_timeout_ms)
        if group.is_(STABLE):
            if group.select_protocol() == group.protocol_name:
                log.info("group %s: static member %s rejoined; no rebalance", group.group_id, member.group_instance_id)
                member.join_reply = None
                reply(self._join_result(group, member))
            else:
                self._prepare_rebalance(group, f"static member {member.group_instance_id} changed protocols")
        elif group.is_(COMPLETING):
            self._prepare_rebalance(group, f"static member {member.group_instance_id} rejoined")
        # PreparingRebalance: it now awaits the join like everyone else

    def _add_member_and_rebalance(self, group: Group, member_id: str, args: dict, reply: Reply) -> None:
        member = Member(member_id, args["group_instance_id"], args["client_id"], args["client_host"],
                        args["session_timeout_ms"], args["rebalance_timeout_ms"], args["protocol_type"],
                        list(args["protocols"]))
        member.join_reply = reply
        if group.is_(PREPARING) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._expire_later(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member(self, member: Member, args: dict, reply: Reply) -> None:
        member.protocols = list(args["protocols"])
        member.session_timeout_ms = args["session_timeout_ms"]
        member.rebalance_timeout_ms = args["rebalance_timeout_ms"]
        old, member.join_reply = member.join_reply, reply
        if old is not None:  # a newer JoinGroup from the same member (a reconnect): answer the old one
            old(join_error(member.member_id, REBALANCE_IN_PROGRESS))

    def _update_member_and_rebalance(self, group: Group, member: Member, args: dict, reply: Reply) -> None:
        self._update_member(member, args, reply)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _join_result(self, group: Group, member: Member) -> dict:
        return {"error_code": NONE, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name or "",
                "leader": group.leader_id or "", "member_id": member.member_id,
                "members": group.member_metadata() if group.is_leader(member.member_id) else []}

    # ================================================================ the rebalance

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, REBALANCE_IN_PROGRESS)
        initial = group.is_(EMPTY)
        group.transition(PREPARING)
        log.info("group %s: preparing to rebalance generation %d (%s)", group.group_id, group.generation, reason)
        if initial:
            delay = self.initial_delay_ms
            self._arm_join_timer(group, delay, initial=True, remaining=max(group.rebalance_timeout_ms() - delay, 0))
        else:
            self._arm_join_timer(group, group.rebalance_timeout_ms())
            self._try_complete_join(group)

    def _arm_join_timer(self, group: Group, delay_ms: int, initial: bool = False, remaining: int = 0) -> None:
        group.join_timer += 1
        token = group.join_timer
        group.initial_delay = initial

        def fire() -> None:
            if self.groups.get(group.group_id) is not group or group.join_timer != token or not group.is_(PREPARING):
                return
            if initial and group.new_member_added and remaining > 0:
                group.new_member_added = False  # members still arriving: wait one more delay
                self._arm_join_timer(group, min(self.initial_delay_ms, remaining), True,
                                     max(remaining - delay_ms, 0))
            else:
                self._complete_join(group)

        self.call_later(delay_ms / 1000, fire)

    def _try_complete_join(self, group: Group) -> None:
        if group.is_(PREPARING) and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        group.join_timer += 1  # whatever timer is armed is now stale
        group.initial_delay = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: member %s did not rejoin in time; removing it", group.group_id, member.member_id)
                self._drop_member(group, member)
        if group.members and not group.elect_joined_leader():
            # Only static members that have not rejoined are left: wait for them, or for their sessions to end.
            self._arm_join_timer(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation()
        self._store_generation(group)
        if group.is_(EMPTY):
            log.info("group %s: empty at generation %d", group.group_id, group.generation)
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation, len(group.members), group.protocol_name, group.leader_id)
        for member in group.members.values():
            if member.join_reply is not None:
                reply, member.join_reply = member.join_reply, None
                reply(self._join_result(group, member))
            self._expire_later(group, member, member.session_timeout_ms)
            member.is_new = False

    def _reset_and_propagate_assignment_error(self, group: Group, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, code)

    def _propagate_assignment(self, group: Group, code: int) -> None:
        for member in group.members.values():
            if member.sync_reply is not None:
                reply, member.sync_reply = member.sync_reply, None
                reply(sync_result(code, member.assignment, group))
                self._expire_later(group, member, member.session_timeout_ms)

    def _store_generation(self, group: Group) -> None:
        record = GroupMeta(group.group_id, group.protocol_type or "", group.generation)

        def done(exc: BaseException | None) -> None:
            if exc is not None:  # Kafka only warns too: the next generation is written again
                log.warning("group %s: cannot store generation %d: %s", group.group_id, group.generation, exc)

        self.store.write([record], done)

    # ================================================================ members leaving

    def _drop_member(self, group: Group, member: Member) -> None:
        """Remove a member, answering its parked requests; the caller decides about a rebalance."""
        if member.join_reply is not None:
            reply, member.join_reply = member.join_reply, None
            reply(join_error("", UNKNOWN_MEMBER_ID))
        if member.sync_reply is not None:
            reply, member.sync_reply = member.sync_reply, None
            reply(sync_result(UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        self._drop_member(group, member)
        if group.is_(STABLE) or group.is_(COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self._try_complete_join(group)

    def _expire_later(self, group: Group, member: Member, timeout_ms: int) -> None:
        """The member was heard from: its session now ends timeout_ms from now.

        One timer is live per member (`timer_at`). A later deadline leaves it armed (it re-arms
        itself when it finds the deadline moved); an earlier one arms a new timer, and the old
        one, no longer live, does nothing when it fires.
        """
        now = time.monotonic()
        member.last_heartbeat = now
        member.deadline = now + timeout_ms / 1000
        if member.timer_at is None or member.deadline < member.timer_at:
            self._arm_expiry(group, member, member.deadline)

    def _arm_expiry(self, group: Group, member: Member, at: float) -> None:
        member.timer_at = at
        self.call_later(max(0.0, at - time.monotonic()), lambda: self._check_expiry(group, member, at))

    def _check_expiry(self, group: Group, member: Member, at: float) -> None:
        if member.timer_at != at:
            return  # superseded by an earlier timer
        member.timer_at = None
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        now = time.monotonic()
        if now < member.deadline:
            self._arm_expiry(group, member, member.deadline)
            return
        if (member.awaiting_join and not member.is_new) or member.sync_reply is not None:
            self._expire_later(group, member, member.session_timeout_ms)  # the rebalance decides about it
            return
        log.info("group %s: member %s session expired; removing it", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member, f"member {member.member_id} expired")

    def _expire_pending_later(self, group: Group, member_id: str, timeout_ms: int) -> None:
        def fire() -> None:
            if self.groups.get(group.group_id) is group and member_id in group.pending:
                group.pending.discard(member_id)
                self._try_complete_join(group)

        self.call_later(timeout_ms / 1000, fire)

    # ================================================================ SyncGroup, Heartbeat, LeaveGroup

    def sync_group(self, args: dict, reply: Reply) -> None:
        group_id, member_id = args["group_id"], args["member_id"]
        if self.stopping:
            reply(sync_result(NOT_COORDINATOR))
            return
        if not group_id:
            reply(sync_result(INVALID_GROUP_ID))
            return
        group = self.groups.get(group_id)
        code = self._check_member(group, member_id, args["group_instance_id"], args["generation_id"])
        if code:
            reply(sync_result(code))
        elif not group.agrees(args.get("protocol_type"), args.get("protocol_name")):
            reply(sync_result(INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_(EMPTY):
            reply(sync_result(UNKNOWN_MEMBER_ID))
        elif group.is_(PREPARING):
            reply(sync_result(REBALANCE_IN_PROGRESS))
        elif group.is_(COMPLETING):
            member = group.members[member_id]
            old, member.sync_reply = member.sync_reply, reply
            if old is not None:
                old(sync_result(REBALANCE_IN_PROGRESS))
            if group.is_leader(member_id):
                assignments = dict(args["assignments"])
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                log.info("group %s: assignment for generation %d received from the leader",
                         group.group_id, group.generation)
                self._propagate_assignment(group, NONE)
                group.transition(STABLE)
        else:  # Stable: the assignment of this generation
            member = group.members[member_id]
            reply(sync_result(NONE, member.assignment, group))
            self._expire_later(group, member, member.session_timeout_ms)

    def heartbeat(self, args: dict, reply: Reply) -> None:
        group_id, member_id = args["group_id"], args["member_id"]
        if not group_id:
            reply({"error_code": INVALID_GROUP_ID})
            return
        group = self.groups.get(group_id)
        code = self._check_member(group, member_id, args["group_instance_id"], args["generation_id"])
        if code:
            reply({"error_code": code})
        elif group.is_(EMPTY):
            reply({"error_code": UNKNOWN_MEMBER_ID})
        else:
            member = group.members[member_id]
            self._expire_later(group, member, member.session_timeout_ms)
            # CompletingRebalance answers 0 as Kafka 2.5+ does: members may heartbeat before their SyncGroup.
            reply({"error_code": REBALANCE_IN_PROGRESS if group.is_(PREPARING) else NONE})

    def _check_member(self, group: Group | None, member_id: str, instance: str | None, generation: int) -> int:
        """The error a member-and-generation request gets before its state is looked at, or 0."""
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, instance):
            return FENCED_INSTANCE_ID
        if member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ILLEGAL_GENERATION
        return NONE

    def leave_group(self, args: dict, reply: Reply) -> None:
        group_id, leaving = args["group_id"], args["members"]
        if not group_id:
            reply({"error_code": INVALID_GROUP_ID, "members": []})
            return
        group = self.groups.get(group_id)
        if group is None:
            reply({"error_code": NONE, "members": [
                {"member_id": m, "group_instance_id": i, "error_code": UNKNOWN_MEMBER_ID} for m, i in leaving]})
            return
        if group.is_(DEAD):
            reply({"error_code": COORDINATOR_NOT_AVAILABLE, "members": []})
            return
        results = []
        for member_id, instance in leaving:
            if member_id and group.is_static_member_fenced(member_id, instance):
                code = FENCED_INSTANCE_ID
            elif member_id in group.pending:
                group.pending.discard(member_id)
                self._try_complete_join(group)
                code = NONE
            elif member_id not in group.members and (instance is None or instance not in group.static):
                code = UNKNOWN_MEMBER_ID
            else:
                member = group.members[group.static[instance] if instance in group.static else member_id]
                log.info("group %s: member %s left", group.group_id, member.member_id)
                self._remove_member_and_update_group(group, member, f"member {member.member_id} left")
                code = NONE
            results.append({"member_id": member_id, "group_instance_id": instance, "error_code": code})
        reply({"error_code": NONE, "members": results})

    # ================================================================ offsets

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

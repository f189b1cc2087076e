"""The membership requests of a group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, each checked as
Kafka checks it, then handed to the rebalance (rebalance.py; coordinator.py tells the whole protocol).
`Membership` is a part of `GroupCoordinator`, which holds the state named below."""

from __future__ import annotations

import logging

from mmlog.coordinator.answers import (COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
                                       INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT,
                                       MEMBER_ID_REQUIRED, NONE, NOT_COORDINATOR, REBALANCE_IN_PROGRESS,
                                       UNKNOWN_MEMBER_ID, join_error, sync_result)
from mmlog.coordinator.groups import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Group, Member, Reply, new_member_id
from mmlog.coordinator.rebalance import Rebalance

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's: a new member cannot heartbeat while its join is parked


class Membership(Rebalance):
    """Who is in a group: members join, sync, heartbeat and leave."""

    min_session_ms: int
    max_session_ms: int
    stopping: bool

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


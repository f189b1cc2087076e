"""A group's rebalance and its members' sessions: preparing, completing the join, handing out the
assignment, and the timers that end a rebalance or a member's session (see coordinator.py for the
whole protocol). `Rebalance` is a part of `GroupCoordinator`, which holds the state named below."""

from __future__ import annotations

import logging
import time
from typing import Callable

from mmlog.coordinator.answers import NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, join_error, sync_result
from mmlog.coordinator.groups import COMPLETING, EMPTY, PREPARING, STABLE, Group, Member
from mmlog.coordinator.offsets import GroupMeta, OffsetStore

log = logging.getLogger(__name__)

CallLater = Callable[[float, Callable[[], None]], None]


class Rebalance:
    """Moving a group through PreparingRebalance and CompletingRebalance to Stable, and expiring members."""

    groups: dict[str, Group]
    store: OffsetStore
    call_later: CallLater
    initial_delay_ms: int

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

    def _join_result(self, group: Group, member: Member) -> dict:
        return {"error_code": NONE, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name or "",
                "leader": group.leader_id or "", "member_id": member.member_id,
                "members": group.member_metadata() if group.is_leader(member.member_id) else []}

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


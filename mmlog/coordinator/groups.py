"""A consumer group's membership state: members, generation, leader, protocol, and the state machine.

This is Kafka's GroupMetadata/MemberMetadata: data and the small rules that only
look at one group. What drives it (requests, timers, storage) is the
coordinator (`coordinator.py`).

States (Kafka's names, which DescribeGroups reports):

    Empty                no members; may still have committed offsets
    PreparingRebalance   waiting for the members to (re)join
    CompletingRebalance  joined; waiting for the leader's assignment (SyncGroup)
    Stable               assignment handed out; members heartbeat
    Dead                 removed (no members, no offsets)

The transitions allowed are a table, `VALID_PREVIOUS` (a state -> the states it
may be entered from), exactly Kafka's:

    Empty               -> PreparingRebalance (a member joins)
    PreparingRebalance  -> CompletingRebalance (everyone joined, or the rebalance
                           timeout passed) | Empty (nobody left)
    CompletingRebalance -> Stable (leader's SyncGroup) | PreparingRebalance
    Stable              -> PreparingRebalance (join, leave, expiry, new metadata)
    any                 -> Dead

A member with a parked JoinGroup has `join_reply` set ("awaiting join"); one
with a parked SyncGroup has `sync_reply` set. Every parked reply is answered
exactly once: by the rebalance, or by an error when the member is removed,
replaced by a newer request or the coordinator shuts down.
"""

from __future__ import annotations

import enum
import struct
import time
import uuid
from typing import Any, Callable

Reply = Callable[[Any], None]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY, PREPARING, COMPLETING, STABLE, DEAD = GroupState

VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    EMPTY: frozenset({PREPARING}),
    PREPARING: frozenset({STABLE, COMPLETING, EMPTY}),
    COMPLETING: frozenset({PREPARING}),
    STABLE: frozenset({COMPLETING}),
    DEAD: frozenset({STABLE, PREPARING, COMPLETING, EMPTY, DEAD}),
}


class IllegalTransition(RuntimeError):
    """A bug: the coordinator tried a transition the table forbids."""


class Member:
    """One member of a group, as the coordinator sees it."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "session_timeout_ms",
                 "rebalance_timeout_ms", "protocol_type", "protocols", "assignment", "join_reply",
                 "sync_reply", "deadline", "timer_at", "is_new", "last_heartbeat")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols  # (name, metadata), in the member's order of preference
        self.assignment = b""
        self.join_reply: Reply | None = None
        self.sync_reply: Reply | None = None
        self.deadline = 0.0  # monotonic time after which the session has expired
        self.timer_at: float | None = None  # when the live expiry timer fires; others are stale
        self.is_new = True
        self.last_heartbeat = time.monotonic()

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order (a rejoin that changes nothing)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def new_member_id(client_id: str, group_instance_id: str | None) -> str:
    """Kafka's form: `<client id or group instance id>-<random UUID>`."""
    return f"{group_instance_id or client_id}-{uuid.uuid4()}"


class Group:
    """A group's membership: members by id, the leader, the generation and the chosen protocol."""

    def __init__(self, group_id: str, generation: int = 0, protocol_type: str | None = None) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.state_since_ms = int(time.time() * 1000)  # wall clock: offsets of an empty group expire from it
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # in join order: the first is the first leader
        self.static: dict[str, str] = {}  # group instance id -> member id
        self.pending: set[str] = set()  # member ids handed out with MEMBER_ID_REQUIRED, not joined yet
        self.new_member_added = False  # extends the initial rebalance delay
        self.join_timer = 0  # identity of the live rebalance timer; bumping it cancels the others
        self.initial_delay = False  # the live timer is the initial (non-completable) delay

    # ------------------------------------------------------------ state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, to: GroupState) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise IllegalTransition(f"group {self.group_id!r}: {self.state.value} -> {to.value}")
        self.state = to
        self.state_since_ms = int(time.time() * 1000)

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[PREPARING]

    # ------------------------------------------------------------ members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static[member.group_instance_id] = member.member_id
        else:
            self.pending.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static.get(member.group_instance_id) == member_id:
            del self.static[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A known group instance id that belongs to another member id (a zombie instance)."""
        if group_instance_id is None or group_instance_id not in self.static:
            return False
        return self.static[group_instance_id] != member_id

    def all_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else take any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, names: list[str], member_id: str | None = None) -> bool:
        """Kafka's rule: the first member sets the type; a joining member (member_id: one rejoining,
        whose old protocols do not count) must share the type and one protocol with all the others."""
        others = [m for m in self.members.values() if m.member_id != member_id]
        if self.is_(EMPTY) or not others:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(name in m.protocol_names() for m in others) for name in names)

    def agrees(self, protocol_type: str | None, protocol_name: str | None) -> bool:
        """SyncGroup v5+ may name the protocol type and name it expects (None: not named); Kafka
        answers INCONSISTENT_GROUP_PROTOCOL when they are not the group's."""
        return ((protocol_type is None or protocol_type == self.protocol_type)
                and (protocol_name is None or protocol_name == self.protocol_name))

    def select_protocol(self) -> str:
        """The protocol every member lists that most members prefer (ties: the leader's preference)."""
        members = list(self.members.values())
        candidates = set(members[0].protocol_names())
        for m in members[1:]:
            candidates &= set(m.protocol_names())
        if not candidates:
            raise ValueError(f"group {self.group_id!r}: no protocol common to all members")
        votes: dict[str, int] = {}
        for m in members:
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "", members[0])
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING)
        else:
            self.protocol_name = None
            self.transition(EMPTY)

    # ------------------------------------------------------------ views

    def member_metadata(self) -> list[dict]:
        """What the leader receives in JoinGroup: every member's metadata for the chosen protocol."""
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group's members subscribe to (from their metadata for the chosen protocol;
        Kafka's subscribedTopics), None when unknown: not a consumer group, no protocol chosen yet, or
        metadata that does not parse. OffsetDelete refuses those topics' offsets while members consume."""
        if self.protocol_type != "consumer" or not self.protocol_name:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                found = _subscription_topics(member.metadata(self.protocol_name))
            except (KeyError, struct.error, UnicodeDecodeError):
                return None
            topics.update(found)
        return topics

    def summary(self) -> dict:
        """DescribeGroups: metadata and assignments only when Stable, as Kafka answers."""
        stable = self.is_(STABLE)
        return {
            "error_code": 0,
            "group_id": self.group_id,
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                 "client_host": m.client_host,
                 "member_metadata": m.metadata(self.protocol_name) if stable else b"",
                 "member_assignment": m.assignment if stable else b""}
                for m in self.members.values()
            ],
        }


def _subscription_topics(data: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (every version begins: int16 version, [string] topics);
    the rest of the bytes is the members' business."""
    (count,) = struct.unpack_from(">i", data, 2)
    at, topics = 6, []
    for _ in range(max(count, 0)):
        (size,) = struct.unpack_from(">h", data, at)
        topics.append(bytes(data[at + 2:at + 2 + size]).decode())
        at += 2 + size
        if at > len(data):
            raise struct.error("subscription cut short")
    return topics

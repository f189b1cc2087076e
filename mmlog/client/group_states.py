"""The states of a group member and the error codes that move it between them.

Shared by the parts of `GroupMembership` (group.py, group_join.py, group_coordinator.py,
group_offsets.py, heartbeat.py) and by the consumer, which revokes and rejoins on them."""

from __future__ import annotations

from mmlog.errors import CoordinatorNotAvailable, IllegalGeneration, NotCoordinator, UnknownMemberId

NEED_JOIN, JOINING, SYNCING, STABLE = "need-join", "joining", "syncing", "stable"

COORDINATOR_MOVED = {CoordinatorNotAvailable.code, NotCoordinator.code}
MEMBERSHIP_LOST = {IllegalGeneration.code, UnknownMemberId.code}
POLL_EXPIRED = "poll-expired"  # a heartbeat-thread event, next to the error codes

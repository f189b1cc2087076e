"""The error codes the group APIs answer with, and the answers several of them share (a refused
JoinGroup, a SyncGroup, an unknown group's description)."""

from __future__ import annotations

from mmlog import errors
from mmlog.coordinator.groups import DEAD, Group

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

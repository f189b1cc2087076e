"""The group coordinator, run by the main process for its processors: groups.py (membership state
machine), coordinator.py (the coordinator: its control ops, group ownership, group admin),
membership.py (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), rebalance.py (the
rebalance and the members' session timers), group_offsets.py (committed and
transactional offsets, their deletion and expiry), answers.py (the error codes and
shared answers), offsets.py (the offset records, table and store interface),
offset_log.py (the embedded store's journal file).

Clients assign partitions themselves (the leader's assignment travels through
SyncGroup), so there is no assignor here.
"""

from mmlog.coordinator.coordinator import GroupCoordinator
from mmlog.coordinator.offset_log import OffsetLog
from mmlog.coordinator.offsets import OffsetStore, OffsetTable

__all__ = ["GroupCoordinator", "OffsetLog", "OffsetStore", "OffsetTable"]

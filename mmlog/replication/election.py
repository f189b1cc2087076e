"""The election rules: which live replica leads a partition, in which epoch, with which ISR.

The controller (`mmlog/cluster/controller.py`) applies them to every partition when brokers come or go,
and writes what they decide; they read nothing but their arguments.

- A partition whose leader is live keeps it; dead followers leave its ISR (the
  last ISR member is never removed: it is the one that must come back if the
  partition is to return without losing records).
- A partition whose leader is dead (or that has none) is led by the first replica,
  in assignment order, that is live and in the ISR; the ISR keeps its live members.
  With none, `unclean.leader.election.enable` picks the first live replica (what
  only the old ISR held is lost); otherwise the partition stays offline (leader -1,
  ISR unchanged) until an ISR member returns.
- Preferred leaders: when asked (`auto.leader.rebalance.enable`, on a timer), a
  partition whose first replica is live, in the ISR and not leading moves to it.
- Asked elections (ElectLeaders, `requested`): PREFERRED moves leadership to the
  first replica if it is live and in the ISR (ELECTION_NOT_NEEDED if it leads,
  PREFERRED_LEADER_NOT_AVAILABLE if it cannot); UNCLEAN, for a partition whose
  leader is dead, takes the first live ISR member or else the first live replica
  (ELECTION_NOT_NEEDED while the leader lives, ELIGIBLE_LEADERS_NOT_AVAILABLE when
  no replica is live). Kafka's `PartitionLeaderElectionAlgorithms`.
"""

from __future__ import annotations

import logging

from mmlog.errors import ElectionNotNeeded, EligibleLeadersNotAvailable, PreferredLeaderNotAvailable
from mmlog.replication.leader_and_isr import LeaderAndIsr

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


def decide(cur: LeaderAndIsr, replicas: list[int], live, unclean: bool, epoch: int,
           preferred: bool = False, bounced=frozenset()) -> LeaderAndIsr | None:
    """The partition's next state under controller epoch `epoch`, or None if it stays as it is.

    `bounced`: live brokers that registered after the state was written (restarted, or back from a lost
    session): what the state says of them is stale. A bounced leader is a failed leader, as Kafka's
    controller treats a broker whose broker epoch changed: it may have come back without records it had
    acknowledged (a power loss takes what was not synced), so an ISR member that stayed up leads, and the
    bounced ones leave the ISR until they catch up again. A bounced follower leaves the ISR too, the leader
    staying: left in it, it could be elected later, before it has fetched again what it lost. Only when
    every live ISR member bounced does one of them lead, in a new epoch (the unsynced tail they all lost
    is lost)."""
    live_isr = tuple(r for r in cur.isr if r in live)
    steady_isr = tuple(r for r in live_isr if r not in bounced)
    if cur.leader >= 0 and cur.leader in live and cur.leader not in bounced:
        first = replicas[0]
        if preferred and first != cur.leader and first in steady_isr:
            return LeaderAndIsr(first, cur.leader_epoch + 1, steady_isr, epoch)
        if steady_isr != cur.isr:  # dead and bounced followers leave; the leader is in steady_isr
            return LeaderAndIsr(cur.leader, cur.leader_epoch, steady_isr, epoch)
        return None
    candidates = [r for r in replicas if r in steady_isr]
    if candidates:
        return LeaderAndIsr(candidates[0], cur.leader_epoch + 1, steady_isr, epoch)
    candidates = [r for r in replicas if r in live_isr]
    if candidates:
        return LeaderAndIsr(candidates[0], cur.leader_epoch + 1, live_isr, epoch)
    if unclean and (alive := [r for r in replicas if r in live]):
        log.warning("unclean election of broker %d: records only the old ISR %s held are lost", alive[0], cur.isr)
        return LeaderAndIsr(alive[0], cur.leader_epoch + 1, (alive[0],), epoch)
    if cur.leader == -1:
        return None
    return LeaderAndIsr(-1, cur.leader_epoch + 1, cur.isr, epoch)  # offline until an ISR member is back


def requested(cur: LeaderAndIsr, replicas: list[int], live, election_type: int, epoch: int) -> LeaderAndIsr:
    """The state an asked election (ElectLeaders) writes; raises the partition's Kafka error if none."""
    live_isr = tuple(r for r in cur.isr if r in live)
    if election_type == PREFERRED:
        first = replicas[0]
        if cur.leader == first:
            raise ElectionNotNeeded("Leader election not needed for topic partition.")
        if first not in live_isr:
            raise PreferredLeaderNotAvailable(f"Failed to elect leader: preferred replica {first} is not live "
                                              f"and in the ISR {list(cur.isr)}")
        return LeaderAndIsr(first, cur.leader_epoch + 1, live_isr, epoch)
    if cur.leader >= 0 and cur.leader in live:
        raise ElectionNotNeeded("Leader election not needed for topic partition.")
    new = decide(cur, replicas, live, True, epoch)
    if new is None or new.leader < 0:
        raise EligibleLeadersNotAvailable(f"Failed to elect leader: no live replica of {replicas}")
    return new


def bounced_since(state: LeaderAndIsr, live, registered: dict) -> frozenset:
    """The live brokers whose registration is newer than the state's last write (0: unknown, none)."""
    if not state.zxid:
        return frozenset()
    return frozenset(b for b in live if registered.get(b, 0) > state.zxid)

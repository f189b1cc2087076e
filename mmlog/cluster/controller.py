"""The controller's elections: which live replica leads each partition, in which epoch.

One broker at a time is the controller (`/controller`, ephemeral). When brokers
come or go it re-decides every partition (`decide`, Kafka's rules):

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

Every change of leader bumps the leader epoch. All changes go to ZooKeeper in
multi-op transactions of up to MAX_OPS writes, each also checking the version of
`/controller_epoch` this controller wrote: a deposed controller's writes fail
(Kafka's controller-epoch fencing), and so does a write whose state node changed
since it was read (a leader's ISR change): that partition is then read again and
decided again on its own.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError

from mmlog.cluster import paths
from mmlog.cluster.paths import LeaderAndIsr
from mmlog.errors import ElectionNotNeeded, EligibleLeadersNotAvailable, KafkaError, PreferredLeaderNotAvailable

log = logging.getLogger(__name__)

MAX_OPS = 500  # writes per transaction: well inside ZooKeeper's 1 MiB request limit
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


def decide(cur: LeaderAndIsr, replicas: list[int], live, unclean: bool, epoch: int,
           preferred: bool = False, bounced=frozenset()) -> LeaderAndIsr | None:
    """The partition's next state under controller epoch `epoch`, or None if it stays as it is.

    `bounced`: live brokers that registered after the state was written (restarted, or back from a lost
    session): what the state says of them is stale. A bounced leader is a failed leader, as Kafka's
    controller treats a broker whose broker epoch changed: it may have come back without records it had
    acknowledged (a power loss takes what was not synced), so an ISR member that stayed up leads, and the
    bounced ones leave the ISR until they catch up again. Only when every live ISR member bounced does
    one of them lead, in a new epoch (the unsynced tail they all lost is lost)."""
    live_isr = tuple(r for r in cur.isr if r in live)
    if cur.leader >= 0 and cur.leader in live and cur.leader not in bounced:
        first = replicas[0]
        if preferred and first != cur.leader and first in live_isr:
            return LeaderAndIsr(first, cur.leader_epoch + 1, live_isr, epoch)
        if live_isr != cur.isr:
            return LeaderAndIsr(cur.leader, cur.leader_epoch, live_isr, epoch)
        return None
    steady_isr = tuple(r for r in live_isr if r not in bounced)
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


class Controller:
    """Elections over every partition, written in batches."""

    def __init__(self, zk, states, unclean_default: bool) -> None:
        self.zk = zk
        self.states = states
        self.unclean_default = unclean_default
        self.epoch = 0
        self.epoch_version = -1  # version of /controller_epoch as we wrote it
        self._registered: dict[int, int] = {}  # the live brokers' registrations the last election read

    def elect(self, live, topics: dict, preferred: bool = False, offline: dict | None = None,
              moving=frozenset(), registered: dict | None = None) -> int:
        """Decide every partition of `topics` (name -> TopicInfo) for the live brokers; returns changes made.
        `offline`: {(topic, partition): broker ids} of replicas on a failed log dir, which count as dead
        for that partition alone (Kafka's offline replicas); `moving`: partitions being reassigned, which a
        preferred election leaves alone; `registered`: {broker id: its registration's czxid} of the live
        brokers, which tells the bounced ones of each partition (`decide`)."""
        changes = []
        offline = offline or {}
        registered = self._registered = registered or {}
        for name, info in topics.items():
            if info.assignment is None:
                continue
            unclean = _unclean(info.config, self.unclean_default)
            for p, replicas in enumerate(info.assignment):
                cur = self.states.get(name, p)
                here = live - offline[(name, p)] if (name, p) in offline else live
                rebalance = preferred and (name, p) not in moving  # as Kafka: no rebalance of a moving partition
                if cur is None:
                    continue
                bounced = bounced_since(cur, here, registered)
                if new := decide(cur, replicas, here, unclean, self.epoch, rebalance, bounced):
                    if bounced & {cur.leader}:
                        log.warning("controller: %s-%d: leader %d registered again since epoch %d was written "
                                    "(restarted or a lost session): electing anew", name, p, cur.leader,
                                    cur.leader_epoch)
                    changes.append((name, p, replicas, unclean, cur, new, here, rebalance))
        done = 0
        for i in range(0, len(changes), MAX_OPS):
            done += self._write(changes[i:i + MAX_OPS], live)
        if done:
            log.info("controller: %d partition states changed (live brokers %s)", done, sorted(live))
        return done

    def elect_requested(self, live, keys: dict, election_type: int) -> dict:
        """ElectLeaders: {(topic, p): replicas} decided by `requested` and written; {(topic, p): None or the
        KafkaError of that partition}."""
        out: dict = {}
        for (name, p), replicas in keys.items():
            for _ in range(5):  # a state written meanwhile (a leader's ISR change): read it again
                cur = self.states.get(name, p)
                try:
                    new = requested(cur, replicas, live, election_type, self.epoch)
                except KafkaError as exc:
                    out[name, p] = exc
                    break
                if self.write_state(name, p, cur, new):
                    out[name, p] = None
                    log.info("controller: %s election of %s-%d: leader %d in epoch %d",
                             "unclean" if election_type == UNCLEAN else "preferred", name, p, new.leader,
                             new.leader_epoch)
                    break
                if self.states.reread(name, p) is None:
                    break
            out.setdefault((name, p), EligibleLeadersNotAvailable("the partition state kept changing"))
        return out

    def write_state(self, name: str, p: int, cur: LeaderAndIsr, new: LeaderAndIsr, more=()) -> bool:
        """Compare-and-set one state node (and what each of `more` adds to the transaction) under our
        controller epoch; False if anything in it was written meanwhile."""
        tx = self.zk.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.epoch_version)
        tx.set_data(paths.partition_state(name, p), new.to_json(), version=cur.version)
        for add in more:
            add(tx)
        return not any(isinstance(r, Exception) for r in tx.commit())

    def _write(self, batch: list, live) -> int:
        tx = self.zk.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.epoch_version)
        for name, p, _, _, cur, new, _, _ in batch:
            tx.set_data(paths.partition_state(name, p), new.to_json(), version=cur.version)
        results = tx.commit()
        if not any(isinstance(r, Exception) for r in results):
            return len(batch)
        if isinstance(results[0], BadVersionError):  # the check of /controller_epoch (later ops: rolled back)
            log.warning("controller epoch %d is stale: not writing partition states", self.epoch)
            return 0
        return sum(self._retry_one(name, p, replicas, unclean, here, preferred)
                   for name, p, replicas, unclean, _, _, here, preferred in batch)

    def _retry_one(self, name: str, p: int, replicas, unclean: bool, live, preferred: bool) -> int:
        """A state changed under the batch: read it again and decide it alone (a few rounds at most)."""
        for _ in range(5):
            cur = self.states.reread(name, p)
            if cur is None:
                return 0
            new = decide(cur, replicas, live, unclean, self.epoch, preferred,
                         bounced_since(cur, live, self._registered))
            if new is None:
                return 0
            tx = self.zk.transaction()
            tx.check(paths.CONTROLLER_EPOCH, self.epoch_version)
            tx.set_data(paths.partition_state(name, p), new.to_json(), version=cur.version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                return 1
            if isinstance(results[0], BadVersionError):
                return 0  # the controller epoch moved on: not ours to write
        return 0


def bounced_since(state: LeaderAndIsr, live, registered: dict) -> frozenset:
    """The live brokers whose registration is newer than the state's last write (0: unknown, none)."""
    if not state.zxid:
        return frozenset()
    return frozenset(b for b in live if registered.get(b, 0) > state.zxid)


def _unclean(config: dict, default: bool) -> bool:
    value = config.get("unclean.leader.election.enable")
    return default if value is None else str(value).lower() == "true"

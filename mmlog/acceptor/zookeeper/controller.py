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

from mmlog.acceptor.zookeeper import paths
from mmlog.acceptor.zookeeper.paths import LeaderAndIsr

log = logging.getLogger(__name__)

MAX_OPS = 500  # writes per transaction: well inside ZooKeeper's 1 MiB request limit


def decide(cur: LeaderAndIsr, replicas: list[int], live, unclean: bool, epoch: int,
           preferred: bool = False) -> LeaderAndIsr | None:
    """The partition's next state under controller epoch `epoch`, or None if it stays as it is."""
    live_isr = tuple(r for r in cur.isr if r in live)
    if cur.leader >= 0 and cur.leader in live:
        first = replicas[0]
        if preferred and first != cur.leader and first in live_isr:
            return LeaderAndIsr(first, cur.leader_epoch + 1, live_isr, epoch)
        if live_isr != cur.isr:
            return LeaderAndIsr(cur.leader, cur.leader_epoch, live_isr, epoch)
        return None
    candidates = [r for r in replicas if r in live_isr]
    if candidates:
        return LeaderAndIsr(candidates[0], cur.leader_epoch + 1, live_isr, epoch)
    if unclean and (alive := [r for r in replicas if r in live]):
        log.warning("unclean election of broker %d: records only the old ISR %s held are lost", alive[0], cur.isr)
        return LeaderAndIsr(alive[0], cur.leader_epoch + 1, (alive[0],), epoch)
    if cur.leader == -1:
        return None
    return LeaderAndIsr(-1, cur.leader_epoch + 1, cur.isr, epoch)  # offline until an ISR member is back


class Controller:
    """Elections over every partition, written in batches."""

    def __init__(self, zk, states, unclean_default: bool) -> None:
        self.zk = zk
        self.states = states
        self.unclean_default = unclean_default
        self.epoch = 0
        self.epoch_version = -1  # version of /controller_epoch as we wrote it

    def elect(self, live, topics: dict, preferred: bool = False, offline: dict | None = None) -> int:
        """Decide every partition of `topics` (name -> TopicInfo) for the live brokers; returns changes made.
        `offline`: {(topic, partition): broker ids} of replicas on a failed log dir, which count as dead
        for that partition alone (Kafka's offline replicas)."""
        changes = []
        offline = offline or {}
        for name, info in topics.items():
            if info.assignment is None:
                continue
            unclean = _unclean(info.config, self.unclean_default)
            for p, replicas in enumerate(info.assignment):
                cur = self.states.get(name, p)
                here = live - offline[(name, p)] if (name, p) in offline else live
                if cur is not None and (new := decide(cur, replicas, here, unclean, self.epoch, preferred)):
                    changes.append((name, p, replicas, unclean, cur, new, here))
        done = 0
        for i in range(0, len(changes), MAX_OPS):
            done += self._write(changes[i:i + MAX_OPS], live, preferred)
        if done:
            log.info("controller: %d partition states changed (live brokers %s)", done, sorted(live))
        return done

    def _write(self, batch: list, live, preferred: bool) -> int:
        tx = self.zk.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.epoch_version)
        for name, p, _, _, cur, new, _ in batch:
            tx.set_data(paths.partition_state(name, p), new.to_json(), version=cur.version)
        results = tx.commit()
        if not any(isinstance(r, Exception) for r in results):
            return len(batch)
        if isinstance(results[0], BadVersionError):  # the check of /controller_epoch (later ops: rolled back)
            log.warning("controller epoch %d is stale: not writing partition states", self.epoch)
            return 0
        return sum(self._retry_one(name, p, replicas, unclean, here, preferred)
                   for name, p, replicas, unclean, _, _, here in batch)

    def _retry_one(self, name: str, p: int, replicas, unclean: bool, live, preferred: bool) -> int:
        """A state changed under the batch: read it again and decide it alone (a few rounds at most)."""
        for _ in range(5):
            cur = self.states.reread(name, p)
            if cur is None:
                return 0
            new = decide(cur, replicas, live, unclean, self.epoch, preferred)
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


def _unclean(config: dict, default: bool) -> bool:
    value = config.get("unclean.leader.election.enable")
    return default if value is None else str(value).lower() == "true"

"""The controller: one broker at a time (`/controller`, ephemeral) decides every partition's leader and
writes it to ZooKeeper.

When brokers come or go it decides every partition again by the election rules (`mmlog/replication/
election.py`: Kafka's rules, unclean elections, preferred leaders, ElectLeaders' asked elections).

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
from mmlog.replication.election import UNCLEAN, bounced_since, decide, requested
from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.errors import EligibleLeadersNotAvailable, KafkaError

log = logging.getLogger(__name__)

MAX_OPS = 500  # writes per transaction: well inside ZooKeeper's 1 MiB request limit


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


def _unclean(config: dict, default: bool) -> bool:
    value = config.get("unclean.leader.election.enable")
    return default if value is None else str(value).lower() == "true"

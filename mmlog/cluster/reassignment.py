"""Partition reassignments (KIP-455: AlterPartitionReassignments), carried out by the controller.

A reassignment moves a partition from its original replicas (ORS) to target
replicas (TRS). Kafka 2.4+'s state, in the topic node itself, so that it outlives
the controller that started it:

    "partitions":        {"0": RS}    RS = TRS + (ORS - TRS), the preferred leader first
    "adding_replicas":   {"0": AR}    AR = TRS - ORS
    "removing_replicas": {"0": RR}    RR = ORS - TRS

Steps, each one ZooKeeper transaction that also checks the controller epoch (a
deposed controller writes nothing) and compare-and-sets the nodes it read:

1. start: the topic node gets RS/AR/RR; the state node the leader epoch + 1 (the
   replica set changed: every replica takes its role again with the new set, the
   leader's follower rows start afresh) and the ISR within RS. Every broker applies
   the topic node through its watch (`cluster.py`): one in AR makes an empty
   replica, follows the leader and fetches (throttled if asked,
   `replication/throttle.py`); the leader takes it into the ISR once it reached the
   high watermark (the ordinary ISR rule, `replicas.py`).
2. complete, when every TRS member is in the ISR (checked whenever partition
   states change and on the controller's timer): the leader stays if it is in TRS,
   else the first live ISR member of TRS leads; ISR within TRS; epoch + 1; the
   topic node's replicas become TRS and its AR/RR entries go. Brokers in RR delete
   their replica when their watch sees they no longer hold it.
3. cancel (null replicas): back to ORS = RS - AR, the same way (Kafka's order of
   RS minus AR); the added replicas are deleted.

A new reassignment of a partition already moving starts from its ORS (Kafka's
`ReplicaAssignment.reassignTo`): replicas the first one added and the second does
not want are dropped at once.

Crash points: the controller dies between steps: the next controller reads every
topic node when elected (`load`) and goes on from what they say. It dies inside a
step: the transaction was all or nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from mmlog.cluster import paths
from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.errors import (InvalidReplicaAssignment, KafkaError, NoReassignmentInProgress, UnknownServerError,
                          UnknownTopicOrPartition)

log = logging.getLogger(__name__)

Key = tuple[str, int]


@dataclass(frozen=True)
class Ongoing:
    """A partition being reassigned: its replicas now (RS), those being added (AR) and removed (RR)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def origin(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]


def reassign_to(origin: list[int], target: list[int]) -> Ongoing:
    """Kafka's `reassignTo`: RS = TRS then the rest of ORS; AR = RS - ORS; RR = RS - TRS."""
    rs = list(dict.fromkeys([*target, *origin]))
    return Ongoing(tuple(rs), tuple(r for r in rs if r not in origin), tuple(r for r in rs if r not in target))


def check_target(target: list[int], live) -> None:
    """Kafka's checks of a target replica list (INVALID_REPLICA_ASSIGNMENT)."""
    if not target:
        raise InvalidReplicaAssignment("Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignment(f"Duplicate replica ids in partition reassignment replica list: {target}")
    if any(r < 0 for r in target):
        raise InvalidReplicaAssignment(f"Invalid broker id in replica list: {target}")
    if missing := sorted(set(target) - set(live)):
        raise InvalidReplicaAssignment(f"Replica assignment has brokers that are not alive. Replica list: "
                                       f"{target}, live broker list: {sorted(live)} (missing {missing})")


def moved(cur: LeaderAndIsr, replicas, live, epoch: int) -> LeaderAndIsr:
    """The state for a new replica set: the leader stays if it is in it and live, else the first live ISR
    member of the set leads (-1: none); the ISR keeps its members within the set; epoch + 1."""
    isr = tuple(r for r in cur.isr if r in replicas)
    if cur.leader in replicas and cur.leader in live:
        leader = cur.leader
    else:
        leader = next((r for r in replicas if r in isr and r in live), -1)
    return LeaderAndIsr(leader, cur.leader_epoch + 1, isr, epoch)


class Reassignments:
    """The controller's reassignments: started, listed, cancelled, carried to their end."""

    def __init__(self, zk, states, controller) -> None:
        self.zk = zk
        self.states = states
        self.controller = controller
        self.ongoing: dict[Key, Ongoing] = {}

    def load(self) -> None:
        """Read every topic node (a newly elected controller): reassignments a previous one started."""
        self.ongoing = {}
        for name in self.zk.get_children(paths.TOPICS):
            try:
                data, _ = self.zk.get(paths.topic(name))
            except NoNodeError:
                continue
            replicas, _ = paths.parse_assignment(data)
            adding, removing = paths.parse_reassigning(data)
            for p in adding.keys() | removing.keys():
                if p < len(replicas):
                    self.ongoing[name, p] = Ongoing(tuple(replicas[p]), tuple(adding.get(p, ())),
                                                    tuple(removing.get(p, ())))
        if self.ongoing:
            log.info("controller: %d partition reassignments in progress: %s", len(self.ongoing),
                     sorted(self.ongoing))

    def listing(self, keys=None) -> dict[Key, Ongoing]:
        """The reassignments in progress (of `keys`, if given)."""
        return {k: v for k, v in sorted(self.ongoing.items()) if keys is None or k in keys}

    # ------------------------------------------------------------ start and cancel

    def alter(self, name: str, p: int, target: list[int] | None, live) -> None:
        """Start (or redirect) a reassignment of one partition to `target`; None cancels it. Raises the
        partition's Kafka error."""
        if target is not None:
            check_target(target, live)
        for _ in range(5):
            try:
                data, stat = self.zk.get(paths.topic(name))
            except NoNodeError:
                raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.") from None
            replicas, topic_id = paths.parse_assignment(data)
            if not 0 <= p < len(replicas):
                raise UnknownTopicOrPartition(f"The partition {name}-{p} does not exist.")
            adding, removing = paths.parse_reassigning(data)
            now = Ongoing(tuple(replicas[p]), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
            moving = bool(now.adding or now.removing)
            if target is None and not moving:
                raise NoReassignmentInProgress(f"No reassignment is in progress for {name}-{p}.")
            new = reassign_to(now.origin, now.origin if target is None else list(target))
            if new.replicas == now.replicas and new.adding == now.adding and new.removing == now.removing:
                return  # already so
            cur = self.states.get(name, p) or self.states.reread(name, p)
            if cur is None:
                raise UnknownTopicOrPartition(f"The partition {name}-{p} has no state yet.")
            done = not (new.adding or new.removing)
            if self._write(name, p, replicas, topic_id, adding, removing, stat.version, new, cur, live):
                if done:
                    self.ongoing.pop((name, p), None)
                    log.info("controller: reassignment of %s-%d cancelled: replicas %s", name, p, list(new.replicas))
                else:
                    self.ongoing[name, p] = new
                    log.info("controller: reassigning %s-%d to %s (adding %s, removing %s)", name, p,
                             new.target, list(new.adding), list(new.removing))
                    self.progress(live, [(name, p)])  # already done (replicas only removed)?
                return
            self.states.reread(name, p)
        raise UnknownServerError(f"{name}-{p} kept changing while its reassignment was written")

    def _write(self, name, p, replicas, topic_id, adding, removing, version, new: Ongoing, cur, live) -> bool:
        """The topic node (compare-and-set) and the partition's state in one transaction."""
        replicas = [list(r) for r in replicas]
        replicas[p] = list(new.replicas)
        adding, removing = dict(adding), dict(removing)
        adding.pop(p, None)
        removing.pop(p, None)
        if new.adding or new.removing:
            adding[p], removing[p] = list(new.adding), list(new.removing)
        node = paths.assignment(replicas, topic_id, adding, removing)
        state = moved(cur, new.replicas, live, self.controller.epoch)
        return self.controller.write_state(name, p, cur, state,
                                           [lambda tx: tx.set_data(paths.topic(name), node, version=version)])

    # ------------------------------------------------------------ completion

    def progress(self, live, keys=None) -> int:
        """Finish every reassignment (of `keys`) whose target replicas are all in the ISR; returns how many."""
        done = 0
        for key in [k for k in self.ongoing if keys is None or k in keys]:
            try:
                done += self._complete(*key, live)
            except KafkaError as exc:
                log.warning("reassignment of %s-%d: %s", *key, exc)
        return done

    def _complete(self, name: str, p: int, live) -> int:
        ongoing = self.ongoing[name, p]
        cur = self.states.get(name, p)
        target = ongoing.target
        if cur is None or not all(r in cur.isr for r in target):
            return 0
        if moved(cur, target, live, self.controller.epoch).leader < 0:
            return 0  # no live ISR member of the target to lead: wait
        try:
            data, stat = self.zk.get(paths.topic(name))
        except NoNodeError:
            self.ongoing.pop((name, p), None)  # deleted meanwhile
            return 0
        replicas, topic_id = paths.parse_assignment(data)
        adding, removing = paths.parse_reassigning(data)
        final = Ongoing(tuple(target), (), ())
        if self._write(name, p, replicas, topic_id, adding, removing, stat.version, final, cur, live):
            self.ongoing.pop((name, p), None)
            log.info("controller: reassignment of %s-%d done: replicas %s", name, p, target)
            return 1
        self.states.reread(name, p)  # an ISR change or another write meanwhile: the next pass tries again
        return 0

"""A partition's replication state: who leads in which leader epoch, the in-sync replicas, and the version
of the node it was read from. The controller's elections (election.py) and the leader's ISR changes (isr.py)
each make a new one; the ZooKeeper store keeps it as the partition's state node, compact JSON, Kafka's layout:

    {"controller_epoch":E,"leader":id|-1,"version":1,"leader_epoch":N,"isr":[id,...]}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mmlog.system.compact_json import dump, load


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's state node: who leads in which epoch, the ISR, and the node's version.

    `version` is ZooKeeper's data version of the node: every writer (the controller
    electing, the leader changing its ISR) compare-and-sets against the version it
    read, so of two concurrent writers one fails and re-reads.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = -1
    # The node's last write (ZooKeeper's mzxid; 0: not read from ZooKeeper). A broker registered after it
    # (its registration's czxid is larger: its broker epoch) restarted or lost its session since: the
    # state's word on it is stale (election.decide, cluster/replicas.py).
    zxid: int = field(default=0, compare=False)

    def to_json(self) -> bytes:
        return dump({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                     "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def parse(cls, data: bytes, version: int, zxid: int = 0) -> "LeaderAndIsr":
        doc = load(data)
        return cls(doc["leader"], doc["leader_epoch"], tuple(doc.get("isr", ())), doc.get("controller_epoch", 0),
                   version, zxid)

"""A topic as the catalogue holds it: partition count, config overrides, id, and where its replicas are."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class TopicInfo:
    """A topic in the catalogue."""

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)  # overrides only, Kafka names
    topic_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    assignment: list[list[int]] | None = None  # replicas per partition (cluster mode); None: all here, alone

    def __post_init__(self) -> None:
        if self.assignment is not None:  # catalogues before replication held one broker id per partition
            self.assignment = [[r] if isinstance(r, int) else list(r) for r in self.assignment]

    def to_json(self) -> dict:
        doc = {"partitions": self.partitions, "config": self.config, "id": self.topic_id}
        if self.assignment is not None:
            doc["assignment"] = self.assignment
        return doc

    def replica_counts(self) -> Counter:
        """Its partition replicas per broker id (None for a standalone topic's, all on this broker)."""
        if self.assignment is None:
            return Counter({None: self.partitions})
        return Counter(b for replicas in self.assignment for b in replicas)

    def replicas(self, partition: int, standalone_id: int) -> list[int]:
        """The brokers holding a partition, its preferred leader first."""
        return [standalone_id] if self.assignment is None else self.assignment[partition]

    def hosts(self, partition: int, broker_id: int | None) -> bool:
        """Whether broker_id has a replica of the partition (every broker of a standalone topic)."""
        return self.assignment is None or broker_id is None or broker_id in self.assignment[partition]

    def hosted(self, broker_id: int | None) -> list[int]:
        """The partitions with a replica on broker_id (all of them for a standalone topic)."""
        if self.assignment is None or broker_id is None:
            return list(range(self.partitions))
        return [p for p, replicas in enumerate(self.assignment) if broker_id in replicas]

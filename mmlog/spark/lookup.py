"""The driver's questions to the cluster: which topics a subscription names, and each partition's
earliest and latest offsets and leader. Executors never ask these; they get the answers in their
input partitions."""

from __future__ import annotations

import re

from mmlog.client.admin import Admin
from mmlog.client.records import TopicPartition
from mmlog.errors import UnknownTopicOrPartition
from mmlog.spark.offsets import EARLIEST, LATEST


class BrokerLookup:
    """Metadata and ListOffsets through one Admin client (closed with `close`)."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, *, read_committed: bool = True,
                 security: tuple = ()) -> None:
        self.admin = Admin(bootstrap, client_id="mmlog-spark", timeout=timeout, **dict(security))
        self.read_committed = read_committed

    def topics(self, names: tuple[str, ...] | None, pattern: str | None, *, missing_ok: bool) -> list[str]:
        """The subscribed topics that exist: the names given (a missing one is an error unless missing_ok,
        as a stream may start before its topic), or every topic the pattern matches whole."""
        if pattern is not None:
            return [t for t in self.admin.list_topics() if re.fullmatch(pattern, t)]
        cluster = self.admin.cluster
        cluster.refresh(list(names), allow_auto_create=False)
        missing = [t for t in names if t not in cluster.topics or cluster.topics[t].error]
        if missing and not missing_ok:
            raise UnknownTopicOrPartition(f"mmlog: topic {missing[0]!r} does not exist")
        return [t for t in names if t not in missing]

    def bounds(self, topics: list[str]) -> dict[TopicPartition, tuple[int, int]]:
        """(earliest, latest) offset of every partition of the topics; latest is the last stable offset when
        reading committed data (a range never reaches into an undecided transaction)."""
        out = {}
        for topic in topics:
            earliest = self.admin.offsets(topic, EARLIEST)
            latest = self.admin.offsets(topic, LATEST, read_committed=self.read_committed)
            out.update({TopicPartition(topic, p): (earliest[p], latest[p]) for p in latest})
        return out

    def leaders(self, partitions) -> dict[TopicPartition, str]:
        """The address (host:port) of each partition's leader, from the metadata `topics` fetched while
        planning (a leader that moved since is found by the executor); asked for only for topics not
        known yet (a streaming query replanning a batch after a restart)."""
        cluster = self.admin.cluster
        unknown = sorted({tp.topic for tp in partitions} - cluster.topics.keys())
        if unknown:
            cluster.refresh(unknown, allow_auto_create=False)
        return {tp: cluster.leader(tp.topic, tp.partition).address for tp in partitions}

    def close(self) -> None:
        self.admin.close()

    def __enter__(self) -> "BrokerLookup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

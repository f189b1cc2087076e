"""The admin client's offset operations: ListOffsets and DeleteRecords, each at the partitions' leaders.

A mixin of `Admin` (admin.py)."""

from __future__ import annotations

import time

from mmlog.errors import LeaderNotAvailable, UnknownTopicOrPartition, error_for_code
from mmlog.protocol.messages import delete_records, list_offsets

LATEST, EARLIEST = -1, -2  # ListOffsets timestamps
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms


class OffsetAdmin:
    """Partition offsets: latest, earliest, by time; deleting records below an offset."""

    def offsets(self, topic: str, timestamp: int = LATEST, *, offline: int | None = None,
                read_committed: bool = False) -> dict[int, int]:
        """Per partition: latest (-1), earliest (-2), or the first offset at/after a timestamp (ms; -1 if none).
        Latest is the high watermark, or with read_committed the last stable offset.

        A partition whose broker is down raises LeaderNotAvailable, or gets `offline` if one is given. A
        leader that answers with a retriable error (NOT_LEADER_OR_FOLLOWER: leadership moved since the
        metadata was read) is asked again after a metadata refresh, as Kafka's admin client does, until
        the admin's timeout.
        """
        deadline = time.monotonic() + self.timeout
        out: dict[int, int] = {}
        pending = range(self.cluster.topic(topic, allow_auto_create=False).partitions)
        while pending:
            pending = self._offsets_once(topic, pending, timestamp, offline, read_committed, out,
                                         last_try=time.monotonic() >= deadline)
            if pending:
                time.sleep(RETRY_BACKOFF_S)
                self.cluster.refresh([topic], allow_auto_create=False)
        return dict(sorted(out.items()))

    def _offsets_once(self, topic: str, partitions, timestamp: int, offline: int | None, read_committed: bool,
                      out: dict[int, int], last_try: bool) -> list[int]:
        """One ListOffsets per leader of `partitions` into `out`; the partitions to ask again (a retriable
        error while time remains)."""
        info = self.cluster.topic(topic, allow_auto_create=False)
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            leader = info.leaders[p]
            if leader in self.cluster.brokers:
                by_leader.setdefault(leader, []).append(p)
            elif offline is None:
                raise LeaderNotAvailable(f"{topic}-{p} has no live leader")
            else:
                out[p] = offline
        again = []
        for leader, parts in by_leader.items():
            body = self._request(leader, list_offsets.API_KEY, 5, list_offsets.REQUEST(
                replica_id=-1, isolation_level=int(read_committed), topics=[{"name": topic, "partitions": [
                    {"partition_index": p, "timestamp": timestamp} for p in parts]}]))
            for part in body.topics[0].partitions:
                if not part.error_code:
                    out[part.partition_index] = part.offset
                    continue
                error = error_for_code(part.error_code, f"{topic}-{part.partition_index}")
                if last_try or not error.retriable:
                    raise error
                again.append(part.partition_index)
        return again

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int]:
        """Delete the records of partitions below an offset each (-1: the high watermark), on their leaders;
        returns each partition's low watermark (its new log start on every live replica). The typed error of
        the first partition refused (OffsetOutOfRange past the high watermark, RequestTimedOut while
        followers lag...) is raised after every leader has answered."""
        info = self.cluster.topic(topic, allow_auto_create=False)
        by_leader: dict[int, list[int]] = {}
        for p in before:
            if not 0 <= p < info.partitions:
                raise UnknownTopicOrPartition(f"{topic} has no partition {p}")
            leader = info.leaders[p]
            if leader not in self.cluster.brokers:
                raise LeaderNotAvailable(f"{topic}-{p} has no live leader")
            by_leader.setdefault(leader, []).append(p)
        out, errors = {}, []
        for leader, parts in sorted(by_leader.items()):
            body = self._request(leader, delete_records.API_KEY, 1, delete_records.REQUEST(
                timeout_ms=int(self.timeout * 1000), topics=[{"name": topic, "partitions": [
                    {"partition_index": p, "offset": before[p]} for p in parts]}]))
            for part in body.topics[0].partitions:
                if part.error_code:
                    errors.append((part.error_code, f"{topic}-{part.partition_index}"))
                else:
                    out[part.partition_index] = part.low_watermark
        self._raise_first(errors)
        return dict(sorted(out.items()))

    def partition_offsets(self, partitions, timestamp: int = LATEST, *,
                          read_committed: bool = False) -> dict[tuple[str, int], int | None]:
        """`offsets` of any partitions of any topics at once: one ListOffsets per leader. None for a
        partition without a live leader, unknown, or whose leader refused it."""
        partitions = sorted(set(partitions))
        topics = sorted({t for t, _ in partitions})
        if topics:
            self.cluster.refresh(topics, allow_auto_create=False)
        by_leader: dict[int, dict[str, list[int]]] = {}
        out: dict[tuple[str, int], int | None] = {}
        for topic, p in partitions:
            out[topic, p] = None
            info = self.cluster.topics.get(topic)
            leader = info.leaders[p] if info is not None and info.error == 0 and p < len(info.leaders) else -1
            if leader in self.cluster.brokers:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(p)
        for leader, parts in sorted(by_leader.items()):
            body = self._request(leader, list_offsets.API_KEY, 5, list_offsets.REQUEST(
                replica_id=-1, isolation_level=int(read_committed), topics=[{"name": t, "partitions": [
                    {"partition_index": p, "timestamp": timestamp} for p in ps]} for t, ps in parts.items()]))
            for t in body.topics:
                for part in t.partitions:
                    if not part.error_code:
                        out[t.name, part.partition_index] = part.offset
        return out

    def earliest_offsets(self, topic: str) -> dict[int, int]:
        return self.offsets(topic, EARLIEST)

    def latest_offsets(self, topic: str) -> dict[int, int]:
        return self.offsets(topic, LATEST)

    def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[int, int]:
        return self.offsets(topic, timestamp_ms)

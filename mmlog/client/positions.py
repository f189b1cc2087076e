"""Where the consumer's partitions start: ListOffsets for resets, OffsetFetch for committed offsets.

A mixin of `Consumer` (consumer.py), plus the blocking ListOffsets behind `beginning_offsets` and
`end_offsets`."""

from __future__ import annotations

import time
from typing import Iterable, Iterator

from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.fetcher import REFRESH_CODES
from mmlog.client.partition_state import COMMITTED, LISTED, PartitionState
from mmlog.client.records import TopicPartition, as_topic_partition
from mmlog.errors import LeaderNotAvailable, RequestTimedOut, UnknownTopicOrPartition, error_for_code
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import list_offsets

LIST_OFFSETS_VERSION = 5


class Positions:
    """Resolves pending resets and committed-offset lookups in the event loop, and answers offset queries."""

    def _send_resets(self, node: int, states: list[PartitionState], now: float) -> None:
        due = [st for st in states if st.reset in LISTED and not st.resetting and st.retry_at <= now]
        if not due:
            return
        sent = {st.tp: (st, st.epoch) for st in due}
        for st in due:
            st.resetting = True
        body = _list_offsets_request([(st.tp, st.reset) for st in due], self._isolation)
        self._channels[node].send(list_offsets.API_KEY, LIST_OFFSETS_VERSION, body,
                                  lambda body, exc: self._on_reset(node, sent, body, exc))

    def _on_reset(self, node: int, sent: dict, body, exc: BaseException | None) -> None:
        for st, _ in sent.values():
            st.resetting = False
        if exc is not None:
            self._note_failure(exc)
            return
        self._note_success(node)
        now = time.monotonic()
        for tp, code, offset in _list_offsets_results(body):
            st, epoch = sent.get(tp, (None, None))
            if st is None or st.epoch != epoch or self._assigned.get(tp) is not st or st.reset is None:
                continue
            if code == 0 and offset >= 0:
                st.position = st.fetch_offset = offset
                st.reset = None
            elif code in REFRESH_CODES:
                self._retry_later(st, now)
            else:
                st.error = error_for_code(code, f"ListOffsets for {tp.topic}-{tp.partition}")
                st.halted = True
        if node in self._channels and not self._channels[node].closed:
            self._send_fetch(node, [st for st in self._assigned.values() if st.leader == node], now)

    def _send_committed_lookups(self, now: float) -> float:
        """Ask the coordinator for the committed offsets of the partitions waiting for one; return how
        long the event loop may wait before trying again."""
        due = [st for st in self._assigned.values()
               if st.reset == COMMITTED and not st.resetting and st.retry_at <= now]
        if not due:
            return 3600.0
        sent = {st.tp: (st, st.epoch) for st in due}
        for st in due:
            st.resetting = True
        if not self._group.send_offset_fetch(list(sent), lambda result, exc: self._on_committed(sent, result, exc)):
            for st in due:
                st.resetting = False
                st.retry_at = now + self._retry_backoff
            return max(self._retry_backoff, self._group.coordinator_wait(now))
        return 3600.0

    def _on_committed(self, sent: dict, result: dict | None, exc: BaseException | None) -> None:
        now = time.monotonic()
        for st, _ in sent.values():
            st.resetting = False
        for tp, (st, epoch) in sent.items():
            if st.epoch != epoch or self._assigned.get(tp) is not st or st.reset != COMMITTED:
                continue  # seeked or unassigned meanwhile
            if exc is not None or tp not in result:
                if exc is not None and not getattr(exc, "retriable", False):
                    st.error = exc
                    st.halted = True
                    continue
                st.retry_at = now + self._retry_backoff
                continue
            offset = result[tp]
            if offset >= 0:
                st.position = st.fetch_offset = st.committed = offset
                st.reset = None
            else:
                self._reset_position(st)

    def _retry_later(self, st: PartitionState, now: float) -> None:
        st.leader = -1
        st.retry_at = now + self._retry_backoff
        self._need_metadata = True

    def _list_offsets(self, partitions: Iterable, timestamp: int, timeout: float | None) -> dict:
        """Blocking ListOffsets, one short-lived connection per leader (so no parked Fetch delays it)."""
        self._check_open()
        tps = list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        timeout = self._request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        result: dict[TopicPartition, int] = {}
        last: BaseException | None = None
        while True:
            pending = [tp for tp in tps if tp not in result]
            if not pending:
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOut(f"ListOffsets for {len(pending)} partitions not answered within "
                                      f"{timeout:g} s ({last})")
            try:
                self._cluster.refresh(sorted({tp.topic for tp in pending}), allow_auto_create=False,
                                      timeout=max(0.05, left))
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in pending:
                    info = self._cluster.topics.get(tp.topic)
                    if info is not None and info.error not in (0, LeaderNotAvailable.code):
                        raise error_for_code(info.error, f"topic {tp.topic!r}")
                    if info is not None and tp.partition >= info.partitions and info.error == 0:
                        raise UnknownTopicOrPartition(f"{tp.topic} has no partition {tp.partition}")
                    leader = info.leaders[tp.partition] if info is not None and info.error == 0 else -1
                    if leader in self._cluster.brokers:
                        by_leader.setdefault(leader, []).append(tp)
                for node, group in by_leader.items():
                    broker = self._cluster.brokers[node]
                    with BrokerConnection(broker.host, broker.port, client_id=self.client_id,
                                          security=self._cluster.security,
                                          timeout=max(0.1, deadline - time.monotonic()),
                                          connect_timeout=max(0.1, min(5.0, deadline - time.monotonic()))) as conn:
                        body = conn.request(list_offsets.API_KEY, LIST_OFFSETS_VERSION,
                                            _list_offsets_request([(tp, timestamp) for tp in group],
                                                                  self._isolation))
                    for tp, code, offset in _list_offsets_results(body):
                        if code == 0:
                            result[tp] = offset
                        elif code not in REFRESH_CODES:
                            raise error_for_code(code, f"ListOffsets for {tp.topic}-{tp.partition}")
            except (ConnectionClosed, RequestTimedOut, OSError, ProtocolError) as exc:
                last = exc
            if any(tp not in result for tp in tps):
                time.sleep(min(self._retry_backoff, max(0.0, deadline - time.monotonic())))


def _list_offsets_request(items: list[tuple[TopicPartition, int]], isolation: int = 0):
    topics: dict[str, list] = {}
    for tp, timestamp in items:
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": timestamp})
    return list_offsets.REQUEST(replica_id=-1, isolation_level=isolation,
                                topics=[{"name": t, "partitions": parts} for t, parts in topics.items()])


def _list_offsets_results(body) -> Iterator[tuple[TopicPartition, int, int]]:
    for topic in body.topics:
        for part in topic.partitions:
            yield TopicPartition(topic.name, part.partition_index), part.error_code, part.offset

"""The consumer's fetches: one pipelined Fetch in flight per leader, its chunks scanned, decoded and queued.

A mixin of `Consumer` (consumer.py); the module docstring there tells why the next Fetch leaves
before the chunks of this one are decoded."""

from __future__ import annotations

import time

from mmlog.client.fetch_requests import FETCH_VERSION
from mmlog.client.partition_state import PartitionState
from mmlog.errors import (CorruptMessage, KafkaStorageError, LeaderNotAvailable, NotLeaderOrFollower,
                          OffsetOutOfRange, UnknownTopicOrPartition, error_for_code)
from mmlog.protocol.messages import fetch

# Errors a metadata refresh (new leader, topic created) can cure: retry with backoff.
REFRESH_CODES = {NotLeaderOrFollower.code, UnknownTopicOrPartition.code, LeaderNotAvailable.code,
                  KafkaStorageError.code}


class Fetching:
    """Sends each leader's Fetch and turns its answer into chunks for the application, or errors."""

    def _send_fetch(self, node: int, states: list[PartitionState], now: float) -> None:
        """Send the node's next Fetch if none is in flight and some partition of it can fetch."""
        if node in self._fetching:
            return
        due = [st for st in states if st.leader == node and st.fetchable and st.retry_at <= now]
        if not due:
            return
        sent = {}
        parts = []
        for st in due:
            st.fetching = True
            sent[st.tp] = (st, st.epoch, st.fetch_offset)
            parts.append((st.tp.topic, st.tp.partition, st.fetch_offset, st.fetch_bytes))
        frame = self._fetch_requests.frame(parts, max(self._fetch_max_bytes, max(st.fetch_bytes for st in due)))
        self._fetching.add(node)
        channel = self._channels[node]
        channel.queue_frame([frame], fetch.API_KEY, FETCH_VERSION,
                            lambda body, exc: self._on_fetch(node, sent, body, exc))
        channel.on_writable()

    def _on_fetch(self, node: int, sent: dict, body, exc: BaseException | None) -> None:
        self._fetching.discard(node)
        for st, _, _ in sent.values():
            st.fetching = False
        if exc is not None:
            self._note_failure(exc)
            return
        self._note_success(node)
        self._throttle_ms = body.throttle_time_ms
        self._throttle_ms_max = max(self._throttle_ms_max, body.throttle_time_ms)
        now = time.monotonic()
        bulk = self._bulk
        chunks = []
        if body.error_code:  # a top-level error (fetch sessions, which mmlog does not use): retry
            for st, _, _ in sent.values():
                st.retry_at = now + self._retry_backoff
        for topic in body.responses:
            for part in topic.partitions:
                entry = sent.get((topic.topic, part.partition_index))
                if entry is None:
                    continue
                st, epoch, offset = entry
                if st.epoch != epoch or st.halted or self._assigned.get(st.tp) is not st:
                    continue  # seeked, reset or unassigned since the request left
                code = part.error_code
                if code == 0:
                    st.high_watermark = part.high_watermark
                    data = part.records
                    if not data:
                        continue
                    scan = bulk.scan_chunk(data, offset)
                    if scan.status == bulk.TRUNCATED:  # the first batch is larger than we asked for
                        st.fetch_bytes = min(st.fetch_bytes * 2, 0x7FFFFFFF)
                        continue
                    st.fetch_bytes = self._partition_bytes
                    if scan.status != bulk.OK:
                        self._halt(st, epoch, CorruptMessage(
                            f"{st.tp.topic}-{st.tp.partition} at offset {offset}: batch at byte {scan.end} of "
                            f"the fetched chunk: {bulk.STATUS_TEXT[scan.status]}"), offset)
                        continue
                    st.fetch_offset = scan.next_offset
                    chunks.append((st, epoch, data, offset, scan, part.aborted_transactions if self._isolation else None))
                elif code == OffsetOutOfRange.code:
                    self._out_of_range(st, offset, part)
                elif code in REFRESH_CODES:
                    self._retry_later(st, now)
                else:
                    self._halt(st, epoch, error_for_code(code, f"fetch {st.tp.topic}-{st.tp.partition} "
                                                                f"at offset {offset}"), offset)
        # The next Fetch leaves before any of these records reach the application.
        states = [st for st in self._assigned.values() if st.leader == node]
        self._send_resets(node, states, now)
        self._send_fetch(node, states, now)
        for st, epoch, data, offset, scan, aborted in chunks:
            try:
                arrays = bulk.decode_chunk(data, offset, topic=st.tp.topic, partition=st.tp.partition,
                                           check_crcs=self._check_crcs, scan=scan, aborted=aborted)
            except CorruptMessage as err:
                self._halt(st, epoch, err, offset)
                continue
            self._ready.append((st, epoch, arrays))
            st.buffered += 1

    def _halt(self, st: PartitionState, epoch: int, exc: BaseException, offset: int) -> None:
        """Queue an error behind the partition's good chunks; fetch nothing more for it until a seek."""
        st.halted = True
        empty = self._record_arrays.RecordArrays.empty(st.tp.topic, st.tp.partition, offset)
        self._ready.append((st, epoch, empty))  # the position stops at the failing offset...
        self._ready.append((st, epoch, exc))  # ...and then poll raises
        st.buffered += 2

    def _out_of_range(self, st: PartitionState, offset: int, part) -> None:
        if self._reset_policy is None:
            self._halt(st, st.epoch, OffsetOutOfRange(
                f"{st.tp.topic}-{st.tp.partition}: offset {offset} is outside the log "
                f"[{part.log_start_offset}, {part.high_watermark}] and auto_offset_reset is 'none'"), offset)
            return
        self._drop(st)
        st.jump(None, self._reset_policy)  # position() waits for the reset to resolve

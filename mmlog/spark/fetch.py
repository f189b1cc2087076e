"""The executor's side of a read: one partition's offsets [start, end) fetched from its leader.

A Spark task reads one `OffsetRange`. `RangeFetcher` connects straight to the
partition's leader, whose address the driver looked up and put in the input
partition, and keeps one Fetch in flight ahead of the decoding: as soon as a
chunk's batch headers are scanned (microseconds), the Fetch for the next offset
leaves, so the broker reads the next chunk while this one is decoded and handed
to Spark. `chunks()` decodes them with the client's bulk decoder (CRCs checked, as
the consumer does) and cuts them at `end`; `scanned()` hands them over undecoded, for
the Spark reader's one-pass decoder (direct.py), which does the same.

Errors: a lost connection, a timeout or a moved leader (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, ...) make the fetcher ask the bootstrap brokers for
metadata and go to the leader they name, backing off, for up to `timeout`
seconds. Records the range names that are gone (retention deleted them:
OFFSET_OUT_OF_RANGE; or the log now ends before `end`) raise `DataLoss` with
failOnDataLoss, Spark's default, and are skipped without it.

Answers are read into buffers the fetcher keeps (`ReceiveBuffers`): a fetched chunk of several MiB
in a fresh buffer cost a zero-fill and a page fault every 4 KiB before the socket's bytes were even
copied in. A buffer is used again once nothing refers to it any more (the chunk's RecordArrays
and the Fetch answer dropped: the Arrow batches Spark gets are copies, see direct.py and arrow.py).
The one-pass decoder keeps the buffers it decodes into the same way (`KeptBuffers`).

Committed data only, by default (the `isolation_level` option): Fetch asks for
isolation level 1, so the broker stops at the last stable offset (the driver planned
`end` at or below it), and the aborted transactions each response names are dropped
by the bulk decoder, whole batches at a time.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Iterator, NamedTuple

import numpy as np

from mmlog.client import bulk
from mmlog.client.record_arrays import RecordArrays
from mmlog.client.cluster import Cluster
from mmlog.client.fetch_requests import FETCH_VERSION, FetchRequests
from mmlog.client.fetcher import REFRESH_CODES
from mmlog.client.connection import BrokerConnection, ConnectionClosed, parse_bootstrap
from mmlog.security.client import ClientSecurity
from mmlog.errors import CorruptMessage, KafkaError, OffsetOutOfRange, RequestTimedOut, error_for_code
from mmlog.protocol import decode_response
from mmlog.protocol.messages import fetch

MAX_WAIT_MS = 500  # a range ends at or below the high watermark it was planned with: fetches rarely wait
MAX_FRAME = 1 << 30


class KeptBuffers:
    """A few numpy byte buffers, each handed out again once nothing but this pool refers to it.

    Every view, array or Arrow buffer made from a buffer holds a reference to it, so a buffer whose only
    reference is the pool's is free: nothing it lent is alive. A fresh buffer of several MiB costs a
    page fault every 4 KiB as it is first written, each fault zeroing its page: a kept one costs none."""

    KEEP = 3

    def __init__(self, keep: int | None = None) -> None:
        self._buffers: list[np.ndarray] = []
        self._keep = self.KEEP if keep is None else keep

    def take(self, size: int) -> np.ndarray:
        """A uint8 buffer of at least size bytes (its contents undefined) that nothing else refers to."""
        buffers = self._buffers
        free = -1
        for i in range(len(buffers)):
            if _refs(buffers, i) == _FREE:  # nothing but this list holds it
                if len(buffers[i]) >= size:
                    return buffers[i]
                free = i
        if free >= 0:
            del buffers[free]  # too small: room for a bigger one
        # np.empty, not bytearray: no zero-fill (the caller overwrites it); 4 MiB and more on huge pages
        buf = np.empty(max(size, 1 << 16), np.uint8)
        if len(buffers) < self._keep:
            buffers.append(buf)
        return buf


class ReceiveBuffers(KeptBuffers):
    """Answer frames read from a socket into a few kept buffers, each used again once nothing refers to it.

    A frame's memoryview (and every view or array made from it) holds a reference to its buffer, so a
    buffer whose only references are this pool's is free: no copy of the bytes it lent is alive."""

    KEEP = 3  # the answer being decoded, the next one arriving, and one spare

    def __init__(self) -> None:
        super().__init__()
        self._head = bytearray(4)

    def read(self, sock) -> memoryview:
        """The next frame's body (without its size prefix), from a blocking socket (its timeout applies)."""
        _fill(sock, memoryview(self._head))
        size = int.from_bytes(self._head, "big", signed=True)
        if not 0 <= size <= MAX_FRAME:
            raise ConnectionClosed(f"bad frame size {size}")
        view = memoryview(self.take(size))[:size]
        _fill(sock, view)
        return view


def _refs(items: list, i: int) -> int:
    """References to items[i], counted the same way for every item and for the calibration below."""
    return sys.getrefcount(items[i])


_FREE = _refs([object()], 0)  # what _refs says of an object that only its list holds (on this interpreter)


def _fill(sock, view: memoryview) -> None:
    got, want = 0, len(view)
    while got < want:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionClosed("the broker closed the connection")
        got += n


class Scanned(NamedTuple):
    """A fetched chunk (a view of the answer's bytes), the offset it was fetched at, its batch headers'
    scan, and the aborted transactions to drop (None when reading uncommitted data)."""

    data: memoryview
    offset: int
    scan: bulk.Scan
    aborted: list | None


class DataLoss(KafkaError):
    """Records of the range are no longer in the log (set failOnDataLoss=false to skip them)."""

    code = OffsetOutOfRange.code


class RangeFetcher:
    """Fetches one partition from its leader, falling back to the bootstrap brokers' metadata."""

    def __init__(self, topic: str, partition: int, leader: str, bootstrap: str, *, max_bytes: int,
                 fail_on_data_loss: bool = True, timeout: float = 120.0, read_committed: bool = True,
                 security: tuple = ()) -> None:
        self.security = ClientSecurity.from_options(**dict(security))
        self.read_committed = read_committed
        self.topic, self.partition = topic, partition
        self.leader = leader
        self.bootstrap = bootstrap
        self.max_bytes = max_bytes
        self.fail_on_data_loss = fail_on_data_loss
        self.timeout = timeout
        self._conn: BrokerConnection | None = None
        self._buffers = ReceiveBuffers()
        self._requests = FetchRequests("mmlog-spark", MAX_WAIT_MS, 1, int(read_committed))
        self._sent: list[int] = []  # correlation ids of the Fetches in flight on the connection
        self._failing_since: float | None = None
        self._backoff = 0.05

    def chunks(self, start: int, end: int) -> Iterator[RecordArrays]:
        """The records at offsets [start, end), one decoded chunk at a time, each cut at end."""
        for chunk in self.scanned(start, end):
            arrays = bulk.decode_chunk(chunk.data, chunk.offset, topic=self.topic, partition=self.partition,
                                       check_crcs=True, scan=chunk.scan, aborted=chunk.aborted)
            arrays.next_offset = min(chunk.scan.next_offset, end)
            keep = int(np.searchsorted(arrays.offsets, end))
            if keep:
                yield arrays if keep == len(arrays) else head(arrays, keep)

    def scanned(self, start: int, end: int) -> Iterator[Scanned]:
        """The chunks that hold offsets [start, end), each with its batch headers scanned, not decoded (the
        caller decodes, CRCs checked, and cuts at end)."""
        offset, size = start, self.max_bytes
        inflight = None  # the offset of the Fetch on the wire, if any
        try:
            while offset < end:
                try:
                    if inflight != offset:
                        self._send(offset, size)
                    inflight = None
                    part = self._receive()
                except (ConnectionClosed, RequestTimedOut) as exc:
                    inflight = None
                    self._recover(exc)
                    continue
                if part.error_code:
                    offset = self._on_error(part, offset, end)
                    continue
                data = part.records
                if not data:
                    offset = self._on_empty(part, offset, end)
                    continue
                scan = bulk.scan_chunk(data, offset)
                if scan.status == bulk.TRUNCATED:  # the first batch is bigger than we asked for
                    size = min(size * 2, 0x7FFFFFFF)
                    continue
                if scan.status != bulk.OK:
                    raise CorruptMessage(f"{self._where(offset)}: batch at byte {scan.end}: "
                                         f"{bulk.STATUS_TEXT[scan.status]}")
                self._failing_since, size = None, self.max_bytes
                if scan.next_offset < end:  # the next chunk is read by the broker while this one decodes
                    try:
                        self._send(scan.next_offset, size)
                        inflight = scan.next_offset
                    except ConnectionClosed:
                        self._close()  # the next turn reconnects
                yield Scanned(data, offset, scan, part.aborted_transactions if self.read_committed else None)
                offset = scan.next_offset
        finally:
            self._close()

    # ---- the wire

    def _send(self, offset: int, size: int) -> None:
        if self._conn is None:
            host, port = parse_bootstrap(self.leader)[0]
            self._conn = BrokerConnection(host, port, client_id="mmlog-spark", timeout=min(self.timeout, 30.0),
                                          connect_timeout=min(self.timeout, 10.0), security=self.security)
        body = self._requests.body([(self.topic, self.partition, offset, size)], size)
        correlation_id = self._conn.send(fetch.API_KEY, FETCH_VERSION, expect_response=False, body=body)
        self._sent.append(correlation_id)

    def _receive(self):
        expected = self._sent.pop(0)
        try:
            frame = self._buffers.read(self._conn.sock)
        except socket.timeout as exc:
            raise RequestTimedOut(f"{self._where(-1)}: no fetch answer from {self.leader}") from exc
        except OSError as exc:
            raise ConnectionClosed(f"{self._where(-1)}: {self.leader}: {exc}") from exc
        got, body = decode_response(fetch.API_KEY, FETCH_VERSION, frame)
        if got != expected:
            raise ConnectionClosed(f"{self._where(-1)}: correlation id {got}, expected {expected}")
        if body.error_code:
            raise error_for_code(body.error_code, f"{self._where(-1)}: fetch")
        [topic] = body.responses
        [part] = topic.partitions
        return part

    def _close(self) -> None:
        self._sent.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---- what goes wrong

    def _on_error(self, part, offset: int, end: int) -> int:
        """The offset to fetch after a partition error (the same one after a retriable error)."""
        code = part.error_code
        if code == OffsetOutOfRange.code:
            if part.log_start_offset > offset:  # retention removed [offset, log start)
                return self._lost(offset, min(part.log_start_offset, end), end)
            return self._lost(offset, end, end)  # the log ends before the range: it was truncated
        if code in REFRESH_CODES:  # the leader moved (or died): look it up again
            self._recover(error_for_code(code, self._where(offset)))
            return offset
        raise error_for_code(code, f"{self._where(offset)}: fetch")

    def _on_empty(self, part, offset: int, end: int) -> int:
        """No records at offset: the log ends before it (loss), or the data is not readable yet (retry)."""
        if 0 <= part.high_watermark <= offset:
            return self._lost(offset, end, end)
        if 0 <= part.log_start_offset and part.log_start_offset > offset:
            return self._lost(offset, min(part.log_start_offset, end), end)
        self._recover(RequestTimedOut(f"{self._where(offset)}: no records below the high watermark "
                                      f"{part.high_watermark}"))
        return offset

    def _lost(self, offset: int, resume: int, end: int) -> int:
        if self.fail_on_data_loss:
            raise DataLoss(f"{self._where(offset)}: offsets {offset}..{resume - 1} of the range up to {end} are "
                           f"no longer in the log (failOnDataLoss=false skips them)")
        return resume

    def _recover(self, exc: BaseException) -> None:
        """Back off, then ask the bootstrap brokers who leads the partition now; raise once past the timeout."""
        self._close()
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since, self._backoff = now, 0.05
        if now - self._failing_since > self.timeout:
            raise exc
        time.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, 1.0)
        try:
            cluster = Cluster(f"{self.leader},{self.bootstrap}", client_id="mmlog-spark",
                              timeout=min(self.timeout, 10.0), security=self.security)
            cluster.refresh([self.topic], allow_auto_create=False)
            self.leader = cluster.leader(self.topic, self.partition).address
        except KafkaError:
            pass  # still no leader: the next attempt tries the old address, and fails into here again

    def _where(self, offset: int) -> str:
        return f"{self.topic}-{self.partition}" + (f" at offset {offset}" if offset >= 0 else "")


def head(arrays: RecordArrays, n: int) -> RecordArrays:
    """The first n records of a chunk (views of its columns, no copy)."""
    columns = (arrays.offsets, arrays.timestamps, arrays.timestamp_types, arrays.key_starts, arrays.key_lengths,
               arrays.value_starts, arrays.value_lengths, arrays.header_starts, arrays.header_counts)
    return RecordArrays(arrays.topic, arrays.partition, arrays.buffer, arrays.next_offset,
                        [c[:n] for c in columns])

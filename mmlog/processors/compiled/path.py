"""The processor's side of the compiled request path: its buffers, its tables, and the handoffs.

`CompiledPath.poll` stands in for the processor's `Poller.select`: it runs the compiled loop
(loop.py), which serves FAST connections' Produce and consumers' Fetch requests itself, and
returns what Python must handle, in the Poller's (payload, READ|WRITE) form. A connection is FAST while the Python
side holds nothing of it (`update`, called wherever the processor updates a connection's
epoll events): a plaintext connection, nothing buffered, in flight or queued to send, not throttled
or starved, with no SASL exchange under way (an authenticated session is served until it expires)
and no request quota on its client, on a broker that is not stopping. With an authoriser, its ACL
decisions are entered in the partition table for the connection's principal (principals.py); with
client quotas, the connection carries those of its client id (`_quota_of`). Anything else is the Python
handlers', which stay the reference: `compiled.request.path.enable=false` turns the compiled
path off, and the differential tests compare the two.

A HANDOFF (loop.py) continues in Python with the bytes compiled code had read: the unsent
responses are queued first (bytes, and a Fetch answer's records as `FileSlice`s of a dup of
the log fd, taken before any Python code runs, so the ranges stay readable whatever the table
forgets), the unserved bytes go to the connection's framer, and the connection is handled in
this same pass. An acks=-1 Produce appended here whose answer waits for followers is answered by Python after
the responses before it (dispatch.answer_appended parks it in the purgatory as the Python handlers
park their own), and the bytes after it wait in the framer until it is answered.
The partitions a handed-off Produce or Fetch names are learned then: opened,
prepared and entered in the partition table, so their next request is compiled (for a Fetch,
only partitions led here: entering one takes its lock and readies it for writing). A partition whose
row met an idempotent producer's batch is entered with its producers' state (log/producer_table.py),
so that producer's next batches are compiled. The table
forgets a partition before its mappings close or move (log/partition_table.py), and is emptied
when the topic catalogue changes.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from mmlog.config.quotas import FETCH, PRODUCE, REQUEST
from mmlog.ipc.metrics_block import NULL_REGION, REGION_WORDS
from mmlog.log.partition_table import PartitionTable
from mmlog.log.segment import FileSlice
from mmlog.processors.compiled import fetch_path, loop, produce_path
from mmlog.processors.compiled.fetch_path import PLAN_FD
from mmlog.processors.compiled.principals import Principals
from mmlog.processors.connection import UNKNOWN
from mmlog.processors.dispatch import answer_appended
from mmlog.processors.poller import readiness
from mmlog.protocol import FrameSizeError
from mmlog.protocol import fetch_kernels as fk
from mmlog.protocol import produce_kernels as pk
from mmlog.security.acls import READ, WRITE
from mmlog.system import libc

log = logging.getLogger(__name__)

RECEIVE_BUFFER = 4 << 20  # bytes one call may read from its connections (a HANDOFF's stay until it returns)
SEND_BUFFER = 1 << 20
PLAN_ROWS = 8192  # file ranges one call may send (a Fetch answer's records, one a partition)
MAX_EVENTS = 1024
CARRY_SLOTS = 256  # connections that may each hold a frame's first part between reads (loop.py)


class CompiledPath:
    """One processor's compiled serving state."""

    def __init__(self, processor) -> None:
        self.processor = processor
        self.poller = processor.sel
        self.params = np.zeros(loop.PARAM_FIELDS, np.int64)
        self.params[loop.EPFD] = self.poller.fileno()
        self.params[loop.MAX_FRAME] = processor.config["socket.request.max.bytes"]
        self.params[loop.METRICS_ON] = int(processor.metrics is not NULL_REGION)
        self.events = np.zeros(MAX_EVENTS * libc.EPOLL_EVENT_SIZE, np.uint8)
        self.conns = np.zeros((1024, loop.CONN_FIELDS), np.int64)
        self.rbuf = np.zeros(RECEIVE_BUFFER, np.uint8)
        self.wbuf = np.zeros(SEND_BUFFER, np.uint8)
        self.plan = loop.make_plan(PLAN_ROWS)
        self.out = np.zeros((MAX_EVENTS, loop.OUT_FIELDS), np.int64)
        self.counters = np.zeros(loop.COUNTER_FIELDS, np.int64)
        self.carry = loop.make_carry(CARRY_SLOTS)
        self._taken = np.zeros(loop.CARRY_SIZE, np.uint8)  # a carry on its way to a connection's framer
        self.scratch = (produce_path.make_scratch(), fetch_path.make_scratch())
        self.table = PartitionTable()
        self.principals = Principals(processor.authorizer)
        board = processor.board
        words = processor.metrics.array if processor.metrics is not NULL_REGION else np.zeros(REGION_WORDS, np.int64)
        block = processor.quota_block
        quota = (produce_path.no_quota_block() if block is None else
                 (block.ids, block.values, np.array([block.window_ms, processor.slot], np.int64)))
        self.shared = (words, np.frombuffer(board.parked, np.int64), np.array(board.fds, np.int64),
                       np.array([processor.slot], np.int64), *quota)
        self.served = 0  # requests compiled code answered (a gauge for tests and tools)

    # ------------------------------------------------------------ the poll

    def poll(self, timeout: float) -> list:
        """What Python must handle, as Poller.select returns it; serves FAST connections meanwhile, for at most
        `timeout` seconds: the processor's `_poll_timeout`, by when one of its Python phases is due."""
        params = self.params
        params[loop.TIMEOUT_MS] = int(timeout * 1000 + 0.999)
        params[loop.PY_PARKED] = len(self.processor.purgatory)
        self.principals.refresh(self.table.rows)
        counters = self.counters
        counters[:] = 0
        n = loop.serve(params, self.events, self.conns, self.rbuf, self.wbuf, self.plan, self.out, counters,
                       self.carry, self.scratch, self.table.arrays(), self.shared)
        if n < 0:
            raise OSError(-n, "epoll_wait failed")
        self.served += int(counters[loop.REQUESTS])
        if counters[loop.APPENDED] and len(self.processor.purgatory):
            self.processor.purgatory.wake()
        ready = []
        payload = self.poller.payload
        rows = self.out[:n].tolist()
        files = self._hold_files(rows) if n and self.out[:n, loop.I_LEN].any() else None
        for kind, fd, mask, r_start, r_len, w_start, w_len, i_start, i_len, f_start, f_len, h_start, h_len in rows:
            conn = payload(fd)
            if conn is None:
                continue
            if kind == loop.EVENT:
                ready.append((conn, readiness(mask)))  # a connection's carry goes first when Python reads it
            else:
                self._handoff(conn, r_start, r_len, w_start, w_len, i_start, i_len, files)
                if f_len and self.processor.conns.get(conn.fd) is conn:
                    self._answer_held(conn, f_start, f_len, h_start, h_len)
                if r_len and self.processor.conns.get(conn.fd) is conn:
                    self._learn(conn, r_start, r_len)
                    self._feed(conn, memoryview(self.rbuf)[r_start:r_start + r_len])
        return ready

    def _hold_files(self, rows) -> dict[int, object]:
        """A file object of its own (a dup) for each log fd the handed-off plan rows send from, taken
        before any Python code can close the table's (a learned partition's new segments, an eviction)."""
        files = {}
        for kind, _, _, _, _, _, _, i_start, i_len, *_ in rows:
            if kind == loop.HANDOFF:
                for fd in self.plan[i_start:i_start + i_len, PLAN_FD].tolist():
                    if fd not in files:
                        try:
                            files[fd] = os.fdopen(os.dup(fd), "rb", buffering=0)
                        except OSError as exc:  # EMFILE: that connection is closed (its answer cannot go)
                            log.warning("cannot hold a log descriptor for a fetch answer: %s", exc)
                            files[fd] = None
        return files

    def woken(self) -> None:
        """Records may have come (another processor's wake, an append here in Python): the next call looks at
        every parked fetch again."""
        self.params[loop.RECHECK] = 1

    @property
    def parked(self) -> int:
        """Long polls compiled code keeps (the wake board counts them with the purgatory's)."""
        return int(self.params[loop.PARKED])

    def take_carry(self, conn) -> bool:
        """Give conn's framer the part of a frame compiled code kept for it, if any (before Python reads its
        socket: the bytes stay in order); False if conn was closed."""
        n = loop.take_carry(self.conns, conn.fd, self.carry, self._taken, self.params, self.shared)
        return not n or self._feed(conn, memoryview(self._taken)[:n])

    def _feed(self, conn, data) -> bool:
        """Bytes compiled code read, to conn's framer (kept, past its memory budget if need be: the
        connection is then starved, not read from until the pool has room); False if they cannot be
        framed (conn is closed)."""
        try:
            conn.reader.keep(data)
        except FrameSizeError as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
            self.processor.close_connection(conn)
            return False
        conn.stamp(time.monotonic())
        self.processor.ready(conn)
        if conn.reader.starved:
            self.processor.starve(conn)
        return True

    def _handoff(self, conn, r_start: int, r_len: int, w_start: int, w_len: int, i_start: int, i_len: int,
                 files) -> None:
        """Carry on in Python from where compiled code stopped on conn: its unsent answers first (the
        caller then answers a held request and feeds the unserved bytes to the framer)."""
        self.conns[conn.fd, loop.FAST] = 0
        processor = self.processor
        if w_len or i_len:
            if any(files[fd] is None for fd in self.plan[i_start:i_start + i_len, PLAN_FD].tolist()):
                log.warning("closing connection from %s: no descriptor left for its fetch answer", conn.peer)
                processor.close_connection(conn)
                return
            conn.out.push(unsent(self.wbuf, self.plan, w_start, w_start + w_len, i_start, i_len, files))
            processor.wants_write(conn)

    def _answer_held(self, conn, f_start: int, f_len: int, h_start: int, h_len: int) -> None:
        """Answer acks=-1 Produce requests compiled code appended whose answers wait for followers: their
        frames read for the requests' names (their records are in the log already), the results from the
        held rows, parked in the purgatory as the Python handlers park their own (dispatch.answer_appended)."""
        frame = memoryview(self.rbuf)[f_start:f_start + f_len]
        held = self.scratch[0][produce_path.HELD_ROWS_AT][h_start:h_start + h_len].tolist()
        answer_appended(self.processor, conn, frame, held, self.last_active(conn))

    def _learn(self, conn, r_start: int, r_len: int) -> None:
        """Enter the partitions a handed-off Produce names, or a consumer's Fetch of partitions led here,
        in the table (its next request is compiled), unless they are there already as of their current
        segments; with an authoriser, with its decision for conn's principal."""
        rbuf = self.rbuf
        if r_len < 4 or int.from_bytes(rbuf[r_start:r_start + 4], "big") > r_len - 4:
            return
        start, end = r_start + 4, r_start + r_len
        api, _ = pk.peek_api(rbuf, start, end)
        conn.client_id = request_client_id(rbuf, start, end, conn.client_id)
        if api == produce_path.API_KEY:
            header, parts = self.scratch[0][0], self.scratch[0][1]
            n = pk.decode_produce(rbuf, start, end, header, parts)
            columns, operation = [pk.NAME_START, pk.NAME_LEN, pk.PARTITION], WRITE
        elif api == fetch_path.API_KEY:
            header, parts = self.scratch[1][0], self.scratch[1][1]
            n = fk.decode_fetch(rbuf, start, end, header, parts)
            if n > 0 and header[fk.REPLICA_ID] >= 0:
                return  # a follower's: Python's
            columns, operation = [fk.NAME_START, fk.NAME_LEN, fk.PARTITION], READ
        else:
            return
        manager = self.processor.manager
        for name_start, length, index in parts[:max(n, 0), columns].tolist():
            name = bytes(rbuf[name_start:name_start + length]).decode()
            try:
                part = manager.partition(name, index)
                if api == fetch_path.API_KEY and not part.state.serves_clients():
                    continue  # a follower's partition: not ours to take for writing
                row = self.table.ensure(name, index, part)
                if self.principals.authorizer.enabled:
                    self.principals.learn(conn, self.table.rows, row, operation, name)
            except Exception as exc:  # noqa: BLE001 - unknown, offline, not ours: the Python handler answers it
                log.debug("partition %s-%d not entered in the compiled table: %s", name, index, exc)

    # ------------------------------------------------------------ connections

    def update(self, conn, eligible: bool) -> None:
        """Mark conn FAST (compiled code serves it) or not."""
        fd = conn.fd
        who = self.principals.bit(conn) if eligible else 0
        quota = self._quota_of(conn) if eligible else None
        if who is None or quota is None:
            eligible = False  # every principal bit is taken, or a request quota applies: Python decides
        if not eligible and not self.take_carry(conn):
            return
        if fd >= self.conns.shape[0]:
            if not eligible:
                return
            grown = np.zeros((max(fd + 1, 2 * self.conns.shape[0]), loop.CONN_FIELDS), np.int64)
            grown[:self.conns.shape[0]] = self.conns
            self.conns = grown
        self.conns[fd, loop.FAST] = int(eligible)
        if eligible:
            row = self.conns[fd]
            row[loop.WHO] = who
            expires = conn.sasl.expires_at if conn.sasl is not None else None
            row[loop.SESSION_END_US] = int(expires * 1e6) if expires is not None else 0
            row[loop.CLIENT_HASH], row[loop.PRODUCE_SLOT], row[loop.PRODUCE_LIMIT], row[loop.FETCH_LIMITED] = quota

    def _quota_of(self, conn) -> tuple | None:
        """conn's client quotas as compiled code applies them (loop.py's CLIENT_HASH .. FETCH_LIMITED), or None
        where a request-time quota applies (its throttle depends on the time Python's handlers take)."""
        quotas = self.processor.quotas
        if not quotas.enabled:
            return loop.ANY_CLIENT, -1, 0, 0
        client_id = conn.client_id
        if client_id is UNKNOWN:
            return loop.UNKNOWN_CLIENT, -1, 0, 0  # its first Produce or Fetch is Python's, which tells the client id
        if quotas.sensor(REQUEST, conn, client_id) is not None:
            return None
        produce = quotas.sensor(PRODUCE, conn, client_id)
        slot, limit = (-1, 0) if produce is None else (produce[1], int(produce[0] * 1000))
        return loop.client_hash(client_id), slot, limit, int(quotas.sensor(FETCH, conn, client_id) is not None)

    def closed(self, conn) -> None:
        self.principals.release(conn, self.table.rows)
        if conn.fd < self.conns.shape[0]:
            loop.take_carry(self.conns, conn.fd, self.carry, self._taken, self.params, self.shared)  # its slot back to the pool
            self.conns[conn.fd] = 0

    def holds(self, conn) -> bool:
        """Whether compiled code keeps a parked fetch of conn's (a request in hand: not idle)."""
        fd = conn.fd
        return fd < self.conns.shape[0] and self.conns[fd, loop.PARKED_UNTIL_US] != 0

    def last_active(self, conn) -> float:
        """When compiled code last read from conn (monotonic s; 0: never)."""
        fd = conn.fd
        return self.conns[fd, loop.LAST_ACTIVE_US] / 1e6 if fd < self.conns.shape[0] else 0.0

    def catalogue_changed(self) -> None:
        """Topic configs, topics or assignments changed: every row is filled again on its next handoff."""
        self.table.clear()


def request_client_id(buf, start: int, end: int, otherwise):
    """The client id of the request header in buf[start:end] (None: null), or `otherwise` if it does not parse."""
    if end - start < 10:
        return otherwise
    n = int.from_bytes(buf[start + 8:start + 10], "big", signed=True)
    if n < 0:
        return None
    try:
        return bytes(buf[start + 10:start + 10 + n]).decode() if start + 10 + n <= end else otherwise
    except UnicodeDecodeError:
        return otherwise


def unsent(wbuf, plan, at: int, end: int, i_start: int, i_len: int, files) -> list:
    """The send queue parts of wbuf[at:end] with plan rows i_start.. (their file ranges, in `files` by fd)
    at their gaps, in order: what a HANDOFF leaves to the connection's OutQueue."""
    parts = []
    for gap, fd, offset, length in plan[i_start:i_start + i_len].tolist():
        parts.append(bytes(wbuf[at:gap]))
        parts.append(FileSlice(files[fd], offset, length))
        at = gap
    parts.append(bytes(wbuf[at:end]))
    return parts

"""The compiled processor loop: epoll_wait, recv, the request, send, with no interpreter in between.

`serve` is called by the processor's Python loop in place of its poll (path.py). It waits on the
processor's own epoll set and, for each ready connection the Python side marked FAST (idle:
nothing buffered, nothing queued to send, nothing in flight), reads what the socket has into the
processor's receive buffer, cuts the frames, serves those the compiled path covers
(`produce_path.serve_frame`), and sends their responses with one send. It returns to Python as
soon as anything needs it, and at the latest when `timeout_ms` has passed (the Python loop's
timers, heartbeats and catalogue checks run between calls).

What goes back to Python, one row of `out` each (OUT_FIELDS columns):
  EVENT    an fd the compiled path does not serve (the handoff socket, the control channel,
           a connection that is not FAST, a FAST one that hung up or failed): its epoll mask,
           exactly what the Python poll would have reported;
  HANDOFF  a FAST connection in the middle of its bytes: the frames from R_START on (the first
           one the compiled path does not cover, or a frame not yet whole) and the responses
           from W_START on that the socket did not take. Python queues the responses first and
           feeds the bytes to the connection's framer, so the Python handlers carry on from
           exactly where compiled code stopped, in order.

Memory: the request memory pool (`queued.max.request.bytes`) bounds what connections hold between
reads; compiled code holds nothing of a connection between calls but a carry, and reads at most
MAX_READ bytes of one connection a call, so a frame handed over mid-way brings at most that much
past the connection's budget (its framer keeps it and waits for the pool, as a starved reader).

Buffers: a HANDOFF's bytes stay where they are in `rbuf` and `wbuf` until the call returns (the
next connection's recv goes after them), so one call serves many connections without copying
any; a call whose buffers run low leaves the remaining connections to Python as EVENTs.

A frame not yet whole at the end of a read (a pipelining producer's next request, cut by TCP)
is kept in a *carry* slot of its own (CARRY_SIZE bytes, from a pool: `carry` is (arena, free
slots)) rather than handed over: the next read of that connection starts with it. A frame too
big for a slot, or no free slot, is a HANDOFF. Whoever takes a connection back to Python takes
its carry first (path.py), so no byte is ever read out of order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.ipc.metrics_block import SCALAR, record_request
from mmlog.processors.compiled import produce_path
from mmlog.protocol.wire_kernels import be_i32
from mmlog.system import libc

# conns: int64 [fd capacity, CONN_FIELDS], indexed by fd
FAST, LAST_ACTIVE_US, SERVED, CARRY, CARRY_LEN = range(5)  # CARRY: its carry slot + 1 (0: none)
CONN_FIELDS = 5
# out: int64 [rows, OUT_FIELDS]
KIND, FD, MASK, R_START, R_LEN, W_START, W_LEN = range(7)
OUT_FIELDS = 7
EVENT, HANDOFF = 0, 1
# params: int64 [PARAM_FIELDS]
EPFD, TIMEOUT_MS, MAX_FRAME, METRICS_ON, WAKE_LOCAL = range(5)
PARAM_FIELDS = 5
# counters: int64 [COUNTER_FIELDS], what a call did (Python adds them to its own books)
APPENDED, REQUESTS, HANDOFFS, BYTES_IN, MESSAGES_IN = range(5)
COUNTER_FIELDS = 5

CARRY_SIZE = 64 * 1024  # the largest part of a frame kept between reads
MIN_ROOM = 2 * CARRY_SIZE  # receive-buffer room a connection needs to be read here rather than by Python
MAX_READ = 256 * 1024  # one recv's most: what a handed-off frame may hold beyond the request memory pool
MIN_WROOM = 16 * 1024  # response-buffer room likewise (a one-partition Produce answer is < 200 bytes)
_COMPILED = SCALAR["requests_compiled"]
_RECV_FLAGS = libc.MSG_DONTWAIT
_SEND_FLAGS = libc.MSG_DONTWAIT | libc.MSG_NOSIGNAL


@njit(cache=True, nogil=True)
def _event_at(events, i):
    """(mask, fd) of the i-th struct epoll_event (packed: uint32 events, then the data word whose low
    32 bits are the fd, as Python's select.epoll registers it), little-endian."""
    p = i * libc.EPOLL_EVENT_SIZE
    mask = np.int64(events[p]) | (np.int64(events[p + 1]) << 8) | (np.int64(events[p + 2]) << 16) | (
        np.int64(events[p + 3]) << 24)
    fd = np.int64(events[p + 4]) | (np.int64(events[p + 5]) << 8) | (np.int64(events[p + 6]) << 16) | (
        np.int64(events[p + 7]) << 24)
    return mask, fd


@njit(cache=True, nogil=True)
def _emit(out, n_out, kind, fd, mask, r_start, r_len, w_start, w_len):
    row = out[n_out]
    row[KIND] = kind
    row[FD] = fd
    row[MASK] = mask
    row[R_START] = r_start
    row[R_LEN] = r_len
    row[W_START] = w_start
    row[W_LEN] = w_len
    return n_out + 1


@njit(cache=True, nogil=True)
def serve(params, events, conns, rbuf, wbuf, out, counters, carry, scratch, table, shared):
    """Serve FAST connections until Python is needed or params[TIMEOUT_MS] passes; the rows of `out` used.

    A negative return is -errno of a failed epoll_wait (EINTR returns what was gathered: a signal
    is Python's to handle). `scratch`, `table`, `shared`: see produce_path.serve_frame."""
    deadline = libc.monotonic() + params[TIMEOUT_MS] / 1000.0
    max_events = events.shape[0] // libc.EPOLL_EVENT_SIZE
    max_out = out.shape[0]
    n_out = 0
    rpos = 0
    wpos = 0
    while True:
        left_ms = np.int64((deadline - libc.monotonic()) * 1000.0 + 0.999)
        n = libc.epoll_wait(np.int32(params[EPFD]), events.ctypes.data, np.int32(max_events),
                            np.int32(max(left_ms, 0)))
        if n < 0:
            err = libc.errno()
            return n_out if err == libc.EINTR else -err
        for i in range(n):
            mask, fd = _event_at(events, i)
            fast = fd < conns.shape[0] and conns[fd, FAST] != 0 and mask == libc.EPOLLIN
            if (not fast or rbuf.shape[0] - rpos < MIN_ROOM or wbuf.shape[0] - wpos < MIN_WROOM
                    or max_out - n_out < 1):
                n_out = _emit(out, n_out, EVENT, fd, mask, 0, 0, 0, 0)
                continue
            rpos, wpos, n_out = _serve_connection(fd, mask, params, conns, rbuf, rpos, wbuf, wpos, out, n_out,
                                                  counters, carry, scratch, table, shared)
        if n_out or n == 0 or libc.monotonic() >= deadline:
            return n_out
        if counters[APPENDED] and params[WAKE_LOCAL]:
            return n_out  # this processor has parked fetches: Python's purgatory looks at them now


@njit(cache=True, nogil=True)
def _serve_connection(fd, mask, params, conns, rbuf, rpos, wbuf, wpos, out, n_out, counters, carry, scratch,
                      table, shared):
    """Read one FAST connection and serve its whole frames; (rpos, wpos, n_out) after it."""
    start = rpos
    kept = conns[fd, CARRY_LEN] if conns[fd, CARRY] else 0
    if kept:  # the frame the last read ended in: it goes first
        at = (conns[fd, CARRY] - 1) * CARRY_SIZE
        rbuf[start:start + kept] = carry[0][at:at + kept]
    r = libc.recv(np.int32(fd), rbuf.ctypes.data + start + kept, min(rbuf.shape[0] - start - kept, MAX_READ),
                  _RECV_FLAGS)
    if r <= 0:
        if r < 0 and libc.errno() == libc.EAGAIN:
            return rpos, wpos, n_out  # a spurious wake-up: nothing to read after all (the carry stays)
        return rpos, wpos, _emit(out, n_out, EVENT, fd, mask, 0, 0, 0, 0)  # EOF or error: Python takes it all
    if kept:
        _free_carry(conns, fd, carry)
    received = libc.monotonic()
    conns[fd, LAST_ACTIVE_US] = np.int64(received * 1e6)
    end = start + kept + r
    p = start
    w_start = wpos
    served = 0
    partial = False
    max_frame = params[MAX_FRAME]
    while end - p >= 4:
        size = be_i32(rbuf, p)
        if size < 0 or size > max_frame:
            break  # Python's framer says what is wrong
        if end - p - 4 < size:
            partial = True
            break
        w = produce_path.serve_frame(rbuf, p + 4, p + 4 + size, wbuf, wpos, counters, scratch, table, shared)
        if w < 0:
            break
        wpos = w
        p += 4 + size
        served += 1
    handled = libc.monotonic()
    sent = wpos
    if wpos > w_start:
        s = libc.send(np.int32(fd), wbuf.ctypes.data + w_start, wpos - w_start, _SEND_FLAGS)
        sent = w_start + max(s, 0)  # a failed send: Python's flush meets the error and closes
    if served:
        conns[fd, SERVED] += served
        counters[REQUESTS] += served
        if params[METRICS_ON]:
            shared[0][_COMPILED] += served
            record_request(shared[0], produce_path.API_KEY, served, received, received, handled, handled,
                           libc.monotonic())
    if (partial or end - p < 4) and p < end and sent == wpos and _keep_carry(conns, fd, carry, rbuf, p, end):
        p = end
    if p < end or sent < wpos:
        counters[HANDOFFS] += 1
        return end, wpos, _emit(out, n_out, HANDOFF, fd, mask, p, end - p, sent, wpos - sent)
    return start, w_start, n_out  # everything served and sent: the buffers' room is free again


@njit(cache=True, nogil=True)
def _keep_carry(conns, fd, carry, rbuf, p, end):
    """Keep rbuf[p:end], the start of a frame, in a free carry slot for fd; False if too big or none is free."""
    arena, free = carry
    n = end - p
    if n > CARRY_SIZE or free[0] == 0:
        return False
    free[0] -= 1
    slot = free[1 + free[0]]
    at = slot * CARRY_SIZE
    arena[at:at + n] = rbuf[p:end]
    conns[fd, CARRY] = slot + 1
    conns[fd, CARRY_LEN] = n
    return True


@njit(cache=True, nogil=True)
def _free_carry(conns, fd, carry):
    free = carry[1]
    free[1 + free[0]] = conns[fd, CARRY] - 1
    free[0] += 1
    conns[fd, CARRY] = 0
    conns[fd, CARRY_LEN] = 0


def make_carry(slots: int) -> tuple:
    """A pool of `slots` carry slots, all free."""
    free = np.zeros(slots + 1, np.int64)
    free[0] = slots
    free[1:] = np.arange(slots)
    return np.zeros(slots * CARRY_SIZE, np.uint8), free


@njit(cache=True, nogil=True)
def take_carry(conns, fd, carry, into):
    """Copy fd's carry into `into` and free its slot; the bytes copied (0: none). Python's way to take it."""
    if fd >= conns.shape[0] or conns[fd, CARRY] == 0:
        return 0
    n = conns[fd, CARRY_LEN]
    at = (conns[fd, CARRY] - 1) * CARRY_SIZE
    into[:n] = carry[0][at:at + n]
    _free_carry(conns, fd, carry)
    return n


def warm() -> None:
    """Compile the loop and everything it calls (or load them from the cache) before any fork: one call
    that waits on an empty epoll set for 0 ms, with arrays of the types a processor passes."""
    import select

    from mmlog.ipc.metrics_block import REGION_WORDS
    from mmlog.log.partition_table import PartitionTable

    epoll = select.epoll()
    try:
        params = np.zeros(PARAM_FIELDS, np.int64)
        params[EPFD] = epoll.fileno()
        one = np.zeros(1, np.int64)
        serve(params, np.zeros(4 * libc.EPOLL_EVENT_SIZE, np.uint8), np.zeros((4, CONN_FIELDS), np.int64),
              np.zeros(MIN_ROOM * 2, np.uint8), np.zeros(MIN_WROOM * 2, np.uint8), np.zeros((4, OUT_FIELDS), np.int64),
              np.zeros(COUNTER_FIELDS, np.int64), make_carry(1), produce_path.make_scratch(), PartitionTable().arrays(),
              (np.zeros(REGION_WORDS, np.int64), one, one.copy(), one.copy()))
    finally:
        epoll.close()
    take_carry(np.zeros((4, CONN_FIELDS), np.int64), 0, make_carry(1), np.zeros(16, np.uint8))

"""The compiled processor loop: epoll_wait, recv, the request, send, with no interpreter in between.

`serve` is called by the processor's Python loop in place of its poll (path.py). It waits on the
processor's own epoll set and, for each ready connection the Python side marked FAST (idle:
nothing buffered, nothing queued to send, nothing in flight), reads what the socket has into the
processor's receive buffer, cuts the frames, serves those the compiled path covers (Produce:
`produce_path.serve_frame`; a consumer's Fetch: `fetch_path.serve_fetch`), and sends their
responses. It returns to Python as soon as anything needs it, and at the latest when `timeout_ms`
has passed (the Python loop's timers, heartbeats and catalogue checks run between calls).

What goes back to Python, one row of `out` each (OUT_FIELDS columns):
  EVENT    an fd the compiled path does not serve (the handoff socket, the control channel,
           a connection that is not FAST, a FAST one that hung up or failed): its epoll mask,
           exactly what the Python poll would have reported;
  HANDOFF  a FAST connection in the middle of its bytes: the frames from R_START on (the first
           one the compiled path does not cover, or a frame not yet whole) and the responses
           from W_START on that the socket did not take, with the plan rows I_START.. of their
           file ranges (below). Python queues the responses first and feeds the bytes to the
           connection's framer, so the Python handlers carry on from exactly where compiled code
           stopped, in order. A HANDOFF after acks=-1 Produce requests that compiled code appended
           but whose answers wait for followers (produce_path.HELD: the first, and every one after
           it in the read) also names their frames, F_START.. (size prefixes included), and their
           partitions' held rows, H_START..: Python answers them (path.py), then the rest.

Sending. A connection's responses are wbuf[w_start:wpos] with file ranges put in: a Fetch answer's
records, which its encoder leaves gaps for. Each is a row of the call's `plan` (fetch_path.PLAN_FIELDS:
the wbuf position of its gap, the log fd, the file offset, the length), in order. The loop sends
bytes with send (MSG_MORE when a file range follows, so headers and records leave in full TCP
segments) and file ranges with sendfile, until all is sent or the socket takes no more; the rest is
the HANDOFF's: W_START is the first byte not sent, the first plan row's offset and length are
advanced past what of it was sent. The log fd is the table row's, open until Python forgets the
row: path.py dups it for a handed-off range before running any Python code.

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

Parked fetches. A consumer's Fetch that finds fewer than min_bytes (fetch_path.PARK), as the last
whole frame of its read with every answer before it sent, is kept in a carry slot too, with when it
waits until (PARKED_UNTIL_US): nothing more is read of that connection by anyone until it is answered
or handed on. It is counted on the wake board (the processor's count: the purgatory's and these) and
then looked at once more, so an append elsewhere either wakes this processor or is seen. `serve` serves
the parked ones again after any append here, when another processor's append wakes this one (its
wake-board eventfd, read here: Python hears of it only if its purgatory holds fetches too) and when Python
says records came (RECHECK), answering those with enough, and each at its deadline with what there is;
epoll_wait waits no longer than the nearest deadline. New bytes on a parked connection read it afresh (the
fetch first: with frames behind it, it is Python's to park); Python taking a connection back takes the fetch
with its carry (`take_carry`).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from mmlog.ipc.memory_fence import full_fence
from mmlog.ipc.metrics_block import SCALAR, record_request
from mmlog.log.partition_table import key_hash
from mmlog.processors.compiled import fetch_path, produce_path
from mmlog.processors.compiled.fetch_path import (
    GAP,
    PARK,
    PLAN_FD,
    PLAN_LEN,
    PLAN_OFFSET,
)
from mmlog.protocol import fetch_kernels as fk
from mmlog.protocol.produce_kernels import peek_api
from mmlog.protocol.wire_kernels import be_i16, be_i32
from mmlog.system import libc
from mmlog.system.cpu import load_u64
from mmlog.system.unowned import unowned

# conns: int64 [fd capacity, CONN_FIELDS], indexed by fd
(FAST, LAST_ACTIVE_US, SERVED, CARRY, CARRY_LEN, WHO, SESSION_END_US, CLIENT_HASH, PRODUCE_SLOT, PRODUCE_LIMIT,
 FETCH_LIMITED, PARKED_UNTIL_US, PARKED_AT_US) = range(13)  # CARRY: its carry slot + 1 (0: none)
CONN_FIELDS = 13
# WHO: the connection's principal bit in the partition table's ACL decisions (0: no authoriser); SESSION_END_US:
# when its SASL session expires (monotonic µs; 0: never), from when its requests are Python's (which closes it).
# Client quotas (quotas.py decides them for a (user, client id)): CLIENT_HASH, the client id they were decided
# for (a request naming another is Python's; ANY_CLIENT: no quotas at all, UNKNOWN_CLIENT: not decided yet);
# PRODUCE_SLOT, PRODUCE_LIMIT: its produce quota's sensor in the shared quota block and its bytes/s x 1000 (slot
# -1: none); FETCH_LIMITED: a fetch quota applies (its Fetch requests are Python's).
# PARKED_UNTIL_US (0: not parked), PARKED_AT_US: a long poll kept in the connection's carry, until when it
# waits and when it was received (monotonic µs).
ANY_CLIENT, UNKNOWN_CLIENT = -2, -1
# out: int64 [rows, OUT_FIELDS]
KIND, FD, MASK, R_START, R_LEN, W_START, W_LEN, I_START, I_LEN, F_START, F_LEN, H_START, H_LEN = range(13)
OUT_FIELDS = 13
EVENT, HANDOFF = 0, 1
# params: int64 [PARAM_FIELDS]
EPFD, TIMEOUT_MS, MAX_FRAME, METRICS_ON, PARKED, PY_PARKED, RECHECK = range(7)
PARAM_FIELDS = 7
# PARKED: the long polls compiled code keeps (across calls); PY_PARKED: the Python purgatory's, which Python
# sets before each call (their sum is the processor's count on the wake board); RECHECK: Python saw records
# come (a wake from another processor, an append of its own): look at every parked fetch again.
# counters: int64 [COUNTER_FIELDS], what a call did (Python adds them to its own books)
APPENDED, REQUESTS, HANDOFFS, BYTES_IN, MESSAGES_IN = range(5)
COUNTER_FIELDS = 5

CARRY_SIZE = 64 * 1024  # the largest part of a frame kept between reads
MIN_ROOM = 2 * CARRY_SIZE  # receive-buffer room a connection needs to be read here rather than by Python
MAX_READ = 256 * 1024  # one recv's most: what a handed-off frame may hold beyond the request memory pool
MIN_WROOM = 16 * 1024  # response-buffer room likewise (a one-partition Produce answer is < 200 bytes)
MIN_PLAN = 64  # plan rows likewise (a serve that needs more than are left hands its frame to Python)
_COMPILED = SCALAR["requests_compiled"]
_RECV_FLAGS = libc.MSG_DONTWAIT
_SEND_FLAGS = libc.MSG_DONTWAIT | libc.MSG_NOSIGNAL
_MORE_FLAGS = _SEND_FLAGS | libc.MSG_MORE


@njit(cache=True, nogil=True)
def _event_at(events, i):
    """(mask, fd) of the i-th struct epoll_event (packed: uint32 events, then the data word whose low
    32 bits are the fd, as Python's select.epoll registers it): one little-endian 8-byte load."""
    word = load_u64(events, i * libc.EPOLL_EVENT_SIZE)
    mask = np.int64(word & np.uint64(0xFFFFFFFF))
    fd = np.int64(word >> np.uint64(32))
    return mask, fd


@njit(cache=True, nogil=True)
def _emit(out, n_out, kind, fd, mask, r_start, r_len, w_start, w_len, i_start=0, i_len=0, f_start=0, f_len=0,
          h_start=0, h_len=0):
    row = out[n_out]
    row[KIND] = kind
    row[FD] = fd
    row[MASK] = mask
    row[R_START] = r_start
    row[R_LEN] = r_len
    row[W_START] = w_start
    row[W_LEN] = w_len
    row[I_START] = i_start
    row[I_LEN] = i_len
    row[F_START] = f_start
    row[F_LEN] = f_len
    row[H_START] = h_start
    row[H_LEN] = h_len
    return n_out + 1


@njit(cache=True, nogil=True)
def serve(params, events, conns, rbuf, wbuf, plan, out, counters, carry, scratch, table, shared):
    """Serve FAST connections until Python is needed or params[TIMEOUT_MS] passes; the rows of `out` used.

    A negative return is -errno of a failed epoll_wait (EINTR returns what was gathered: a signal
    is Python's to handle). `scratch`: (Produce's, Fetch's), see produce_path.serve_frame and
    fetch_path.serve_fetch, as are `table` and `shared`. Parked fetches are looked at again when
    records may have come (an append here, params[RECHECK]) and when their wait is over."""
    # The Python loop holds every one of these for the whole call: compiled code passes on views that take
    # no references (system/unowned.py), not some 280 atomic reference count updates a request.
    params, events, conns, rbuf, wbuf, plan, out, counters, carry, scratch, table, shared = unowned(
        (params, events, conns, rbuf, wbuf, plan, out, counters, carry, scratch, table, shared))
    deadline = libc.monotonic() + params[TIMEOUT_MS] / 1000.0
    max_events = events.shape[0] // libc.EPOLL_EVENT_SIZE
    max_out = out.shape[0]
    n_out = 0
    rpos = 0
    wpos = 0
    n_plan = 0
    held_count = scratch[0][produce_path.HELD_COUNT]
    wake_fd = shared[2][shared[3][0]]  # this processor's wake-board eventfd
    held_count[0] = 0  # the held rows of the last call were Python's by the time it called again
    recheck = params[RECHECK] != 0
    params[RECHECK] = 0
    due = np.int64(0)  # when the next parked fetch's wait is over (monotonic µs)
    appended = 0
    leave = False
    while True:
        if params[PARKED] and (recheck or libc.monotonic() * 1e6 >= due):
            rpos, wpos, n_plan, n_out, due = _serve_parked(recheck, params, conns, rbuf, rpos, wbuf, wpos, plan,
                                                           n_plan, out, n_out, counters, carry, scratch, table,
                                                           shared)
            recheck = False
        if leave or n_out or libc.monotonic() >= deadline:
            return n_out
        until = min(deadline, due / 1e6) if params[PARKED] else deadline
        left_ms = np.int64((until - libc.monotonic()) * 1000.0 + 0.999)
        n = libc.epoll_wait(np.int32(params[EPFD]), events.ctypes.data, np.int32(max_events),
                            np.int32(max(left_ms, 0)))
        if n < 0:
            err = libc.errno()
            return n_out if err == libc.EINTR else -err
        for i in range(n):
            mask, fd = _event_at(events, i)
            if fd == wake_fd and mask == libc.EPOLLIN and (not params[PY_PARKED] or max_out - n_out > 0):
                _drain(fd)  # another processor appended: the fetches parked here look at once, not after a
                recheck = True  # Python turn
                if params[PY_PARKED]:
                    n_out = _emit(out, n_out, EVENT, fd, mask, 0, 0, 0, 0)  # and the Python purgatory's look too
                continue
            fast = (fd < conns.shape[0] and conns[fd, FAST] != 0 and mask == libc.EPOLLIN
                    and (conns[fd, SESSION_END_US] == 0 or libc.monotonic() * 1e6 < conns[fd, SESSION_END_US]))
            if (not fast or rbuf.shape[0] - rpos < MIN_ROOM or wbuf.shape[0] - wpos < MIN_WROOM
                    or plan.shape[0] - n_plan < MIN_PLAN or max_out - n_out < 1):
                n_out = _emit(out, n_out, EVENT, fd, mask, 0, 0, 0, 0)
                continue
            rpos, wpos, n_plan, n_out = _serve_connection(fd, mask, params, conns, rbuf, rpos, wbuf, wpos, plan,
                                                          n_plan, out, n_out, counters, carry, scratch, table,
                                                          shared)
        if counters[APPENDED] != appended:
            appended = counters[APPENDED]
            recheck = True  # records came: the parked fetches look again before anything else
            leave = params[PY_PARKED] != 0  # and the Python purgatory's, which it looks at now
        if n == 0 and not params[PARKED]:
            leave = True


@njit(cache=True, nogil=True)
def _serve_connection(fd, mask, params, conns, rbuf, rpos, wbuf, wpos, plan, n_plan, out, n_out, counters, carry,
                      scratch, table, shared):
    """Read one FAST connection, serve its whole frames and send the answers; (rpos, wpos, n_plan, n_out)
    after it."""
    start = rpos
    kept = conns[fd, CARRY_LEN] if conns[fd, CARRY] else 0
    if kept:  # the frame the last read ended in: it goes first
        at = (conns[fd, CARRY] - 1) * CARRY_SIZE
        rbuf[start:start + kept] = carry[0][at:at + kept]
    r = libc.recv(np.int32(fd), rbuf.ctypes.data + start + kept, min(rbuf.shape[0] - start - kept, MAX_READ),
                  _RECV_FLAGS)
    if r <= 0:
        if r < 0 and libc.errno() == libc.EAGAIN:
            return rpos, wpos, n_plan, n_out  # a spurious wake-up: nothing to read after all (the carry stays)
        return rpos, wpos, n_plan, _emit(out, n_out, EVENT, fd, mask, 0, 0, 0, 0)  # EOF or error: Python takes it all
    if kept:
        _free_carry(conns, fd, carry)
        if conns[fd, PARKED_UNTIL_US]:
            _unparked(params, conns, fd, shared)  # the parked fetch is read again, with what came after it
    received = libc.monotonic()
    conns[fd, LAST_ACTIVE_US] = np.int64(received * 1e6)
    end = start + kept + r
    p = start
    w_start = wpos
    p_start = n_plan
    produced = 0
    fetched = 0
    partial = False
    held_at = held = 0  # requests appended whose answers wait (produce_path.HELD): the first's start, how many
    park_at = -1  # a long poll to keep (fetch_path.PARK): its frame's start
    h_start = scratch[0][produce_path.HELD_COUNT][0]
    max_frame = params[MAX_FRAME]
    who = conns[fd, WHO]
    client = conns[fd, CLIENT_HASH]
    produce_scratch, fetch_scratch = scratch
    while end - p >= 4:
        size = be_i32(rbuf, p)
        if size < 0 or size > max_frame:
            break  # Python's framer says what is wrong
        if end - p - 4 < size:
            partial = True
            break
        api, _ = peek_api(rbuf, p + 4, p + 4 + size)
        if client != ANY_CLIENT and client != _client_hash(rbuf, p + 4, p + 4 + size):
            api = -1  # quotas were decided for another client id (or none yet): Python's
        elif api == fetch_path.API_KEY and (conns[fd, FETCH_LIMITED] or held):
            api = -1  # a fetch quota's, or behind a held answer: Python's
        if api == produce_path.API_KEY:
            w = produce_path.serve_frame(rbuf, p + 4, p + 4 + size, wbuf, wpos, counters, produce_scratch, table,
                                         shared, who, conns[fd, PRODUCE_SLOT], conns[fd, PRODUCE_LIMIT], held > 0)
            produced += 1
        elif api == fetch_path.API_KEY:
            w, n_plan = fetch_path.serve_fetch(rbuf, p + 4, p + 4 + size, wbuf, wpos, plan, n_plan, fetch_scratch,
                                               table, shared[0], who, False)
            if w == PARK and p + 4 + size == end:
                # Counted on the wake board first, then looked at again (ipc/wake_board.py's fence): an append
                # elsewhere either sees the count and wakes this processor, or is seen by this second look.
                _count_parked(params, shared, 1)
                full_fence()
                w, n_plan = fetch_path.serve_fetch(rbuf, p + 4, p + 4 + size, wbuf, wpos, plan, n_plan,
                                                   fetch_scratch, table, shared[0], who, False)
                if w == PARK:
                    park_at = p
                    p = end
                    break
                _count_parked(params, shared, -1)
            elif w == PARK:
                w = -1  # frames behind it: a parked fetch would hold them back, so Python's purgatory keeps it
            fetched += 1
        else:
            w = -1
        if w == produce_path.HELD:  # answered by Python, and so is every request after it (in order)
            if not held:
                held_at = p
            held += 1
            p += 4 + size
            continue
        if w < 0:
            if api == produce_path.API_KEY:
                produced -= 1
            elif api == fetch_path.API_KEY:
                fetched -= 1
            break
        wpos = w
        p += 4 + size
    served = produced + fetched
    handled = libc.monotonic()
    sent, k = _send_plan(fd, wbuf, w_start, wpos, plan, p_start, n_plan)
    if served:
        conns[fd, SERVED] += served
        counters[REQUESTS] += served
        if params[METRICS_ON]:
            shared[0][_COMPILED] += served
            now = libc.monotonic()
            answered = produced - held  # a held one is counted when Python answers it
            if answered:
                record_request(shared[0], produce_path.API_KEY, answered, received, received, handled, handled, now)
            if fetched:
                record_request(shared[0], fetch_path.API_KEY, fetched, received, received, handled, handled, now)
    all_sent = sent == wpos and k == n_plan
    if park_at >= 0:
        if all_sent and _keep_carry(conns, fd, carry, rbuf, park_at, end):
            conns[fd, PARKED_AT_US] = np.int64(received * 1e6)
            conns[fd, PARKED_UNTIL_US] = conns[fd, PARKED_AT_US] + fetch_scratch[0][fk.MAX_WAIT_MS] * 1000
        else:
            _count_parked(params, shared, -1)
            p = park_at  # answers before it not sent, or no carry slot: Python's purgatory keeps it
    if (not held and (partial or end - p < 4) and p < end and all_sent
            and _keep_carry(conns, fd, carry, rbuf, p, end)):
        p = end
    if p < end or not all_sent or held:
        counters[HANDOFFS] += 1
        return end, wpos, n_plan, _emit(out, n_out, HANDOFF, fd, mask, p, end - p, sent, wpos - sent, k, n_plan - k,
                                        held_at, p - held_at if held else 0, h_start,
                                        scratch[0][produce_path.HELD_COUNT][0] - h_start)
    return start, w_start, p_start, n_out  # everything served and sent: the buffers' room is free again


@njit(cache=True, nogil=True)
def _serve_parked(everyone, params, conns, rbuf, rpos, wbuf, wpos, plan, n_plan, out, n_out, counters, carry,
                  scratch, table, shared):
    """Serve again the parked fetches whose wait is over (answered with what there is) and, if `everyone`,
    all the others (answered if they have enough now, else kept); (rpos, wpos, n_plan, n_out, when the next
    kept one's wait is over). One that compiled code no longer covers is handed to Python with its frame."""
    now_us = np.int64(libc.monotonic() * 1e6)
    due = np.int64(2**62)
    fetch_scratch = scratch[1]
    for fd in range(conns.shape[0]):
        until = conns[fd, PARKED_UNTIL_US]
        if until == 0:
            continue
        final = now_us >= until
        if not (everyone or final):
            due = min(due, until)
            continue
        if (rbuf.shape[0] - rpos < CARRY_SIZE or wbuf.shape[0] - wpos < MIN_WROOM
                or plan.shape[0] - n_plan < MIN_PLAN or out.shape[0] - n_out < 1):
            due = min(due, now_us + 1000)  # the call's buffers are spoken for: the next call serves it
            continue
        n = conns[fd, CARRY_LEN]
        at = (conns[fd, CARRY] - 1) * CARRY_SIZE
        rbuf[rpos:rpos + n] = carry[0][at:at + n]
        w, used = fetch_path.serve_fetch(rbuf, rpos + 4, rpos + n, wbuf, wpos, plan, n_plan, fetch_scratch, table,
                                         shared[0], conns[fd, WHO], final)
        if w == PARK:
            due = min(due, until)
            continue
        received = conns[fd, PARKED_AT_US] / 1e6
        _unparked(params, conns, fd, shared)
        _free_carry(conns, fd, carry)
        if w < 0:
            counters[HANDOFFS] += 1
            n_out = _emit(out, n_out, HANDOFF, fd, libc.EPOLLIN, rpos, n, wpos, 0, n_plan, 0)
            rpos += n
            continue
        handled = libc.monotonic()
        sent, k = _send_plan(fd, wbuf, wpos, w, plan, n_plan, used)
        conns[fd, LAST_ACTIVE_US] = np.int64(handled * 1e6)  # answered: just active (the idle reaper's view)
        conns[fd, SERVED] += 1
        counters[REQUESTS] += 1
        if params[METRICS_ON]:
            shared[0][_COMPILED] += 1
            record_request(shared[0], fetch_path.API_KEY, 1, received, received, handled, handled, libc.monotonic())
        if sent < w or k < used:
            counters[HANDOFFS] += 1
            n_out = _emit(out, n_out, HANDOFF, fd, libc.EPOLLIN, 0, 0, sent, w - sent, k, used - k)
            wpos, n_plan = w, used  # the unsent part stays where it is until the call returns
    return rpos, wpos, n_plan, n_out, due


@njit(cache=True, nogil=True)
def _drain(fd):
    """Read the wake board's eventfd of this processor back to zero (its 8-byte counter; EAGAIN: it was)."""
    libc.read(np.int32(fd), libc.stack_words(1), 8)


@njit(cache=True, nogil=True)
def _count_parked(params, shared, delta):
    """One more (or fewer) fetch parked here: the processor's count on the wake board is Python's and ours."""
    params[PARKED] += delta
    parked, slot = shared[1], shared[3][0]
    parked[slot] = params[PY_PARKED] + params[PARKED]


@njit(cache=True, nogil=True)
def _unparked(params, conns, fd, shared):
    """fd's fetch is parked no more (its frame still in the carry, which the caller frees or hands on)."""
    conns[fd, PARKED_UNTIL_US] = 0
    conns[fd, PARKED_AT_US] = 0
    _count_parked(params, shared, -1)


@njit(cache=True, nogil=True)
def _client_hash(buf, start, end):
    """`client_hash` of a request's client id (request header v1 and v2 alike: after the api key, version and
    correlation id, an int16-length string, -1 null as empty); UNKNOWN_CLIENT if the header is cut short."""
    if end - start < 10:
        return UNKNOWN_CLIENT
    n = max(be_i16(buf, start + 8), 0)
    if start + 10 + n > end:
        return UNKNOWN_CLIENT
    return key_hash(buf, start + 10, n, 0)


@functools.lru_cache(maxsize=4096)
def client_hash(client_id: str | None) -> int:
    """The hash compiled code compares a request's client id with (None as empty, as quotas resolve it);
    remembered, since every update of a quota'd connection asks it."""
    data = np.frombuffer((client_id or "").encode(), np.uint8)
    return int(key_hash(data, 0, data.shape[0], 0))


@njit(cache=True, nogil=True)
def _send_plan(fd, wbuf, w_start, wpos, plan, k, n_plan):
    """Send wbuf[w_start:wpos] with plan rows k..n_plan-1's file ranges at their gaps, as far as the socket
    takes it: (the first wbuf byte not sent, the first plan row not sent whole). A plan row sent in part
    is advanced past what was sent (its gap then is where the unsent bytes resume). A failed call counts as
    nothing sent: Python's write meets the error again and closes the connection."""
    at = w_start
    offset = libc.view_i64(libc.stack_words(1), 1)  # sendfile's offset, which it advances
    while True:
        stop = plan[k, GAP] if k < n_plan else wpos
        if stop > at:
            s = libc.send(np.int32(fd), wbuf.ctypes.data + at, stop - at, _MORE_FLAGS if k < n_plan else _SEND_FLAGS)
            at += max(s, 0)
            if at < stop:
                return at, k
        if k == n_plan:
            return at, k
        length = plan[k, PLAN_LEN]
        offset[0] = plan[k, PLAN_OFFSET]
        s = libc.sendfile(np.int32(fd), np.int32(plan[k, PLAN_FD]), offset.ctypes.data, length)
        if s < length:
            s = max(s, 0)
            plan[k, PLAN_OFFSET] += s
            plan[k, PLAN_LEN] -= s
            return at, k
        k += 1


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


def make_plan(rows: int) -> np.ndarray:
    """A call's send plan: `rows` file ranges (fetch_path.PLAN_FIELDS)."""
    return np.zeros((rows, fetch_path.PLAN_FIELDS), np.int64)


def make_carry(slots: int) -> tuple:
    """A pool of `slots` carry slots, all free."""
    free = np.zeros(slots + 1, np.int64)
    free[0] = slots
    free[1:] = np.arange(slots)
    return np.zeros(slots * CARRY_SIZE, np.uint8), free


@njit(cache=True, nogil=True)
def take_carry(conns, fd, carry, into, params, shared):
    """Copy fd's carry into `into` and free its slot; the bytes copied (0: none). Python's way to take it
    (a parked fetch's frame too: Python's purgatory keeps it from then on)."""
    if fd >= conns.shape[0] or conns[fd, CARRY] == 0:
        return 0
    if conns[fd, PARKED_UNTIL_US]:
        _unparked(params, conns, fd, shared)
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

    one = np.zeros(1, np.int64)
    shared = (np.zeros(REGION_WORDS, np.int64), one, one.copy(), one.copy(), *produce_path.no_quota_block())
    epoll = select.epoll()
    try:
        params = np.zeros(PARAM_FIELDS, np.int64)
        params[EPFD] = epoll.fileno()
        serve(params, np.zeros(4 * libc.EPOLL_EVENT_SIZE, np.uint8), np.zeros((4, CONN_FIELDS), np.int64),
              np.zeros(MIN_ROOM * 2, np.uint8), np.zeros(MIN_WROOM * 2, np.uint8), make_plan(MIN_PLAN),
              np.zeros((4, OUT_FIELDS), np.int64), np.zeros(COUNTER_FIELDS, np.int64), make_carry(1),
              (produce_path.make_scratch(), fetch_path.make_scratch()), PartitionTable().arrays(), shared)
    finally:
        epoll.close()
    take_carry(np.zeros((4, CONN_FIELDS), np.int64), 0, make_carry(1), np.zeros(16, np.uint8),
               np.zeros(PARAM_FIELDS, np.int64), shared)

"""The producer's network side: closed batches -> Produce v8 requests -> outcomes.

One `Sender` per producer owns a selector, one `Channel` per leader broker and a
wake-up socket pair. Its work is `step()`, a list of named phases run with the
producer's I/O lock held (the requests are built by `produce_requests.py`, their answers
handled by `produce_outcomes.py`, batches stamped by `idempotence.py`)::

    read      pick up responses already in the socket buffers (callers other than
              the I/O thread; the I/O thread reads on selector events)
    expire    fail requests older than request_timeout (the channel is closed, so
              everything in flight on it is retried) and queued batches older than
              delivery_timeout
    metadata  refresh leaders after NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION /
              a lost connection (I/O thread only: it blocks, bounded)
    collect   find each partition's first sendable batch, per leader
    send      one request per leader with at most one batch per partition, while
              the connection has fewer than max_in_flight requests outstanding
    plan      when the next step is due (linger, retry backoff, timeouts)

Who runs a step. The I/O thread loops: step, then sleep in the selector until a
socket is ready, the planned time comes, or the wake-up socket is written. A
`send()` that closes a batch also runs a non-blocking step itself if the I/O lock
is free (`Producer._kick`, producer_io.py): the batch goes out at once, instead of when the I/O
thread has been scheduled and has got the GIL from a thread busy calling send()
(CPython makes a thread returning from a blocking call wait up to the 5 ms switch
interval for it). Blocking work (connecting, metadata) is left to the I/O thread.

While send() keeps doing steps (at most one per KICK_INTERVAL while requests are in
flight, or after a step that sent, since acks=0 leaves nothing in flight: so that one
step gathers the batches closed meanwhile, and one sendmsg carries them), the I/O thread takes
the channels out of its selector (`park`): were it woken by every answer, it would
take the GIL from the thread calling send() and wait up to the switch interval for
it back at each of its own syscalls, holding the I/O lock, and the pipeline would
stall. A thread waiting for a batch (get, flush) does the I/O itself for a while
(`ProducerIO._drive`: step, poll the channels, step), which spares an awaited send()
the I/O thread's two wake-ups and the GIL passed back and forth; a longer wait, or
one that blocking work must serve, hands the channels back, as a full buffer does.
A send() that leaves its batch for the next step arms a timer (`defer`, wake_timer.py: a timerfd in
the selector, which wakes nobody when armed): if no send() has stepped or appended by the end of
the interval, the application went quiet (a paced producer between bursts), and the I/O thread takes
that step itself, and once more FOLLOW_UP later for the answers.

Cost per step, not per batch. The batches a step sends are encoded together (one
`encode.build_runs` call), a request with one batch is framed from a per-partition
header template (encoded once by the generic codec, three int32s patched), a request
with several gets `encode_request_parts` (the batches are never copied), and every
request of the step leaves in one sendmsg (`Channel.on_writable`). The usual answer
to a one-batch request is read by a `FrameTemplate` (1 µs); any other by the codec.

Idempotence (`enable_idempotence`, on by default with acks=all). Before its first
send the producer gets a producer id (InitProducerId, from the I/O thread). A batch
is stamped with the id, its epoch and its partition's next sequence when it is
first sent (`records.set_producer`, CRC again), so sequences follow the order the
partition's batches go out; a retry resends the same bytes, and the broker answers
a batch it already has with its first offsets instead of appending it twice. A
batch refused with OUT_OF_ORDER_SEQUENCE_NUMBER because an earlier one of its
partition failed and waits to be retried is retried behind it. A batch that fails
for good leaves a gap in its partition's sequence: the producer then takes a new
producer id, and batches not yet acknowledged are stamped again from sequence 0.

Ordering. A partition's batches are sent in order, all to one broker, and may be
pipelined (several in flight on one connection); the broker appends the requests
of a connection in order, so what a lost connection leaves appended is a prefix
of what was in flight, and retrying all of them in order can duplicate records
but never reorder them. A retriable *error response* is different: a later batch
of the same partition, already in flight, may be appended while the failed one
was not. So a failed batch is *held* until nothing of its partition is in
flight; if every later batch failed too, all are retried in order; if a later
batch was written, retrying the earlier one would put it behind, so it fails
with its error instead (the application sees an exception, never a silent
reordering). With one broker this only happens for transient storage errors.
"""

from __future__ import annotations

import logging
import select
import selectors
import time

from mmlog.client.channel import Channel
from mmlog.client.connection import ConnectionClosed
from mmlog.client.futures import ProducerTimeout
from mmlog.client.idempotence import Idempotence
from mmlog.client.notifier import Notifier
from mmlog.client.produce_outcomes import ProduceOutcomes
from mmlog.client.produce_requests import ProduceRequests
from mmlog.client.wake_timer import WakeTimer
from mmlog.errors import KafkaError, RequestTimedOut

log = logging.getLogger("mmlog.producer")

INF = float("inf")
_TIMER = object()  # the selector key data of the wake timer
EXPIRE_EVERY = 0.1  # seconds between scans for queued batches past their delivery timeout
RECONNECT_BACKOFF_MAX = 1.0
FOLLOW_UP = 0.0005  # after the wake timer's step, one more look for the answers this much later
# How long after the end of send()'s interval the wake timer fires (see defer): KICK_LATE while it finds the
# application quiet when it fires; doubled, up to LATE_MAX, each time it finds it busy appending (a busy
# producer's next batch steps by itself, and each wake-up takes the GIL from its thread for a moment).
KICK_LATE = 0.000025
LATE_MAX = 0.002


class Sender(ProduceRequests, ProduceOutcomes, Idempotence):
    """Turns closed batches into Produce requests; see the module docstring."""

    def __init__(self, producer) -> None:
        p = producer
        self.acc = p._acc
        self.cluster = p._cluster
        self.client_id = p.client_id
        self.transactional_id = None if p._txn is None else p._txn.transactional_id  # named in every Produce
        self.acks = p.acks
        self.linger = p.linger
        self.max_in_flight = p.max_in_flight
        self.max_request_size = p.max_request_size
        self.codec, self.compression_level = p.codec, p.compression_level
        self.retries = p.retries
        self.retry_backoff = p.retry_backoff
        self.request_timeout = p.request_timeout
        self.delivery_timeout = p.delivery_timeout
        self.timeout_ms = int(p.request_timeout * 1000)
        self.completions = p._completions  # resolved batches whose callbacks wait to be fired
        self.selector = selectors.DefaultSelector()
        self._waker = Notifier()  # wake(): interrupts the I/O thread's select
        self.selector.register(self._waker.sock, selectors.EVENT_READ, None)
        self._timer = WakeTimer.create()  # wakes the I/O thread for a batch send() left (see defer)
        if self._timer is not None:
            self.selector.register(self._timer.fd, selectors.EVENT_READ, _TIMER)
        self.deferred_for = -1.0  # the next_kick of the step a send() left its batch for (see defer)
        self.quiet_mark = -1  # acc.appended when a send() last left its batch
        self.kick_interval = 0.0  # send()'s pace of steps (producer_io.KICK_INTERVAL)
        self._follow_up = False  # the timer is armed for the one look at answers after its step
        self.late = KICK_LATE  # the wake timer fires this long after the end of send()'s interval
        self.channels: dict[int, Channel] = {}
        self._registered: dict[Channel, int] = {}
        self._backoff: dict[int, tuple[float, float]] = {}  # node -> (retry at, current backoff)
        self.metadata_needed = False
        self.metadata_next = 0.0
        self._metadata_backoff = self.retry_backoff
        self.next_expire = 0.0
        self.planned = INF  # when the I/O thread means to wake next (read by other threads, racily)
        self.next_kick = 0.0  # before this, a send() closing a batch leaves it to the next step
        self.last_kick = 0.0  # when a send() last did a step (0: it is waiting, the I/O thread drives)
        self.parked = False  # the channels are out of the I/O thread's selector (see park)
        self.needs_io_thread = False
        self.blocking = False  # the I/O thread is connecting or fetching metadata (send() must not wait for it)
        self.closing = False
        self.idempotent = p.idempotent
        self.txn = p._txn  # a transactional producer's TransactionManager (its producer id comes from it)
        self.producer_id = self.producer_epoch = -1
        self._producer_id_next = 0.0
        self.throttle_ms = self.throttle_ms_max = 0  # a broker quota's throttle_time_ms: the last answer's, the most

    # ------------------------------------------------------------ the step

    def step(self, *, io_thread: bool) -> float:
        """One pass of the phases; return the monotonic time the next step is due. I/O lock held."""
        now = time.monotonic()
        if not io_thread:
            self._read_all()
        self._expire(now)
        if io_thread and self.metadata_needed and now >= self.metadata_next:
            self._refresh_metadata()
            now = time.monotonic()
        if self.idempotent and self.producer_id < 0:
            if self.txn is not None:
                return self._plan(now)  # init_transactions() has not given it one yet
            if io_thread and now >= self._producer_id_next:
                self._init_producer_id()
                now = time.monotonic()
            if self.producer_id < 0:
                self.needs_io_thread = True
                return min(max(self._producer_id_next, now + 0.001), self._plan(now))
        ready, due = self._collect(now)
        if self.txn is not None and ready:
            ready = self._in_transaction(ready, io_thread)
        for node, queues in ready.items():
            channel = self._channel(node, now, io_thread)
            if channel is None:
                continue
            self._send(channel, queues, now)
        if not ready and not any(channel.in_flight for channel in self.channels.values()):
            # Idle: the next batch goes at once. Not after a step that sent (acks=0 leaves nothing
            # in flight): send() then paces its steps at KICK_INTERVAL too, a sendmsg for several.
            self.next_kick = 0.0
        return min(due, self._plan(now))

    def try_read(self, key_data, mask: int) -> None:
        """Handle one selector event (I/O thread)."""
        channel = key_data
        if channel is None:  # the waker
            self._waker.on_readable()
            return
        if channel is _TIMER:
            self._timer.clear()
            if self.deferred_for != self.next_kick:
                return  # a send() stepped since: the left batch went with it
            if self.acc.appended != self.quiet_mark:
                self.late = min(self.late * 2, LATE_MAX)  # busy appending: it will step by itself
                return
            # No send() has stepped since one left its batch, nor appended since the last one did: the
            # application went quiet. This thread takes the step send() would have taken, and leaves the
            # sockets to send() as before (a paced producer's next record steps itself). With requests
            # in flight it looks once more, FOLLOW_UP later, for their answers (a quiet producer's
            # acknowledgements; later ones wait for DRIVE_WINDOW as before).
            self.late = KICK_LATE
            self.next_kick = time.monotonic() + self.kick_interval
            follow_up, self._follow_up = not self._follow_up, False
            self.step(io_thread=False)
            if follow_up and self.parked and self.in_flight():
                self.deferred_for = self.next_kick
                self._follow_up = True
                self._timer.arm(self.next_kick + FOLLOW_UP)
            return
        if channel.closed:
            return
        if mask & selectors.EVENT_READ:
            channel.on_readable()
        if mask & selectors.EVENT_WRITE and not channel.closed:
            channel.on_writable()
        self._sync(channel)

    def park(self) -> None:
        """Take the channels out of the I/O thread's selector while send() does the I/O itself.

        Otherwise every answer wakes the I/O thread, which then takes the GIL from the thread
        calling send() and, at each syscall of its step, waits up to the 5 ms switch interval
        for it back, holding the I/O lock all the while: the pipeline stalls.
        """
        if self.parked:
            return
        self.parked = True
        for channel in list(self._registered):
            try:
                self.selector.unregister(channel.sock)
            except (KeyError, ValueError, OSError):
                pass
        self._registered.clear()

    def unpark(self) -> None:
        """Put the channels back in the I/O thread's selector: it drives them again."""
        if not self.parked:
            return
        self.parked = False
        for channel in list(self.channels.values()):
            self._sync(channel)

    def hand_over(self, wake: bool = False) -> None:
        """The application thread is about to block: the I/O thread drives from now on (woken if
        `wake`, or if send() has been driving: it may be parked, or about to park)."""
        if self.last_kick or wake:
            self.last_kick = 0.0
            self.wake()

    def wake(self) -> None:
        """Interrupt the I/O thread's sleep."""
        self._waker.notify()

    def defer(self, interval: float) -> None:
        """A send() left its batch for the next step (it stepped less than KICK_INTERVAL ago, with requests
        in flight): if no send() steps or appends before the interval's end (and `late`), the I/O thread
        takes that step then. Once per
        interval: the wake timer is armed, which wakes nobody now (see wake_timer.py); without one, the
        batch waits for the next send() or the I/O thread's next look (DRIVE_WINDOW at most)."""
        self.deferred_for = self.next_kick
        self.kick_interval = interval
        self._follow_up = False
        if self._timer is not None:
            self._timer.arm(self.next_kick + self.late)

    def in_flight(self) -> bool:
        """Some connection has a request that has not been answered (as far as was read). Called by send()
        without the I/O lock: it walks a copy, which the I/O thread may not change under it."""
        for channel in list(self.channels.values()):
            if channel.in_flight:
                return True
        return False

    def awaited_sockets(self) -> list[tuple]:
        """(descriptor, poll events) of every channel with an answer to wait for or bytes to write: what a
        thread driving the I/O itself waits on (I/O lock held; a descriptor closed after it is released
        makes the poll return, and the next step forgets its channel)."""
        out = []
        for channel in self.channels.values():
            if not channel.closed and (channel.in_flight or channel.wants_write):
                out.append((channel.sock.fileno(), select.POLLIN | (select.POLLOUT if channel.wants_write else 0)))
        return out

    # ------------------------------------------------------------ phases

    def _read_all(self) -> None:
        for channel in list(self.channels.values()):
            if not channel.closed:
                if channel.in_flight:  # else nothing to read (acks=0): a recv would only say EAGAIN
                    channel.on_readable()
                if channel.wants_write and not channel.closed:
                    channel.on_writable()
                self._sync(channel)

    def _expire(self, now: float) -> None:
        for node, channel in list(self.channels.items()):
            if channel.closed:
                self._forget(node, channel)
            elif channel.in_flight and channel.oldest_request_age() > self.request_timeout:
                log.warning("msg=request_timeout broker=%s:%s in_flight=%d", channel.host, channel.port,
                            channel.in_flight)
                channel.fail(RequestTimedOut(
                    f"no response from {channel.host}:{channel.port} within {self.request_timeout:g} s"))
                self._forget(node, channel)
                self._need_metadata()
        if now < self.next_expire:
            return
        self.next_expire = now + EXPIRE_EVERY
        for queue in self.acc.queue_list[:]:
            closed = queue.closed
            while closed and closed[0].created + self.delivery_timeout <= now and not queue.held:
                batch = closed.popleft()
                reason = f": {batch.last_error}" if batch.last_error is not None else ""
                self._resolve(batch, -1, ProducerTimeout(
                    f"{batch.count} records for {batch.topic}-{batch.partition} not delivered within "
                    f"delivery timeout {self.delivery_timeout:g} s{reason}"))

    def _refresh_metadata(self) -> None:
        topics = sorted({q.topic for q in self.acc.queue_list[:]})
        self.blocking = True
        try:
            self.cluster.refresh(topics)
        except (ConnectionClosed, KafkaError, OSError) as exc:
            self.metadata_next = time.monotonic() + self._metadata_backoff
            self._metadata_backoff = min(self._metadata_backoff * 2, RECONNECT_BACKOFF_MAX)
            log.debug("msg=metadata_refresh_failed error=%s", exc)
            return
        finally:
            self.blocking = False
        self.metadata_needed = False
        self._metadata_backoff = self.retry_backoff
        self.metadata_next = time.monotonic() + self.retry_backoff
        for topic in topics:
            info = self.cluster.topics.get(topic)
            if info is not None and info.error == 0 and info.partitions:
                self.acc.learn(topic, info.leaders, self.cluster.brokers)

    def _collect(self, now: float) -> tuple[dict, float]:
        """The partitions with a batch to send now, per leader; and when a lingering batch is due."""
        acc = self.acc
        ready: dict[int, list] = {}
        due = INF
        # Without the accumulator lock (send() takes it for every record): only this thread
        # pops from `closed`, and `ready_hint` is cleared before looking, so a batch closed
        # meanwhile is either seen now or flagged for the next step.
        acc.ready_hint = False
        force = acc.flushing or self.closing
        linger = self.linger
        for queue in acc.queue_list[:]:
            if queue.held:
                continue
            closed = queue.closed
            if not closed:
                batch = queue.open
                if batch is None:
                    continue
                if not force and batch.created + linger > now:
                    due = min(due, batch.created + linger)
                    continue
                with acc.lock:
                    if queue.open is batch:
                        acc._close(queue)
            batch = closed[0]
            if batch.retry_at > now:
                due = min(due, batch.retry_at)
                continue
            node = self._leader(queue)
            if node < 0 or (queue.inflight and queue.node != node):
                continue
            ready.setdefault(node, []).append(queue)
        return ready, due

    def _send(self, channel: Channel, queues: list, now: float) -> None:
        """Requests to one broker: one batch per partition each, within max_in_flight."""
        acks = self.acks
        if acks == 0 and channel.wants_write:
            return  # acks=0 has nothing in flight to count: the socket being full is the limit
        room = self.max_in_flight - channel.in_flight if acks != 0 else self.max_in_flight
        if room <= 0:
            return
        self._build_all(queues, room)
        requests = 0
        while queues and not channel.closed:
            if acks != 0 and channel.in_flight >= self.max_in_flight:
                break
            if acks == 0 and requests >= self.max_in_flight:
                # No answers will come to wake us: write, and go on while the socket takes it.
                channel.on_writable()
                if channel.wants_write:
                    break
                requests = 0
                self._build_all(queues, self.max_in_flight)
            requests += 1
            batches = []
            size = 0
            more = []
            for queue in queues:
                if not queue.closed:
                    continue
                batch = queue.closed[0]
                if batch.retry_at > now:
                    continue
                data = batch.data
                if data is None:
                    self._build_all([queue], 1)
                    data = batch.data
                if batches and size + len(data) > self.max_request_size:
                    more.append(queue)
                    continue
                if self.idempotent and batch.stamped != (self.producer_id, self.producer_epoch):
                    self._stamp(queue, batch)
                queue.closed.popleft()
                queue.inflight.append(batch)
                queue.node = channel.node_id
                batch.attempts += 1
                batches.append(batch)
                size += len(data)
                if queue.closed:
                    more.append(queue)
            if not batches:
                break
            self._request(channel, batches)
            queues = more
        channel.on_writable()  # every request of this step in one sendmsg
        self._sync(channel)

    def _plan(self, now: float) -> float:
        due = INF
        for channel in self.channels.values():
            if channel.in_flight:
                due = min(due, now - channel.oldest_request_age() + self.request_timeout)
        if self.metadata_needed:
            due = min(due, self.metadata_next)
        if self.acc.incomplete:
            due = min(due, self.next_expire)
        for node, (retry_at, _) in self._backoff.items():
            if retry_at > now:
                due = min(due, retry_at)
        return due

    # ------------------------------------------------------------ pieces

    def _leader(self, queue) -> int:
        info = self.cluster.topics.get(queue.topic)
        if info is None or info.error or queue.partition >= len(info.leaders):
            self._need_metadata()
            return -1
        node = info.leaders[queue.partition]
        if node < 0 or node not in self.cluster.brokers:
            self._need_metadata()
            return -1
        return node

    def _need_metadata(self) -> None:
        if not self.metadata_needed:
            self.metadata_needed = True
            self.needs_io_thread = True

    def _channel(self, node: int, now: float, io_thread: bool) -> Channel | None:
        channel = self.channels.get(node)
        if channel is not None:
            if not channel.closed:
                return channel
            self._forget(node, channel)
        if not io_thread:
            self.needs_io_thread = True  # connecting blocks: leave it to the I/O thread
            return None
        retry_at, backoff = self._backoff.get(node, (0.0, 0.05))
        if now < retry_at:
            return None
        broker = self.cluster.brokers.get(node)
        if broker is None:
            self._need_metadata()
            return None
        self.blocking = True
        try:
            channel = Channel(node, broker.host, broker.port, client_id=self.client_id,
                              connect_timeout=min(self.request_timeout, 10.0), security=self.cluster.security)
        except ConnectionClosed as exc:
            self._backoff[node] = (time.monotonic() + backoff, min(backoff * 2, RECONNECT_BACKOFF_MAX))
            self._need_metadata()
            log.debug("msg=connect_failed broker=%s error=%s", broker.address, exc)
            return None
        finally:
            self.blocking = False
        self._backoff.pop(node, None)
        self.channels[node] = channel
        self._sync(channel)
        return channel

    def _forget(self, node: int, channel: Channel) -> None:
        if self.channels.get(node) is channel:
            del self.channels[node]
        if self._registered.pop(channel, None) is not None:
            try:
                self.selector.unregister(channel.sock)
            except (KeyError, ValueError, OSError):
                pass

    def _sync(self, channel: Channel) -> None:
        """Keep the selector's interest in writability in step with the channel's output queue."""
        if channel.closed:
            self._forget(channel.node_id, channel)
            return
        if self.parked:
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if channel.wants_write else 0)
        registered = self._registered.get(channel)
        if registered != events:
            self._registered[channel] = events
            if registered is None:
                self.selector.register(channel.sock, events, channel)
            else:
                self.selector.modify(channel.sock, events, channel)

    # ------------------------------------------------------------ shutdown

    def abort(self, exc: BaseException) -> None:
        """Fail everything not yet resolved (close with a timeout that ran out, or a sender crash)."""
        for channel in list(self.channels.values()):
            channel.fail(ConnectionClosed("producer closed"))
        self.acc.close_all_open()
        for queue in self.acc.queue_list[:]:
            batches = list(queue.held) + list(queue.inflight) + list(queue.closed)
            queue.held, queue.inflight = [], type(queue.inflight)()
            queue.closed.clear()
            for batch in batches:
                if not batch.resolved:
                    self._resolve(batch, -1, exc)

    def close(self) -> None:
        for node, channel in list(self.channels.items()):
            channel.close()
            self._forget(node, channel)
        self.selector.close()
        self._waker.close()
        if self._timer is not None:
            self._timer.close()

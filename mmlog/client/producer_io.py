"""The producer's I/O: the I/O thread's loop, a send() that closes a batch doing a step itself, and a
thread waiting for a batch doing the I/O until it is done.

A mixin of `Producer` (producer.py); sender.py's docstring tells why send() steps the sender
when it can (the GIL's switch interval) and when the I/O thread leaves the sockets to it."""

from __future__ import annotations

import logging
import select
import time

from mmlog.client import encode
from mmlog.client.futures import ProducerClosed
from mmlog.client.sender import INF

log = logging.getLogger("mmlog.producer")

_monotonic = time.monotonic
# A send() that closes a batch does the I/O itself at most this often while requests are in
# flight: one step then writes every batch closed meanwhile with one sendmsg and reads every
# answer with one recv, instead of a step, a recv and a send per batch (a batch of one record
# closes every 2 µs). With nothing in flight it steps at once. A batch left for the next step is
# sent by the I/O thread if no send() has stepped or appended by shortly after the interval's end
# (a paced producer's last record of a burst: sender.KICK_LATE), so it waits about KICK_INTERVAL more.
KICK_INTERVAL = 0.0001
# While send() (or a waiting get() or flush(), see _drive) has done a step within this long, the I/O
# thread leaves the sockets to it (see Sender.park); a thread that blocks hands them back: a full buffer
# at once, get() and flush() once they stop driving.
DRIVE_WINDOW = 0.002
KICK_WAIT = 0.001  # longest a send() closing a batch waits for the I/O thread's step (see _kick)
# A thread waiting for a batch does the I/O itself (_drive) for at most this long, looking at least every
# DRIVE_WINDOW / 2; a longer wait is the I/O thread's, and the thread sleeps until the outcome.
DRIVE_FOR = 0.02


class ProducerIO:
    """Runs the sender: from the I/O thread, and from a send() that closed a batch."""

    def _kick(self) -> None:
        """A batch closed (or, with linger 0, a record joined the open one): send it from this thread if
        the I/O lock is free (see sender.py: the GIL), unless requests are in flight (or acks=0) and this
        thread did the I/O less than KICK_INTERVAL ago; then the next step takes it (see Sender.defer)."""
        sender = self._sender
        now = _monotonic()
        if now < sender.next_kick and (not self.acks or sender.in_flight()):
            # The batch goes with the next step's others, soon, in the same sendmsg: the next send()
            # after next_kick steps, or else the I/O thread, woken by the timer armed here once an interval
            # (if nothing was appended since: a producer busy appending will step again itself).
            sender.quiet_mark = self._acc.appended
            if sender.deferred_for != sender.next_kick:
                sender.defer(KICK_INTERVAL)
            return
        if not self._io_lock.acquire(False):
            # The I/O thread has it. Mid-step, back from a syscall, it may be waiting for the GIL
            # this thread holds: it would get it only at the 5 ms switch interval, while this thread
            # appends and cannot send (measured: half the time of a batch-50 run in such stalls).
            # Waiting for the lock hands it the GIL; it finishes its step, and this one follows.
            # Not while it connects or fetches metadata: that blocks for long, and send() must not.
            # Not with acks=0 either: no answers wait to be read, and the I/O thread's step is
            # writing, which can take long (batch 50 measured 6% slower with the wait: mean of 3 pairs).
            if sender.blocking or not self.acks or not self._io_lock.acquire(timeout=KICK_WAIT):
                return  # the holder will see acc.ready_hint before it sleeps
        sender.next_kick = now + KICK_INTERVAL
        sender.last_kick = now
        try:
            wanted = sender.needs_io_thread
            due = sender.step(io_thread=False)
            if (sender.needs_io_thread and not wanted) or due < sender.planned:
                sender.wake()  # a connection or metadata to fetch: blocking work for the I/O thread
        finally:
            self._io_lock.release()
        if self._completions:
            self._fire_callbacks()

    def _wait_on(self, batch, timeout: float | None) -> bool | None:
        """A thread is about to block on `batch`: it does the I/O itself while it can (`_drive`); else the
        I/O thread drives from now on, and the caller blocks on the batch (None).

        One thread drives at a time (`_driving`): others waiting meanwhile hand over, so that an answer
        wakes two threads (the driver and the I/O thread), not every one that waits. A driver that leaves
        answers still to come (other threads', or requests pipelined behind its own) hands over too."""
        sender = self._sender
        if self._driving.acquire(False):
            try:
                done = self._drive(batch, timeout)
            finally:
                self._driving.release()
            if done is not None:
                if sender.in_flight():
                    sender.hand_over()
                return done
        sender.hand_over()
        return None

    def _drive(self, batch, timeout: float | None) -> bool | None:
        """Step and wait for the sockets in this thread until `batch` is done (True) or `timeout` passes (False).

        Handing the sockets to the I/O thread costs an awaited send() three wake-ups (the I/O thread's
        for the hand-over, its own for the answer, this thread's for the outcome) and the GIL passed
        between them; doing the I/O here costs one. The I/O thread stays parked meanwhile: last_kick
        is renewed at least every DRIVE_WINDOW / 2 (see _run). None: this thread cannot drive (the I/O
        lock is held elsewhere, blocking work such as a connection or metadata is due, the producer is
        closing, or nothing is in flight or queued to write: the batch waits for its linger, a backoff
        or a connection), or it has driven for DRIVE_FOR already; the caller hands over."""
        sender = self._sender
        start = _monotonic()
        deadline = INF if timeout is None else start + timeout
        poll = select.poll()
        while _monotonic() < start + DRIVE_FOR:
            # The I/O thread may hold the lock for a look at the sockets (parked, it looks every
            # DRIVE_WINDOW): waiting for it hands it the GIL, as in _kick. Not while it connects or
            # fetches metadata: that is blocking work, and the caller then waits for the batch.
            if not self._io_lock.acquire(False) and (sender.blocking or not self._io_lock.acquire(timeout=KICK_WAIT)):
                return None
            try:
                if sender.blocking or sender.needs_io_thread or self._closed:
                    return None
                sender.last_kick = _monotonic()
                due = sender.step(io_thread=False)
                if sender.needs_io_thread:
                    return None
                sockets = sender.awaited_sockets()
            finally:
                self._io_lock.release()
            if self._completions:
                self._fire_callbacks()
            if batch.done:
                return True
            if not sockets:
                return None
            now = _monotonic()
            if now >= deadline:
                return False
            for fd, events in sockets:
                poll.register(fd, events)
            poll.poll(max(0.0, min(deadline, due, now + DRIVE_WINDOW / 2) - now) * 1000)
            for fd, _ in sockets:
                poll.unregister(fd)
        return None  # a long wait: the I/O thread's, and this thread sleeps until the outcome

    def _fire_callbacks(self) -> None:
        """Run the callbacks of resolved batches, in order, on one thread at a time."""
        completions = self._completions
        lock = self._callback_lock
        while completions:
            if not lock.acquire(False):
                return  # the holder loops until the queue is empty
            try:
                while True:
                    try:
                        batch = completions.popleft()
                    except IndexError:
                        break
                    batch.fire()
            finally:
                lock.release()

    def _driven(self) -> bool:
        """send() (or a waiting get() or flush()) stepped within DRIVE_WINDOW, and nothing needs the I/O thread:
        it leaves the sockets to them (see Sender.park). Read without the I/O lock: only this thread parks, and
        whoever sets needs_io_thread or closes the producer wakes it."""
        sender = self._sender
        return _monotonic() - sender.last_kick < DRIVE_WINDOW and not sender.needs_io_thread and not self._closed

    def _look_later(self) -> float:
        """While send() drives: when the I/O thread looks again (DRIVE_WINDOW after send()'s last step)."""
        sender = self._sender
        sender.planned = sender.last_kick + DRIVE_WINDOW
        return sender.planned

    def _io_step(self) -> float:
        """The I/O thread's turn with the I/O lock held: park while send() drives, else step; when to wake."""
        sender, acc = self._sender, self._acc
        if self._driven():
            sender.park()  # send() drives the sockets (see Sender.park)
            return self._look_later()
        sender.unpark()
        sender.planned = 0.0  # awake: a batch opened during this step is seen after it
        sender.needs_io_thread = False
        sender.closing = self._closed
        due = sender.step(io_thread=True)
        if acc.ready_hint or sender.needs_io_thread:
            due = 0.0
        elif acc.incomplete:
            # Busy: wake at least every linger, so that a batch opened meanwhile is
            # sent on time without send() having to wake this thread (a syscall).
            due = min(due, _monotonic() + max(self.linger, 0.001))
        sender.planned = due
        return due

    def _run(self) -> None:
        """The I/O thread: step, sleep in the selector, handle events; see sender.py."""
        sender = self._sender
        acc = self._acc
        try:
            encode.warm()  # compile or load the kernel now, not at the first batch
            while True:
                if sender.parked and self._driven():
                    # Parked, and send() still drives: look again later without the I/O lock. A send() that
                    # came while this thread held it would wait for it, and this thread, just woken, may be
                    # waiting for the GIL that send() holds (a paced producer: 2% of its sends waited).
                    due = self._look_later()
                else:
                    with self._io_lock:
                        if self._abort or (self._stop and not acc.incomplete):
                            break
                        due = self._io_step()
                if self._completions:
                    self._fire_callbacks()
                timeout = None if due == INF else max(0.0, due - _monotonic())
                events = sender.selector.select(timeout)
                if events:
                    with self._io_lock:
                        for key, mask in events:
                            sender.try_read(key.data, mask)
            if self._abort:
                with self._io_lock:
                    sender.abort(ProducerClosed("producer closed before these records were delivered"))
        except BaseException as exc:  # noqa: BLE001 - a bug here must fail the records, not hang them
            log.exception("msg=producer_io_thread_failed")
            self._failure = exc
            self._closed = True
            with self._io_lock:
                sender.abort(ProducerClosed(f"producer I/O thread failed: {exc!r}"))
        self._fire_callbacks()

"""A processor process: one epoll loop serving the connections the acceptor hands it.

Post-fork: everything here is created in the child after the fork — the selector,
signal handling, the attached log manager (its own mmaps of the partition files)
and the control-channel client. What the child inherits from the parent is only
the compiled numba kernels and codecs, the wake board and its sockets.

The loop is a list of named phases, each short:

    poll -> take new connections -> read -> notice a changed topic catalogue (altered
         configs, quotas and the leader's replication throttle; a stat at most every 0.5 s) -> handle requests -> expire long
         polls and control calls -> write -> resume starved connections -> unmute connections whose quota
         throttle is over -> close -> close idle connections

Request memory comes from the broker's shared pool (`memory.Allowance`). A
connection whose next bytes the pool (or its own cap) cannot cover is *starved*:
taken out of the poll set for reading, and retried when memory may be back: after
any release in this processor, or when the pool's eventfd for this slot fires
(another processor released while we were marked waiting; see
ipc/memory_pool.py for why no wake-up is lost). A retry every few seconds also
runs, as a backstop that should never be the one to resume anything.

Connections come tagged with the listener they arrived on. TLS listeners' sockets
are wrapped here and handshake inside the loop (connection.py); SASL listeners'
connections carry a `SaslSession` that dispatch gates requests on (sasl.py). A
failed authentication's answer waits `connection.failed.authentication.delay.ms`
in a timer list (`later`) that the loop runs between handling and writing. Work
that would hold the loop for milliseconds (a PLAIN password's PBKDF2) runs on a
helper thread (`offload`); its result comes back through a pipe the loop polls.

A failure while serving one connection closes that connection only: a handler, a
completion (a control-plane answer, a parked fetch's retry, a timer, offloaded work)
that raises an unexpected exception is logged (`_failures`: one line with its
traceback, then a count) and ends its own connection, never the loop. Calls into the
control plane have deadlines (`ControlClient.expire`, a phase of the loop), so a
control plane that stops answering costs each waiting request its timeout's error,
not a connection stuck for ever. SIGTERM stops
taking connections and reading requests; requests already received are answered,
responses are flushed, then the process exits 0 (or when the shutdown timeout
passes).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import ssl
import time
from typing import Callable

from mmlog.ipc.cluster_view import ClusterView, Endpoint, ViewReader
from mmlog.ipc.connection_table import ConnectionTable
from mmlog.ipc.control_channel import ControlClient, ControlUnavailable
from mmlog.ipc.heartbeats import Heartbeats
from mmlog.ipc.memory_pool import MemoryPool
from mmlog.ipc.metrics_block import NULL_REGION, Region
from mmlog.ipc.quota_block import QuotaBlock
from mmlog.config.broker import BrokerConfig
from mmlog.log import flush_timing
from mmlog.log.manager import LogManager
from mmlog.log.open_partitions import open_partition_budget
from mmlog.security.authorizer import Authorizer
from mmlog.processors.compiled.path import CompiledPath
from mmlog.processors.connection import Connection
from mmlog.processors.deadlines import Deadlines
from mmlog.processors.dispatch import handle_requests
from mmlog.processors.handlers import advertised_versions
from mmlog.processors.log_cap import LogCap
from mmlog.processors.intake import Intake
from mmlog.processors.memory import Allowance, Starved
from mmlog.processors.metadata_cache import TopicEntries
from mmlog.processors.offload import Offloader
from mmlog.processors.poller import READ, WRITE, Poller
from mmlog.processors.purgatory import Purgatory
from mmlog.processors.quotas import ClientQuotas
from mmlog.replication.leader_throttle import LeaderThrottle
from mmlog.processors.request import CloseConnection
from mmlog.security import credentials
from mmlog.ipc.wake_board import WakeBoard
from mmlog.protocol import FrameSizeError
from mmlog.system import perf_map

log = logging.getLogger(__name__)

BOOT_ERROR = 3  # exit code of a processor that cannot start: the supervisor stops the broker

_HANDOFF, _CONTROL, _WAKE, _SIGNAL, _MEMORY, _OFFLOADED = "handoff", "control", "wake", "signal", "memory", "offloaded"
CATALOGUE_CHECK_S = 0.5  # how soon an altered topic config reaches this processor's open partitions
_handshake_failures = LogCap(log, 10, "failed TLS handshakes")  # a plaintext client storm cannot flood the log
_failures = LogCap(log, 1, "unexpected failures while serving a connection")  # a bug hit in a loop logs once a second


class Processor:
    """The state of one processor process (its slot, connections and shared views); to its request
    handlers, their `HandlerContext` (handler_context.py)."""

    def __init__(self, slot: int, config: BrokerConfig, handoff: socket.socket, control: socket.socket,
                 board: WakeBoard, cluster_id: str, pool: MemoryPool, table: ConnectionTable,
                 metrics: Region = NULL_REGION, quota_block: QuotaBlock | None = None,
                 heartbeats: Heartbeats | None = None) -> None:
        self.slot = slot
        self.heartbeats = heartbeats or Heartbeats(slot + 1)  # the supervisor's, watched for a loop that stalls
        self.metrics = metrics  # this slot's region of the broker's metrics block (ipc/metrics_block.py)
        self.quota_block = quota_block
        self._muted: Deadlines[Connection] = Deadlines()  # connections a quota throttles, until when
        self.config = config
        self.broker_id = config["broker.id"]
        self.host, self.port = config.advertised
        self.cluster_id = cluster_id
        self.board = board
        self.handoff = handoff
        self.control = ControlClient(control)
        self.idle_s = config["connections.max.idle.ms"] / 1000
        self.pool = pool
        self.table = table
        self.memory = Allowance(pool, slot)
        self._starved = Starved(self.memory)  # connections not read from until memory is found for them
        self.conns: dict[int, Connection] = {}
        self.compiled = None
        self.purgatory = Purgatory(self._set_parked)
        self._catalogue_due = 0.0
        self._catalogue_checks = 0  # a gauge of its own, so that a test can wait for a check after its change
        self.advertised_versions = advertised_versions()  # the ApiVersions answer
        self._dirty: set[Connection] = set()  # responses queued: write them
        self._closing: set[Connection] = set()  # close once their output is written
        self._ready: set[Connection] = set()
        self.stopping = False
        self._stop_by = 0.0
        self._next_reap = 0.0
        self.sasl_mechanisms = {lst.name: [m.strip() for m in config.for_listener(lst.name, "sasl.enabled.mechanisms")
                                           .split(",") if m.strip()] for lst in config.listeners}
        self.reauth_ms = config["connections.max.reauth.ms"]
        self.auth_failure_delay_s = config["connection.failed.authentication.delay.ms"] / 1000
        self._timers: Deadlines[Callable[[], None]] = Deadlines()  # held-back answers (`later`)

    # ------------------------------------------------------------ setup

    def _setup(self) -> None:
        if perf_map.enabled():
            perf_map.write()  # the parent's kernels, at the same addresses, under this process's pid
        if self.metrics is not NULL_REGION:
            flush_timing.observer = self.metrics.flushed  # flush.messages fsyncs made here
        self.manager = LogManager(self.config.log_dirs, self.config.log_config(), owner=False,
                                  broker_id=self.broker_id,
                                  max_open=open_partition_budget(self.config["log.max.open.partitions"]))
        self.manager.on_evict = lambda n: self.metrics.add("partition_evictions", n)
        self.quotas = ClientQuotas(self.quota_block, self.slot, self.manager)
        self.leader_throttle = LeaderThrottle(self.quota_block, self.slot, self.manager, self.broker_id,
                                              self.config["leader.replication.throttled.rate"])
        me = Endpoint.of(self.config)
        self.views = ViewReader(self.config.log_dirs[0], ClusterView.standalone(me))
        self.metadata_entries = TopicEntries()  # Metadata's encoded topic entries (metadata_cache.py)
        self.credentials = credentials.CredentialReader(credentials.path_in(self.config.log_dirs[0]))
        self.authorizer = Authorizer.from_config(self.config, self.config.log_dirs[0])
        self.authorizer.refresh()
        self._intake = Intake(self.handoff, self.config, self.memory)  # TLS listeners' contexts made here
        self.sel = Poller()
        self.sel.register(self.handoff, READ, _HANDOFF)
        self.sel.register(self.control.sock, READ, _CONTROL)
        self.sel.register(self.board.fds[self.slot], READ, _WAKE)
        self.sel.register(self.pool.fds[self.slot], READ, _MEMORY)
        self._offloader = Offloader(f"processor-{self.slot}-helper")
        self.sel.register(self._offloader.fd, READ, _OFFLOADED)
        self._sig_r, sig_w = os.pipe()
        os.set_blocking(sig_w, False)
        os.set_blocking(self._sig_r, False)
        self.sel.register(self._sig_r, READ, _SIGNAL)
        signal.set_wakeup_fd(sig_w)
        # Produce served in compiled code (compiled/path.py), with these handlers as its reference.
        self.compiled = CompiledPath(self) if self.config["compiled.request.path.enable"] else None
        signal.signal(signal.SIGTERM, lambda *_: None)  # the wakeup fd carries it to the loop
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the main process decides
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # The supervisor forked us with these blocked; one that came meanwhile is delivered now.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD})

    # ------------------------------------------------------------ the loop

    def run(self) -> int:
        try:
            self._setup()
        except Exception:  # noqa: BLE001 - a processor that cannot start must stop the broker
            log.exception("processor %d cannot boot", self.slot)
            return BOOT_ERROR
        log.debug("processor %d ready (pid %d)", self.slot, os.getpid())
        beat, slot = self.heartbeats.beat, self.slot
        poll = self.compiled.poll if self.compiled is not None else self.sel.select
        while not (self.stopping and self._drained()):
            beat(slot)
            events = poll(self._poll_timeout())
            self._on_events(events)
            self._notice_catalogue()  # before handling: the first request after an idle poll sees new configs
            self._handle_requests()
            self._run_timers()
            self.purgatory.expire()
            self.control.expire()
            self._write()
            self._resume_starved()
            self._unmute()
            self._close_finished()
            self._reap_idle()
        return 0

    def _notice_catalogue(self) -> None:
        """Every CATALOGUE_CHECK_S, reload the topic catalogue if it changed (one stat): altered topic
        configs reach the partitions open here without a request having to miss first; so do ACLs."""
        now = time.monotonic()
        if now >= self._catalogue_due:
            self._catalogue_due = now + CATALOGUE_CHECK_S
            stamp = self.manager.catalogue_stamp
            self.manager.reload()
            self.quotas.refresh()
            self.authorizer.refresh()
            if self.compiled is not None and stamp != self.manager.catalogue_stamp:
                self.compiled.catalogue_changed()
                for conn in list(self.conns.values()):
                    self._update_events(conn)  # the client quotas compiled code applies, as they are now
            self.leader_throttle.refresh()
            self._catalogue_checks += 1
            self.metrics.set("catalogue_checks", self._catalogue_checks)

    def _poll_timeout(self) -> float:
        """How long the poll may wait: until the first of the loop's phases is due (timers, parked requests'
        deadlines, mutes, control calls, the catalogue check, reaping idle connections), 1 s at most."""
        if self._ready:
            return 0
        timeout = self.purgatory.timeout()
        if self._timers:
            timeout = _sooner(timeout, self._timers.next_due())
        if self._muted:
            timeout = _sooner(timeout, self._muted.next_due())
        deadline = self.control.next_deadline()
        if deadline is not None:
            timeout = _sooner(timeout, deadline)
        timeout = _sooner(timeout, min(self._catalogue_due, self._next_reap))  # the loop's own rounds, when due
        if self.stopping:
            timeout = min(timeout or 0.05, 0.05)
        return min(timeout, 1.0)

    def _on_events(self, events) -> None:
        for kind, mask in events:
            if kind is _HANDOFF:
                self._take_connections()
            elif kind is _CONTROL:
                self._on_control(mask)
            elif kind is _WAKE:
                self.board.drain(self.slot)
                self.purgatory.wake()
                if self.compiled is not None:
                    self.compiled.woken()
            elif kind is _SIGNAL:
                self._on_signal()
            elif kind is _MEMORY:
                self.pool.drain(self.slot)
                self._starved.woken = True
            elif kind is _OFFLOADED:
                self._offloader.finish(self.failed)
            else:
                conn = kind
                if conn.handshaking:
                    self._handshake(conn)
                    continue
                if mask & READ:
                    self._read(conn)
                if mask & WRITE:
                    self._dirty.add(conn)

    # ------------------------------------------------------------ phases

    def _take_connections(self) -> None:
        for conn in self._intake.take():
            self.conns[conn.fd] = conn
            self.metrics.add("connections_created", 1)
            self.metrics.set("connections", len(self.conns))
            if conn.handshaking:
                self._handshake(conn)  # its ClientHello is usually here already
            else:
                self._update_events(conn)
        if self._intake.closed and not self.stopping:
            self._begin_stop()  # the acceptor went away

    def _handshake(self, conn: Connection) -> None:
        """Step a TLS handshake; a failed one (untrusted or expired certificate, a plaintext client on a
        TLS port) closes its connection only."""
        try:
            done = conn.handshake()
        except (ssl.SSLError, OSError) as exc:
            _handshake_failures(logging.INFO, "TLS handshake from %s on listener %s failed: %s", conn.peer,
                                conn.listener_name, getattr(exc, "reason", None) or exc)
            self._close(conn)
            return
        self._update_events(conn)
        if done:
            self._read(conn)  # what came with the handshake's last flight is decrypted already

    def _read(self, conn: Connection) -> None:
        if self.compiled is not None and not self.compiled.take_carry(conn):
            return  # the start of a frame compiled code kept for it goes first (or it could not be framed)
        try:
            alive = conn.fill()
        except FrameSizeError as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
            alive = False
        if not alive:
            self._close(conn)
            return
        if conn.reader.starved:
            self._starved.conns.add(conn)  # the handle phase's event update stops reading it
        self._ready.add(conn)

    def _handle_requests(self) -> None:
        if not self._ready:
            return
        ready, self._ready = self._ready, set()
        for conn in ready:
            if self.conns.get(conn.fd) is not conn:
                continue
            try:
                handle_requests(self, conn)
            except CloseConnection as exc:
                log.info("closing connection from %s: %s", conn.peer, exc)
                conn.closing = True
                conn.done()
                self._dirty.add(conn)
            except Exception as exc:  # noqa: BLE001 - a bug met by one request ends its connection, not the loop
                self.failed(conn, exc)
                continue
            if not conn.busy and conn.has_queued_requests() and not conn.throttled_until:
                self._ready.add(conn)  # pipelined requests waiting behind a deferred one
            if conn not in self._dirty:
                # A connection with a response queued is updated by the write phase, in this same
                # pass: after the flush, which usually empties it. Updating it here too would cost
                # two epoll_ctl calls per pass (add WRITE, then drop it) that the next poll never sees.
                self._update_events(conn)

    def _write(self) -> None:
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        for conn in dirty:
            if self.conns.get(conn.fd) is not conn:
                continue
            try:
                conn.flush(self.metrics)
            except OSError:
                self._close(conn)
                continue
            if conn.closing:
                self._closing.add(conn)
            elif not conn.busy and conn.has_queued_requests() and not conn.throttled_until:
                self._ready.add(conn)
            self._update_events(conn)

    def _resume_starved(self) -> None:
        """Retry starved connections when memory may be back; read them again once it is."""
        if not self._starved.conns:
            return
        now = time.monotonic()
        signalled = self._starved.retry(now)
        if signalled is None:
            return
        for conn in list(self._starved.conns):
            if self.conns.get(conn.fd) is not conn:
                self._starved.conns.discard(conn)
                continue
            if conn.reader.resume():
                conn.stamp(now)  # the frames it completed are received now
                self._starved.conns.discard(conn)
                if not signalled:
                    log.warning("connection from %s resumed by the backstop: a memory wake-up was lost", conn.peer)
            if conn.reader.queued:
                self._ready.add(conn)
            self._update_events(conn)
            if conn.tls and not conn.reader.starved and conn.sock.pending():
                self._read(conn)  # bytes OpenSSL decrypted before it starved: epoll will not tell

    def _unmute(self) -> None:
        """Read again from connections whose quota throttle time is over."""
        if not self._muted or self._muted.next_due() > time.monotonic():
            return
        now = time.monotonic()
        for conn in self._muted.due(now):
            if self.conns.get(conn.fd) is not conn or not conn.throttled_until or conn.throttled_until > now:
                continue  # closed, or muted again for longer (its later entry unmutes it)
            conn.throttled_until = 0.0
            if conn.has_queued_requests():
                self._ready.add(conn)
            self._update_events(conn)

    def _close_finished(self) -> None:
        if self._closing:
            for conn in [c for c in self._closing if not c.out or self.conns.get(c.fd) is not c]:
                self._closing.discard(conn)
                self._close(conn)

    def _reap_idle(self) -> None:
        """Close idle connections, and starved ones whose peer left (checked once a second), or every
        connection once shutdown times out."""
        now = time.monotonic()
        if self.stopping and now > self._stop_by:
            for conn in list(self.conns.values()):
                self._close(conn)
            return
        if now < self._next_reap:
            return
        self._next_reap = now + 1.0
        if self.compiled is not None:
            for conn in self.conns.values():  # the compiled path's reads count as activity too
                conn.last_active = max(conn.last_active, self.compiled.last_active(conn))
        for conn in [c for c in self.conns.values() if now - c.last_active > self.idle_s and not self._busy(c)]:
            self._close(conn)
        for conn in [c for c in self.conns.values() if c.sasl is not None and c.sasl.expired() and not self._busy(c)]:
            log.info("closing connection from %s: SASL session of %s expired (connections.max.reauth.ms)",
                     conn.peer, conn.sasl.principal)
            self._close(conn)
        for conn in [c for c in self._starved.conns if c.peer_gone()]:
            self._close(conn)  # gave up waiting: its memory goes back now, not after the idle time

    # ------------------------------------------------------------ helpers

    def later(self, delay_s: float, fn) -> None:
        """Run fn after delay_s seconds, in the loop (a failed authentication's held-back answer)."""
        self._timers.add(time.monotonic() + delay_s, fn)

    def offload(self, fn, done) -> None:
        """Run fn() on the helper thread (it must touch nothing the loop uses meanwhile); the loop then
        calls done(result, None) or done(None, exception)."""
        self._offloader.submit(fn, done)

    def _run_timers(self) -> None:
        if not self._timers:
            return
        for fn in self._timers.due(time.monotonic()):
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - contained: see `failed`
                self.failed(None, exc)

    def failed(self, conn: Connection | None, exc: BaseException) -> None:
        """An unexpected exception while serving conn (None: not known): log it (capped), close conn."""
        self.metrics.add("processor_failures", 1)
        _failures(logging.ERROR, "unexpected failure serving %s: %s: %s; closing it",
                  f"a connection from {conn.peer}" if conn is not None else "a request",
                  exc.__class__.__name__, exc, exc_info=exc)
        if conn is not None and self.conns.get(conn.fd) is conn:
            self._close(conn)

    def wants_write(self, conn: Connection) -> None:
        """A response was queued on conn (handlers call this through Request.respond)."""
        self._dirty.add(conn)

    def throttle(self, conn: Connection, ms: int) -> None:
        """Mute conn for ms after its response (a client quota's throttle time, Kafka's KIP-219): it is
        neither read nor handled until then."""
        until = time.monotonic() + ms / 1000
        if until > conn.throttled_until:
            conn.throttled_until = until
            self._muted.add(until, conn)
            self._update_events(conn)

    def _busy(self, conn: Connection) -> bool:
        """A request of conn's is in hand: Python's, or a fetch the compiled path keeps parked."""
        return conn.busy or (self.compiled is not None and self.compiled.holds(conn))

    def _set_parked(self, n: int) -> None:
        """The wake board's count of fetches parked here: the purgatory's n and the compiled path's own."""
        self.board.set_parked(self.slot, n + (self.compiled.parked if self.compiled is not None else 0))

    def appended(self) -> None:
        """An append happened here: wake our parked fetches and other processors'."""
        self.board.notify_others(self.slot)
        if len(self.purgatory):
            self.purgatory.wake()
        if self.compiled is not None:
            self.compiled.woken()

    def _update_events(self, conn: Connection) -> None:
        if self.compiled is not None:
            self.compiled.update(conn, self._compiled_may_serve(conn))
        if conn.handshaking:
            want = conn.tls_wants
        else:
            want = (READ if conn.wants_read() and not self.stopping else 0) | (WRITE if conn.out else 0)
        if want == conn.events or self.conns.get(conn.fd) is not conn:
            return
        if conn.events == 0:
            self.sel.register(conn.sock, want, conn)
        elif want == 0:
            self.sel.unregister(conn.sock)
        else:
            self.sel.modify(conn.sock, want, conn)
        conn.events = want

    def _compiled_may_serve(self, conn: Connection) -> bool:
        """Whether the compiled path may serve conn's next requests: Python holds nothing of it, and no
        decision it needs (a SASL exchange, TLS) is Python's alone (compiled/path.py)."""
        return not (conn.tls or (conn.sasl is not None and not conn.sasl.open()) or conn.busy or conn.out
                    or conn.closing or self.stopping or conn.throttled_until or not conn.reader.empty
                    or conn.reader.starved)

    def ready(self, conn: Connection) -> None:
        """conn has requests to handle in this pass (compiled code handed it over)."""
        self._ready.add(conn)

    def starve(self, conn: Connection) -> None:
        """conn's framer waits for request memory (compiled code handed it more than its budget covered)."""
        self._starved.conns.add(conn)

    def close_connection(self, conn: Connection) -> None:
        self._close(conn)

    def _close(self, conn: Connection) -> None:
        self._closing.discard(conn)
        if self.conns.get(conn.fd) is not conn:
            return  # closed already; its fd may belong to a newer connection by now
        del self.conns[conn.fd]
        if self.compiled is not None:
            self.compiled.closed(conn)
        if conn.events:
            self.sel.unregister(conn.sock)
        self.purgatory.drop_connection(conn)
        self._starved.conns.discard(conn)
        conn.close()  # gives back its request memory
        if conn.ticket >= 0:
            self.table.closed(conn.ticket)  # the supervisor stops counting it
        self.metrics.add("connections_closed", 1)
        self.metrics.set("connections", len(self.conns))

    def _on_control(self, mask: int) -> None:
        try:
            if mask & READ:
                self.control.on_readable()
            self.control.flush()
        except ControlUnavailable:
            self.sel.unregister(self.control.sock)
            self._begin_stop()

    def _on_signal(self) -> None:
        try:
            data = os.read(self._sig_r, 64)
        except BlockingIOError:
            return
        if signal.SIGTERM in data:
            self._begin_stop()

    def _begin_stop(self) -> None:
        """Stop taking connections and reading; answer what was received; then exit."""
        if self.stopping:
            return
        self.stopping = True
        self._stop_by = time.monotonic() + self.config["controlled.shutdown.timeout.ms"] / 1000
        try:
            self.sel.unregister(self.handoff)
        except KeyError:
            pass
        for conn in list(self.conns.values()):
            conn.throttled_until = 0.0  # requests a quota held back are answered too
            self._read(conn)  # requests that reached us before the signal are answered too
            if self.conns.get(conn.fd) is conn:
                self._update_events(conn)

    def _drained(self) -> bool:
        """Shutdown may finish: nothing in flight, nothing buffered to answer or send."""
        self.purgatory.expire(everything=True)
        return all(not c.busy and not c.out and not c.has_queued_requests() for c in self.conns.values())


def _sooner(timeout: float | None, due: float) -> float:
    """A poll timeout that also ends by the monotonic time `due`."""
    until = max(due - time.monotonic(), 0)
    return until if timeout is None else min(timeout, until)


def processor_main(slot: int, config: BrokerConfig, handoff: socket.socket, control: socket.socket,
                   board: WakeBoard, cluster_id: str, pool: MemoryPool, table: ConnectionTable,
                   metrics: Region = NULL_REGION, quota_block: QuotaBlock | None = None,
                   heartbeats: Heartbeats | None = None) -> int:
    """Entry point in the forked child; returns the exit code."""
    try:
        return Processor(slot, config, handoff, control, board, cluster_id, pool, table, metrics, quota_block,
                         heartbeats).run()
    except Exception:  # noqa: BLE001
        log.exception("processor %d failed", slot)
        return 1

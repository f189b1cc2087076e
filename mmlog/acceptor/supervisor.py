"""The supervisor: runs the main process's loop, keeps processors alive.

Its loop is a handful of verb-named steps (gunicorn's arbiter is the model):

    wait -> accept and hand off -> handle queued signals -> reap and replace processors
         -> collect closed connections

Signal handlers only queue the signal (the wakeup fd ends the wait); the loop
dispatches `handle_<signal>`. A readable listener goes to the accept loop
(`accept_loop.py`: limits checked, connections handed off round-robin).

Made before forking and shared with every processor: the wake board, the request
memory pool (queued.max.request.bytes, `ipc/memory_pool.py`) and the connection
table through which processors report closes (`ipc/connection_table.py`). A dead
processor's share of both is taken back before its replacement starts.

Pre-fork / post-fork: the supervisor forks processors holding the fork lock, so
the control thread is between operations (no partition lock, no half-written
file). Each child closes the parent's ends of the channels and runs
`processor_main`; a child that cannot boot exits with `BOOT_ERROR`, which stops
the broker rather than respawning it forever. A processor that dies otherwise is
replaced in its slot (same wake-board slot, new channels) after a backoff of its
slot's own: RESTART_BACKOFF_MIN_S after the first death, doubling with each death
in a row up to RESTART_BACKOFF_MAX_S, and back to the minimum once a processor of
the slot has stayed up STABLE_AFTER_S. A processor that keeps dying of the same
fault is thus not restarted into it in a tight loop, yet the broker never gives up
while it can serve: the other slots go on, and every restart is logged with its
backoff. Connections are handed only to live processors.

Log dir failures (`mmlog/log/log_dirs.py`): a loop step notices a log dir that any
process of the broker marked offline, logs it once (which dir, which error, how many
partitions), lets the main process's partitions there go and, when no log dir is left
online, stops the broker (exit code 1), as Kafka does. A child that died of SIGBUS
(an mmap of a failing disk) makes it probe every online dir first, so the
replacement finds the failed one offline and never touches its mmaps.

The supervisor watches the main process's own threads as it watches its processes
(`liveness.py`): each turn of its loop asks whether an essential thread died or the
control thread stopped turning, and if so stops the broker with exit code 1 and one
line saying why, for systemd to restart it; a broker is never left up serving nothing.
Under a unit with WatchdogSec it feeds systemd's watchdog (WATCHDOG=1 every half
interval) only while every essential loop turns. Forking waits for the control
thread's locks at most a second at a time (a restart is put off, never the loop).

In cluster mode the supervisor also forks the replica fetcher
(`mmlog/replication/fetcher.py`), and with log.cleaner.enable the log cleaner
(`mmlog/log/cleaner/manager.py`), and replaces each the same way when it dies.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import signal
import socket
import threading
import time
from dataclasses import dataclass

from mmlog.acceptor.accept_loop import AcceptLoop
from mmlog.acceptor.connection_limits import ConnectionLimits
from mmlog.acceptor.control import ControlPlane
from mmlog.acceptor.fork_guard import WAIT_S as FORK_LOCK_WAIT_S, ForkPutOff
from mmlog.acceptor.handoff import channel_pair
from mmlog.acceptor.liveness import FAULT_FILE, fault_injection_enabled
from mmlog.acceptor.systemd import Watchdog
from mmlog.config.broker import BrokerConfig
from mmlog.ipc.connection_table import ConnectionTable
from mmlog.ipc.heartbeats import Heartbeats
from mmlog.ipc.memory_pool import MemoryPool
from mmlog.ipc.metrics_block import CLEANER as CLEANER_REGION, MAIN, NULL_REGION, MetricsBlock
from mmlog.ipc.quota_block import QuotaBlock
from mmlog.ipc.wake_board import WakeBoard
from mmlog.log import flush_timing
from mmlog.log.cleaner.manager import cleaner_main
from mmlog.processors.worker import BOOT_ERROR, processor_main
from mmlog.replication.fetcher import fetcher_main

log = logging.getLogger("mmlog.broker")

RESTART_BACKOFF_MIN_S = 0.1
RESTART_BACKOFF_MAX_S = 30.0
STABLE_AFTER_S = 60.0  # a process up this long resets its slot's backoff
FETCHER = "fetcher"  # the replica fetcher's backoff slot
CLEANER = "cleaner"  # the log cleaner's
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
PAUSE_S = 5.0  # a gap this long between two turns of the supervisor's loop means the whole broker was stopped


@dataclass
class Worker:
    slot: int
    pid: int
    handoff: socket.socket
    control: socket.socket
    started: float
    killed: bool = False  # SIGKILLed for a stalled loop, not reaped yet


class BrokerStopped(Exception):
    """The broker has to stop with an error (processors cannot boot)."""


class Backoff:
    """Per-slot restart delays: doubling with each death in a row, reset by a long enough life."""

    def __init__(self, low: float = RESTART_BACKOFF_MIN_S, high: float = RESTART_BACKOFF_MAX_S,
                 stable_after: float = STABLE_AFTER_S) -> None:
        self.low, self.high, self.stable_after = low, high, stable_after
        self._next: dict = {}  # slot -> the delay its next death gets
        self.deaths: dict = {}  # slot -> deaths in a row

    def died(self, slot, lived: float) -> float:
        """A process of `slot` died after `lived` seconds: how long to wait before restarting it."""
        if lived >= self.stable_after:
            self._next.pop(slot, None)
            self.deaths.pop(slot, None)
        delay = self._next.get(slot, self.low)
        self._next[slot] = min(delay * 2, self.high)
        self.deaths[slot] = self.deaths.get(slot, 0) + 1
        return delay


class Supervisor:
    """The main loop of the broker's main process."""

    def __init__(self, config: BrokerConfig, listeners: list[socket.socket], control: ControlPlane,
                 cluster_id: str) -> None:
        self.config = config
        self.liveness = control.liveness
        self._sig_w: int | None = None
        self.liveness.wake = self._wake  # a failure ends the loop's wait at once
        self._watchdog = Watchdog.from_environment()
        self.listeners = listeners
        self.control = control
        self.cluster_id = cluster_id
        self.nprocs = config["num.network.threads"]
        self.board = WakeBoard(self.nprocs)
        self.heartbeats = Heartbeats(self.nprocs)
        self._last_watch = time.monotonic()
        self.pool = MemoryPool(config["queued.max.request.bytes"], config["socket.request.max.bytes"], self.nprocs)
        self.limits = ConnectionLimits(config, ConnectionTable(config["max.connections"]))
        self.acceptor = AcceptLoop(self.limits, lambda: self.workers.values())
        # With metrics.listen or the console (its Metrics page) on: the counters every process writes
        # (ipc/metrics_block.py).
        self.metrics = MetricsBlock(self.nprocs) if config["metrics.listen"] or config.console_listeners else None
        self.main_metrics = self.metrics.region(MAIN) if self.metrics else NULL_REGION
        self.close_in_children: list[socket.socket] = []  # the main process's own sockets (metrics endpoint)
        control.on_dynamic.append(self.limits.reconfigure)  # max.connections* are dynamic (config/dynamic.py)
        control.apply_dynamic()
        self.quota_block = QuotaBlock(self.nprocs, config["quota.window.num"],
                                      config["quota.window.size.seconds"] * 1000)
        self._next_collect = 0.0
        self._pool_short = False
        self.workers: dict[int, Worker] = {}  # pid -> worker
        self._signals: list[int] = []
        self.backoff = Backoff()
        self._restarts: dict = {}  # slot (or FETCHER) -> monotonic time to restart it
        self.fetcher_pid: int | None = None
        self._fetcher_started = 0.0
        self.cleaner_pid: int | None = None
        self._cleaner_started = 0.0
        self.stopping = False
        self._offline_dirs: set[int] = set()  # log dirs whose failure is logged
        # A broker started by a test or tool stops when that process is gone (reparented).

    # ------------------------------------------------------------ the loop

    def run(self, on_ready=lambda: None) -> int:
        """Serve until SIGTERM/SIGINT; return the exit code."""
        self._setup_signals()
        for slot in range(self.nprocs):
            self.spawn(slot)
        if self.config["zookeeper.connect"]:
            self.spawn_fetcher()
        if self.config["log.cleaner.enable"]:
            self.spawn_cleaner()
        on_ready()
        self.sel = selectors.DefaultSelector()
        for index, sock in enumerate(self.listeners):
            self.sel.register(sock, selectors.EVENT_READ, index)  # its place in `listeners`
        self.sel.register(self._sig_r, selectors.EVENT_READ, "signal")
        try:
            while not self.stopping:
                self.wait()
                self.handle_signals()
                self.watch_liveness()
                self.reap()
                self.watch_log_dirs()
                self.collect()
                self.restart_due()
        except BrokerStopped as exc:
            log.critical("stopping: %s", exc)
            self.stop_workers()
            return 1
        return 0

    def watch_liveness(self) -> None:
        """Stop the broker if an essential thread of this process died or its control thread stalled; kill
        a processor whose loop stalled (it is replaced); feed systemd's watchdog when it is due."""
        now = time.monotonic()
        paused, self._last_watch = now - self._last_watch, now
        if paused > PAUSE_S:  # this loop turns every second: the whole broker was stopped, not one loop
            log.warning("the broker was paused for %.1f s (SIGSTOP, a frozen machine?): its loops are timed afresh",
                        paused)
            self.liveness.resumed()
            self.heartbeats.reset()
            return
        why = self.liveness.failure()
        if why is not None:
            raise BrokerStopped(why)
        self._kill_stalled()
        self._watchdog.feed(self.liveness)

    def _kill_stalled(self) -> None:
        """SIGKILL each processor whose loop has not turned for broker.stall.timeout.ms: contained, as a
        processor's death is (reap replaces it)."""
        stall_s = self.liveness.stall_s
        for worker in self.workers.values():
            quiet = self.heartbeats.quiet_s(worker.slot)
            if quiet > stall_s and not worker.killed:
                worker.killed = True
                log.error("processor %d (pid %d) has not turned for %.1f s (broker.stall.timeout.ms %d): killing it",
                          worker.slot, worker.pid, quiet, stall_s * 1000)
                try:
                    os.kill(worker.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _wake(self) -> None:
        """End the loop's wait (from any thread): a byte no signal has, through the signal pipe."""
        if self._sig_w is not None:
            try:
                os.write(self._sig_w, b"\0")
            except OSError:
                pass

    def wait(self) -> None:
        timeout = 1.0
        if self._restarts:
            timeout = min(timeout, max(0.0, min(self._restarts.values()) - time.monotonic()))
        if self.acceptor.waiting:  # connections no processor could take yet: try again soon
            timeout = min(timeout, 0.002)
            self.acceptor.retry()
        for key, _ in self.sel.select(timeout):
            if isinstance(key.data, int):
                self.acceptor.accept(key.fileobj, key.data)
            else:
                try:
                    self._signals.extend(os.read(self._sig_r, 64))
                except BlockingIOError:
                    pass

    def collect(self) -> None:
        """Once a second: stop counting connections processors have closed (admit also does when it must),
        and say when the request memory pool runs short or recovers."""
        now = time.monotonic()
        if now >= self._next_collect:
            self._next_collect = now + 1.0
            self.limits.collect()
            self._watch_pool()

    def _watch_pool(self) -> None:
        short = any(self.pool.waiting(slot) for slot in range(self.nprocs))
        if short and not self._pool_short:
            log.warning("request memory short: %d of %d bytes reserved (queued.max.request.bytes); processors "
                        "stopped reading some connections until memory comes back", self.pool.used, self.pool.limit)
        elif self._pool_short and not short:
            log.info("request memory available again: %d of %d bytes reserved", self.pool.used, self.pool.limit)
        self._pool_short = short

    def watch_log_dirs(self) -> None:
        """Log each log dir gone offline once; stop the broker when every one is (Kafka does)."""
        manager = self.control.manager
        health = manager.dir_health
        if not health.any_offline[0]:
            return
        for slot in health.offline_slots():
            if slot in self._offline_dirs:
                continue
            self._offline_dirs.add(slot)
            err, pid = health.cause(slot)
            keys = manager.offline_partitions(slot)
            manager.drop_offline()
            self.control.replicas_offline(keys)
            online = len(health.online_slots())
            log.error("log dir %s is offline: %s (%s, seen by %s); its %d partitions answer KAFKA_STORAGE_ERROR "
                      "from now on%s; %d of %d log dirs online", health.log_dirs[slot], errno.errorcode.get(err, err),
                      os.strerror(err), f"pid {pid}" if pid else "a probe after a SIGBUS death", len(keys),
                      f" ({', '.join(f'{t}-{p}' for t, p in keys[:10])}{', ...' if len(keys) > 10 else ''})"
                      if keys else "", online, len(health.log_dirs))
        if not health.online_slots():
            raise BrokerStopped(f"every log dir is offline ({', '.join(map(str, health.log_dirs))})")

    def _probe_after(self, code: int) -> None:
        """A child killed by SIGBUS touched an mmap whose disk failed: find which dir, before its
        replacement starts (log_dirs.py)."""
        if code == -signal.SIGBUS:
            marked = self.control.manager.dir_health.probe()
            log.warning("a process died of SIGBUS: probed the log dirs, %d failed", len(marked))

    def handle_signals(self) -> None:
        signals, self._signals = self._signals, []
        for signum in signals:
            handler = {
                signal.SIGTERM: self.handle_term, signal.SIGINT: self.handle_term,
                signal.SIGHUP: self.handle_hup, signal.SIGCHLD: lambda: None, signal.SIGUSR2: self.handle_usr2,
            }.get(signum)
            if handler:
                handler()

    def handle_term(self) -> None:
        log.info("shutting down: stop accepting, let processors finish in-flight requests")
        self.stopping = True

    def handle_hup(self) -> None:
        log.info("SIGHUP: nothing to reload yet (settings need a restart)")

    def handle_usr2(self) -> None:
        """Fault injection for tests (liveness.py): only with MMLOG_FAULT_INJECTION=1 is SIGUSR2 caught."""
        try:
            what = (self.config.log_dirs[0] / FAULT_FILE).read_text().strip()
        except OSError as exc:
            log.error("fault injection: %s", exc)
            return
        self.liveness.inject(what)

    def reap(self) -> None:
        """Collect dead processors; replace them, or stop the broker if they cannot run."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.fetcher_pid:
                self._fetcher_died(pid, status)
                continue
            if pid == self.cleaner_pid:
                self._cleaner_died(pid, status)
                continue
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue
            worker.handoff.close()
            self.control.server.remove_channel(worker.control)
            # Its connections and request memory died with it.
            self.limits.reclaim(worker.slot)
            self.pool.reclaim(worker.slot)
            if self.metrics:
                self.metrics.fold_processor(worker.slot)  # its counts stay, in the base region
            code = os.waitstatus_to_exitcode(status)
            if self.stopping:
                continue
            self._probe_after(code)
            if code == BOOT_ERROR:
                raise BrokerStopped(f"processor {worker.slot} could not boot")
            delay = self._schedule_restart(worker.slot, worker.started)
            self.main_metrics.add("processor_restarts", 1)
            log.warning("processor %d (pid %d) died with %s; replacing it in %.1f s (death %d in a row)",
                        worker.slot, pid, _describe(code), delay, self.backoff.deaths[worker.slot])

    def _fetcher_died(self, pid: int, status: int) -> None:
        self.fetcher_pid = None
        if self.stopping:
            return
        self._probe_after(os.waitstatus_to_exitcode(status))
        delay = self._schedule_restart(FETCHER, self._fetcher_started)
        log.warning("replica fetcher (pid %d) died with %s; replacing it in %.1f s (death %d in a row)", pid,
                    _describe(os.waitstatus_to_exitcode(status)), delay, self.backoff.deaths[FETCHER])

    def _cleaner_died(self, pid: int, status: int) -> None:
        self.cleaner_pid = None
        if self.metrics:
            self.metrics.fold(CLEANER_REGION)
        if self.stopping:
            return
        self._probe_after(os.waitstatus_to_exitcode(status))
        delay = self._schedule_restart(CLEANER, self._cleaner_started)
        log.warning("log cleaner (pid %d) died with %s; replacing it in %.1f s (death %d in a row)", pid,
                    _describe(os.waitstatus_to_exitcode(status)), delay, self.backoff.deaths[CLEANER])

    def _schedule_restart(self, slot, started: float) -> float:
        now = time.monotonic()
        delay = self.backoff.died(slot, now - started)
        self._restarts[slot] = now + delay
        return delay

    def restart_due(self) -> None:
        """Restart the processors (and the fetcher) whose backoff has passed."""
        now = time.monotonic()
        for slot, due in sorted(self._restarts.items(), key=lambda item: item[1]):
            if due > now or self.stopping:
                continue
            del self._restarts[slot]
            try:
                if slot == FETCHER:
                    self.spawn_fetcher()
                elif slot == CLEANER:
                    self.spawn_cleaner()
                else:
                    self.spawn(slot)
            except ForkPutOff:
                self._restarts[slot] = time.monotonic() + FORK_LOCK_WAIT_S
                log.warning("restart of %s put off: the control thread's locks were busy for %.0f s",
                            slot if isinstance(slot, str) else f"processor {slot}", FORK_LOCK_WAIT_S)

    # ------------------------------------------------------------ processes

    def spawn(self, slot: int) -> None:
        """Fork the processor of a slot."""
        handoff_parent, handoff_child = channel_pair()
        control_parent, control_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

        def child() -> int:
            handoff_parent.close()
            control_parent.close()
            return processor_main(slot, self.config, handoff_child, control_child, self.board, self.cluster_id,
                                  self.pool, self.limits.table,
                                  self.metrics.processor(slot) if self.metrics else NULL_REGION, self.quota_block,
                                  self.heartbeats)

        try:
            self.heartbeats.beat(slot)  # its clock starts now: booting counts as turning
            pid = self._fork(child)
        except ForkPutOff:
            for sock in (handoff_parent, handoff_child, control_parent, control_child):
                sock.close()
            raise
        handoff_child.close()
        control_child.close()
        handoff_parent.setblocking(False)
        self.workers[pid] = Worker(slot, pid, handoff_parent, control_parent, time.monotonic())
        self.control.server.add_channel(control_parent)

    def spawn_fetcher(self) -> None:
        """Fork the replica fetcher process."""
        self.fetcher_pid = self._fork(lambda: fetcher_main(self.config))
        self._fetcher_started = time.monotonic()

    def spawn_cleaner(self) -> None:
        """Fork the log cleaner process."""
        on_clean = count_cleaning(self.metrics.region(CLEANER_REGION)) if self.metrics else None
        self.cleaner_pid = self._fork(lambda: cleaner_main(self.config, on_clean))
        self._cleaner_started = time.monotonic()

    def _fork(self, body) -> int:
        """Fork a child that closes the parent's sockets, runs body() and exits with its code
        (BOOT_ERROR if it raised); returns the child's pid in the parent."""
        # Signals stay blocked across the fork until the child has its own handlers: a
        # SIGTERM that arrives while it boots then waits for it instead of running the
        # parent's handler in the child and being lost.
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            with self.control.fork_guard:  # no thread of ours is mid-change (fork_guard.py)
                pid = os.fork()
        except BaseException:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
            raise
        if pid:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
            return pid
        code = BOOT_ERROR  # ------------------------------------------------ the child
        threading.excepthook = threading.__excepthook__  # the main process's liveness is not the child's
        flush_timing.observer = None  # the main process's region is not the child's to write (worker sets its own)
        try:
            for sock in self.listeners + self.close_in_children:
                sock.close()
            for w in self.workers.values():
                w.handoff.close()
                w.control.close()
            for conn, *_ in self.acceptor.waiting:  # the processor it hands them to gets them by hand-off
                conn.close()
            code = body()
        finally:
            os._exit(code)

    def stop_fetcher(self, timeout: float = 10.0) -> None:
        pid, self.fetcher_pid = self.fetcher_pid, None
        self._stop_child(pid, timeout)

    def stop_cleaner(self, timeout: float = 10.0) -> None:
        pid, self.cleaner_pid = self.cleaner_pid, None
        self._stop_child(pid, timeout)

    def _stop_child(self, pid: int | None, timeout: float) -> None:
        """SIGTERM a helper process (fetcher, cleaner) and reap it; SIGKILL after the timeout."""
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    def stop_workers(self, timeout: float | None = None) -> None:
        """SIGTERM every processor, wait for them (SIGKILL after the timeout)."""
        if timeout is None:
            timeout = self.config["controlled.shutdown.timeout.ms"] / 1000 + 5
        for sock in self.listeners:
            sock.close()
        self.acceptor.close_waiting()
        for worker in self.workers.values():
            try:
                os.kill(worker.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while self.workers and time.monotonic() < deadline:
            for pid in list(self.workers):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    self.workers.pop(pid).handoff.close()
            time.sleep(0.01)
        for pid, worker in self.workers.items():
            log.warning("processor %d did not stop in time; killing it", worker.slot)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        self.workers.clear()
        self.stop_fetcher()
        self.stop_cleaner()

    def _setup_signals(self) -> None:
        self._sig_r, sig_w = os.pipe()
        os.set_blocking(self._sig_r, False)
        os.set_blocking(sig_w, False)
        signal.set_wakeup_fd(sig_w)
        self._sig_w = sig_w
        for signum in SIGNALS + ((signal.SIGUSR2,) if fault_injection_enabled() else ()):
            signal.signal(signum, lambda *_: None)  # queued through the wakeup fd


def count_cleaning(region):
    """What the cleaner process calls after each cleaning: its figures into its metrics region."""

    def count(stats) -> None:
        region.add("cleaner_passes", 1)
        region.add("cleaner_bytes_read", stats.bytes_read)
        region.add("cleaner_bytes_written", stats.bytes_written)
        region.add("cleaner_records_read", stats.records_read)
        region.add("cleaner_records_kept", stats.records_kept)
        region.set("cleaner_last_pass_us", int(stats.elapsed_s * 1e6))

    return count


def _describe(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"

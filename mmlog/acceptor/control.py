"""The control plane's request handlers and housekeeping timers, on the control thread.

Processors forward what changes cluster state: topic creation and deletion
(explicit, or automatic on Metadata), producer ids, and every consumer-group
request, which the group coordinator (`coordinator/`) serves, and the transaction
coordinator's requests (`transactions/`). Topic admin and producer ids (`admin_ops.py`)
go through the store: the data dir when standalone, ZooKeeper in cluster mode (whose
watches also land here, through `run_soon`). Every op is named in the control
channel's catalogue (`ipc/control_ops.py`). Housekeeping runs
here too, on timers: retention every `log.retention.check.interval.ms`, the
flush.ms / segment.ms checks every `log.flush.scheduler.interval.ms`, offset
expiry every `offsets.retention.check.interval.ms`, and the coordinator's session
and rebalance timers.

What makes partitions (CreateTopics, CreatePartitions, auto-creation) runs on the
topic worker, a thread of its own: a creation waits on the file system (a partition's
files can take hundreds of milliseconds when the disk is busy; 10,000 partitions tens
of seconds), and the control thread goes on answering heartbeats meanwhile. Limits
(`limits.py`) are checked before anything is created. Auto-creation asked for by
Metadata is budgeted (`auto.create.topics.max.per.request`, `.max.per.second`), made
one topic at a time, and the catalogue written once per request before the answer
goes; a name past the budget, or already being created for another request, is
answered LEADER_NOT_AVAILABLE (Kafka's answer for a topic being created) and the
client asks again.

Two locks keep threads apart. The fork lock is held by everything on the control
thread: the supervisor takes it to fork, so no child starts while a handler holds a
partition lock or is half way through a change. The topic lock is held by whatever
reads or changes the store's topics: the topic worker (for one auto-created topic at
a time, or one admin request), and the control thread's ops, tasks and timers except
the group coordinator's, which never touch topics. The control thread never waits
for it: work that finds it taken is queued, in order, and run once the worker lets
go (the worker lets queued work go first). The supervisor takes the topic lock, then
the fork lock, to fork. A topic being created so never holds up a heartbeat.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from mmlog.acceptor.admin_ops import AdminOps
from mmlog.acceptor.fork_guard import ForkGuard
from mmlog.acceptor.liveness import Liveness
from mmlog.acceptor.topic_worker import TopicWorker
from mmlog.cluster.limits import PartitionLimits, TokenBucket
from mmlog.cluster.store import MetadataStore
from mmlog.config.broker import BrokerConfig
from mmlog.config.dynamic import merged
from mmlog.coordinator import GroupCoordinator
from mmlog.errors import KafkaError, MetadataStoreUnreachable
from mmlog.ipc.control_channel import ControlServer
from mmlog.ipc.control_ops import AUTO_CREATE_TOPICS
from mmlog.log.manager import LogManager
from mmlog.transactions.coordinator import TransactionCoordinator
from mmlog.transactions.state_log import TOPIC as TRANSACTION_STATE

log = logging.getLogger(__name__)

def _replying(fn, args, reply) -> None:
    """Run an op whose failure goes back to its caller, as ControlServer answers an op it runs at once
    (these run later: queued for the topic lock, or on the topic worker)."""
    try:
        fn(args, reply)
    except MetadataStoreUnreachable as exc:  # a partition: the client retries
        log.warning("control op not done: %s", exc)
        reply(exc, ok=False)
    except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
        log.exception("control op failed")
        reply(exc, ok=False)


class ControlPlane:
    """The control ops served on the control thread, bound to the broker's log manager and store."""

    def __init__(self, config: BrokerConfig, manager: LogManager, store: MetadataStore,
                 liveness: Liveness | None = None) -> None:
        """`store` is an `EmbeddedStore` or a `ZooKeeperStore`; `liveness` watches the threads it starts."""
        self.config = config
        self.liveness = liveness or Liveness(config["broker.stall.timeout.ms"] / 1000)
        self.manager = manager
        self.store: MetadataStore = store
        self.fork_lock = threading.Lock()
        self.topic_lock = threading.RLock()
        self.fork_guard = ForkGuard(self.topic_lock, self.fork_lock)
        self._topic_work: deque = deque()  # control thread work waiting for the topic lock, in order
        self._topic_wanted = threading.Event()
        self.limits = PartitionLimits(config)
        self._auto_budget = TokenBucket(config["auto.create.topics.max.per.second"])
        self._auto_creating: set[str] = set()
        self._worker = TopicWorker(self._topic_wanted)
        self.on_dynamic: list = []  # hooks given the dynamic broker configs in force when they change
        self.admin = AdminOps(config, manager, store, self.limits, self.topic_deleted, self.apply_dynamic)
        self.server = ControlServer({
            **{op: self._on_worker(fn) for op, fn in self.admin.making_ops().items()},
            AUTO_CREATE_TOPICS: self._locked(self.auto_create_topics),
            **{op: self._locked(fn) for op, fn in self.admin.ops().items()},
        })
        self.coordinator = GroupCoordinator(config, store.offset_store(self.run_soon), self._partition_count,
                                            self._group_call_later, owns=store.owns_group)
        for note in self.coordinator.load():
            log.warning("recovered: %s", note)
        self.server.handlers.update({op: self._group_locked(fn) for op, fn in self.coordinator.ops().items()})
        self.transactions = TransactionCoordinator(config, manager, store, self._call_later, self.run_soon)
        self.server.handlers.update({op: self._locked(fn) for op, fn in self.transactions.ops().items()})

    def _locked(self, fn):
        """An op run holding the fork lock and the topic lock."""
        return lambda args, reply: self._locked_task(lambda: _replying(fn, args, reply))()

    def _group_locked(self, fn):
        """A group coordinator op: the fork lock only (groups never touch topics)."""
        return lambda args, reply: self._group_task(lambda: fn(args, reply))()

    def _on_worker(self, fn):
        """An op that makes partitions: run by the topic worker under the topic lock; its answer goes
        back through the control thread (which owns the processors' channels)."""
        def run(args, reply):
            def answer(value, ok=True) -> None:
                self.server.call_soon(lambda: reply(value, ok))

            def job() -> None:
                self._worker.let_control_go_first()
                with self.topic_lock:
                    _replying(fn, args, answer)

            self._worker.submit(job)

        return run

    def _locked_task(self, fn):
        def run():
            with self.fork_lock:
                self._with_topic_lock(fn)

        return run

    def _group_task(self, fn):
        def run():
            with self.fork_lock:
                fn()

        return run

    def _with_topic_lock(self, fn) -> None:
        """On the control thread (fork lock held): run fn holding the topic lock, now if it is free,
        else once the topic creator has made its current topic, after the work queued before it."""
        if not self._topic_work and self.topic_lock.acquire(blocking=False):
            try:
                fn()
            finally:
                self.topic_lock.release()
            return
        self._topic_work.append(fn)
        if len(self._topic_work) == 1:
            self._topic_wanted.set()
            self.server.call_later(0.001, self._run_topic_work)

    def _run_topic_work(self) -> None:
        with self.fork_lock:
            if not self.topic_lock.acquire(blocking=False):
                self.server.call_later(0.001, self._run_topic_work)
                return
            try:
                while self._topic_work:
                    try:
                        self._topic_work.popleft()()
                    except MetadataStoreUnreachable as exc:
                        log.warning("control plane task not done: %s", exc)
                    except Exception:  # noqa: BLE001 - as ControlServer runs its tasks
                        log.exception("control plane task failed")
            finally:
                self._topic_wanted.clear()
                self.topic_lock.release()

    def run_soon(self, fn) -> None:
        """Run fn on the control thread holding the fork lock (thread-safe: ZooKeeper watches use it)."""
        self.server.call_soon(self._locked_task(fn))

    def view_changed(self) -> None:
        """Live brokers changed: groups this broker no longer coordinates go, newly won ones load."""
        self.coordinator.sync_ownership()

    def roles_changed(self, keys) -> None:
        """Partitions changed role here (cluster mode, ReplicaManager.on_roles): the transaction coordinator
        loads the `__transaction_state` partitions it now leads and resigns the others."""
        if any(topic == TRANSACTION_STATE for topic, _ in keys):
            self.run_soon(self.transactions.sync)

    def topic_deleted(self, name: str) -> None:
        """A topic was deleted elsewhere in the cluster: so are its committed offsets."""
        self.coordinator.delete_topic(name)

    def _call_later(self, delay: float, fn) -> None:
        """The transaction coordinator's timers: on the control thread, locked like the ops."""
        self.server.call_later(delay, self._locked_task(fn))

    def _group_call_later(self, delay: float, fn) -> None:
        """The group coordinator's timers: holding the fork lock, as its ops."""
        self.server.call_later(delay, self._group_task(fn))

    def _partition_count(self, topic: str) -> int | None:
        info = self.manager.topics().get(topic)
        if info is None and self.topic_lock.acquire(blocking=False):  # else the client asks again
            try:  # cluster mode: created through another broker, our watch not yet run
                self.store.sync_topics()
            finally:
                self.topic_lock.release()
            info = self.manager.topics().get(topic)
        return None if info is None else info.partitions

    def start(self, me) -> None:
        """Start the store's part (registration, watches, the first view) and the control thread."""
        self.store.start(self, me)
        self.server.on_turn = self.liveness.loop("the control thread", self.server.call_soon)
        self.server.start()
        self.liveness.thread("control-plane", self.server.thread)
        self.liveness.thread("topic-worker", self._worker.start())
        self.server.call_soon(self.store.bind_thread)  # both threads' store calls get deadlines
        self._worker.submit(self.store.bind_thread)
        self._every(self.config["log.retention.check.interval.ms"], self.manager.apply_retention, "retention")
        self._every(self.config["log.flush.scheduler.interval.ms"], self._flush_and_roll, "flush")
        self._every(self.config["offsets.retention.check.interval.ms"], self.coordinator.expire_offsets,
                    "offset expiry")
        for interval_ms, fn, name in self.store.timers():
            self._every(interval_ms, fn, name)
        self.transactions.start()
        self.liveness.thread("txn-marker-sender", self.transactions.sender)

    def set_wake(self, wake) -> None:
        """How the control thread wakes the processors' parked requests (the supervisor's wake board)."""
        self.store.wake = wake

    def controlled_shutdown(self, timeout: float) -> None:
        """Hand this broker's leaderships over (on the control thread) and wait for it, at most timeout s."""
        done = threading.Event()

        def run() -> None:
            try:
                self.store.controlled_shutdown()
            except MetadataStoreUnreachable as exc:  # partitioned: the session's end moves them, later
                log.warning("controlled shutdown: nothing handed over: %s", exc)
            except Exception:  # noqa: BLE001 - the session's end moves them anyway, later
                log.exception("controlled shutdown failed")
            finally:
                done.set()

        self.run_soon(run)
        done.wait(timeout)

    def replicas_offline(self, keys) -> None:
        """Partitions of ours on a log dir that failed (the supervisor saw it): the store tells the cluster."""
        keys = list(keys)
        self.run_soon(lambda: self.store.replicas_offline(keys))

    def begin_shutdown(self) -> None:
        """Answer parked group requests now, so processors can drain (call before stopping them)."""
        self.run_soon(self.coordinator.shutdown)

    def stop(self) -> None:
        for name in ("the control thread", "control-plane", "topic-worker", "txn-marker-sender"):
            self.liveness.forget(name)  # stopped on purpose from here on
        self.server.stop()
        self._worker.stop()
        self.transactions.stop()
        self.coordinator.close()

    # ------------------------------------------------------------ ops

    def auto_create_topics(self, names, reply) -> None:
        """Metadata's unknown topics: have the topic creator make those the budget allows; reply with the
        names left for later (past the budget, or being created for another request) once the others
        exist and the catalogue names them."""
        topics = self.manager.topics()
        wanted, deferred = [], []
        for name in dict.fromkeys(names):
            if name in topics:
                continue
            (deferred if name in self._auto_creating else wanted).append(name)
        cap = self.config["auto.create.topics.max.per.request"]
        deferred += wanted[cap:]
        wanted = wanted[:cap]
        granted = self._auto_budget.take(len(wanted))
        deferred += wanted[granted:]
        if not granted:
            reply(deferred)
            return
        making = wanted[:granted]
        self._auto_creating.update(making)

        def job() -> None:
            try:
                for name in making:
                    self._worker.let_control_go_first()
                    with self.topic_lock, self.manager.one_catalogue_write(write_at_end=False):
                        try:
                            self._auto_create(name)
                        except KafkaError as exc:
                            log.info("not auto-creating %r: %s", name, exc)
                # Once per request, outside the topic lock: the write waits on an fsync, and no child
                # forked meanwhile inherits anything of it.
                self.manager.write_pending_catalogue()
            finally:
                self.run_soon(made)

        def made() -> None:
            self._auto_creating.difference_update(making)
            reply(deferred)

        self._worker.submit(job)

    def _auto_create(self, name: str) -> None:
        """One auto-created topic (on the topic worker, holding the topic lock)."""
        if not self.manager.has_topic(name):
            self.store.create_topic(self.manager, name, self.config["num.partitions"], {},
                                    replication_factor=self.config["default.replication.factor"],
                                    limits=self.limits)
            log.info("auto-created topic %s", name)

    def apply_dynamic(self) -> None:
        """Give the dynamic broker configs in force to what reads them outside the log manager (the
        supervisor's connection limits, the controller's unclean election default)."""
        values = merged(self.manager.dynamic.get("brokers", {}), self.config["broker.id"])
        for hook in self.on_dynamic:
            hook(values)

    # ------------------------------------------------------------ housekeeping

    def _every(self, interval_ms: int, fn, name: str) -> None:
        """Run fn every interval_ms on the control thread. A round the cluster's store could not serve (a
        partition) is logged once, when the first one fails, and again when rounds succeed again."""
        waiting = False

        def tick() -> None:
            def round_() -> None:
                nonlocal waiting
                try:
                    fn()
                    if waiting:
                        log.info("housekeeping %s: done again", name)
                    waiting = False
                except MetadataStoreUnreachable as exc:
                    if not waiting:
                        log.warning("housekeeping %s: skipped while %s", name, exc)
                    waiting = True
                except Exception:  # noqa: BLE001 - a failed round is retried next time
                    log.exception("housekeeping %s failed", name)
                self.server.call_later(interval_ms / 1000, tick)

            self._locked_task(round_)()

        self.server.call_soon(lambda: self.server.call_later(interval_ms / 1000, tick))

    def _flush_and_roll(self) -> None:
        self.manager.flush_due()
        self.manager.roll_due()
        self.coordinator.flush_due(self.config["log.flush.interval.ms"])

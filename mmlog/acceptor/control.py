"""The control plane's request handlers and housekeeping timers, on the control thread.

Processors forward what changes cluster state: topic creation and deletion
(explicit, or automatic on Metadata), producer ids, and every consumer-group
request, which the group coordinator (`coordinator/`) serves. Topic admin and
producer ids go through the store: the data dir when standalone, ZooKeeper in
cluster mode (whose watches also land here, through `run_soon`). Housekeeping runs
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

from mmlog.ipc.control_channel import ControlServer
from mmlog.coordinator import GroupCoordinator
from mmlog.transactions.coordinator import TransactionCoordinator
from mmlog.cluster.limits import PartitionLimits, TokenBucket
from mmlog.acceptor.fork_guard import ForkGuard
from mmlog.acceptor.liveness import Liveness
from mmlog.acceptor.topic_worker import TopicWorker
from mmlog.config.broker import BrokerConfig
from mmlog.cluster import broker_configs
from mmlog.security import acl_changes
from mmlog.cluster.topic_configs import altered
from mmlog.config import quotas as client_quotas
from mmlog.config.dynamic import merged
from mmlog.errors import (InvalidRequest, KafkaError, MetadataStoreUnreachable, TopicAlreadyExists,
                          UnknownTopicOrPartition)
from mmlog.log.manager import LogManager
from mmlog.ipc.control_ops import (ALTER_CLIENT_QUOTAS, ALTER_CONFIGS, ALTER_REASSIGNMENTS, ALTER_SCRAM_CREDENTIALS,
                                   AUTO_CREATE_TOPICS, CREATE_ACLS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_ACLS,
                                   DELETE_TOPICS, ELECT_LEADERS, LIST_REASSIGNMENTS, NEXT_PRODUCER_ID)

log = logging.getLogger(__name__)

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # DescribeConfigs / AlterConfigs resource types


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


def _code(exc: KafkaError | None) -> tuple[int, str | None]:
    """(Kafka error code, message) of a per-partition result (0, None when it succeeded)."""
    return (0, None) if exc is None else (exc.code, str(exc) or None)


class ControlPlane:
    """Handlers for the control ops, bound to the broker's log manager and store."""

    def __init__(self, config: BrokerConfig, manager: LogManager, store, liveness: Liveness | None = None) -> None:
        """`store` is an `EmbeddedStore` or a `ZooKeeperStore`; `liveness` watches the threads it starts."""
        self.config = config
        self.liveness = liveness or Liveness(config["broker.stall.timeout.ms"] / 1000)
        self.manager = manager
        self.store = store
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
        self.server = ControlServer({
            CREATE_TOPICS: self._on_worker(self.create_topics),
            CREATE_PARTITIONS: self._on_worker(self.create_partitions),
            AUTO_CREATE_TOPICS: self._locked(self.auto_create_topics),
            DELETE_TOPICS: self._locked(self.delete_topics),
            NEXT_PRODUCER_ID: self._locked(self.next_producer_id),
        })
        self.server.handlers.update({op: self._locked(fn) for op, fn in self.admin_ops().items()})
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

    def create_topics(self, args, reply) -> None:
        """CreateTopics: each topic checked against the limits (the request's running total of partitions
        included) before anything is made, then made all or nothing; validate_only makes nothing.
        Each answer is (name, error code, message, (partitions, replication factor, config overrides) of
        the topic as made, or None): read here, under the topic lock, as Kafka's controller answers from
        the creation itself, so a deletion that follows at once cannot change or fail the answer."""
        results = []
        requested = 0
        for spec in args["topics"]:
            name = spec["name"]
            try:
                partitions = spec["partitions"]
                if spec["assignments"]:
                    raise InvalidRequest("manual replica assignment is not supported")
                if partitions == -1:
                    partitions = self.config["num.partitions"]
                factor = spec["replication_factor"]
                if factor == -1:
                    factor = self.config["default.replication.factor"]
                self.limits.check_topic(name, partitions, requested)
                configs = {k: v for k, v in spec["configs"].items() if v is not None}
                self.store.create_topic(self.manager, name, partitions, configs, args["validate_only"], factor,
                                        limits=self.limits)
                requested += partitions
                if not args["validate_only"]:
                    log.info("created topic %s with %d partitions", name, partitions)
                    info = self.manager.topic(name)  # under the topic lock: no deletion comes between
                    partitions, factor = info.partitions, len(info.replicas(0, self.config["broker.id"]))
                    configs = dict(info.config)
                results.append((name, 0, None, (partitions, factor, configs)))
            except KafkaError as exc:
                if not isinstance(exc, TopicAlreadyExists):
                    log.info("not creating topic %r: %s", name, exc)
                results.append((name, exc.code, str(exc), None))
        reply(results)

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

    def delete_topics(self, names, reply) -> None:
        results = []
        for name in names:
            try:
                if not self.config["delete.topic.enable"]:
                    raise InvalidRequest("delete.topic.enable is false")
                self.store.delete_topic(self.manager, name)
                self.coordinator.delete_topic(name)
                log.info("deleted topic %s", name)
                results.append((name, 0))
            except KafkaError as exc:
                results.append((name, exc.code))
        reply(results)

    def admin_ops(self) -> dict:
        """The admin APIs' ops."""
        return {ALTER_CONFIGS: self.alter_configs, ALTER_CLIENT_QUOTAS: self.alter_client_quotas,
                ALTER_SCRAM_CREDENTIALS: self.alter_scram_credentials,  # security
                CREATE_ACLS: self.create_acls, DELETE_ACLS: self.delete_acls,
                ELECT_LEADERS: self.elect_leaders, ALTER_REASSIGNMENTS: self.alter_reassignments,
                LIST_REASSIGNMENTS: self.list_reassignments}

    def elect_leaders(self, args, reply) -> None:
        """ElectLeaders (the controller decides): {"results": [(topic, p, code, message)]}, or every asked
        partition answered NOT_CONTROLLER here (Kafka's ZooKeeper-mode answer)."""
        try:
            results = self.store.elect_leaders(self.manager, args["election_type"], args["partitions"])
        except KafkaError as exc:
            keys = args["partitions"] or [(t, p) for t, i in self.manager.topics().items() for p in range(i.partitions)]
            results = {key: exc for key in keys}
        reply([(t, p, *_code(e)) for (t, p), e in results.items()])

    def alter_reassignments(self, args, reply) -> None:
        """AlterPartitionReassignments (controller only): (top-level (code, message), [(topic, p, code, message)])."""
        try:
            results = self.store.alter_reassignments(self.manager, args["partitions"])
        except KafkaError as exc:
            reply((_code(exc), []))
            return
        reply(((0, None), [(t, p, *_code(e)) for (t, p), e in results.items()]))

    def list_reassignments(self, args, reply) -> None:
        """ListPartitionReassignments (controller only): (top-level (code, message), [(topic, p, RS, AR, RR)])."""
        try:
            ongoing = self.store.list_reassignments(self.manager, args["partitions"])
        except KafkaError as exc:
            reply((_code(exc), []))
            return
        reply(((0, None), [(t, p, list(o.replicas), list(o.adding), list(o.removing))
                           for (t, p), o in ongoing.items()]))

    def create_partitions(self, args, reply) -> None:
        """CreatePartitions: each topic checked whole before it grows (validate_only grows none); a topic
        named twice in the request is INVALID_REQUEST, as Kafka answers."""
        names = [t["name"] for t in args["topics"]]
        dupes = {n for n in names if names.count(n) > 1}
        results = []
        for spec in args["topics"]:
            name = spec["name"]
            try:
                if name in dupes:
                    raise InvalidRequest("Duplicate topic in request.")
                self.store.create_partitions(self.manager, name, spec["count"], spec["assignments"],
                                             args["validate_only"], limits=self.limits)
                if not args["validate_only"]:
                    log.info("topic %s grown to %d partitions", name, spec["count"])
                results.append((name, 0, None))
            except KafkaError as exc:
                log.info("not growing topic %r: %s", name, exc)
                results.append((name, exc.code, str(exc)))
        reply(results)

    def alter_configs(self, args, reply) -> None:
        """AlterConfigs / IncrementalAlterConfigs of topics (`topic_configs.py`) and brokers
        (`broker_configs.py`): each resource checked whole, then stored and applied without a restart
        (validate_only: checked only)."""
        results = []
        for kind, name, changes in args["resources"]:
            try:
                if kind == BROKER_RESOURCE:
                    self._alter_broker_config(name, changes, args["incremental"], args["validate_only"])
                    results.append((kind, name, 0, None))
                    continue
                if kind != TOPIC_RESOURCE:
                    raise InvalidRequest(f"AlterConfigs is only supported for topics and brokers, but resource "
                                         f"type is {kind}")
                if not self.manager.has_topic(name):
                    self.store.sync_topics()  # cluster mode: made through another broker a moment ago?
                if not self.manager.has_topic(name):
                    raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
                overrides = altered(self.manager.topic(name).config, changes, args["incremental"],
                                    self.manager.defaults)
                if not args["validate_only"]:
                    self.store.alter_topic_config(self.manager, name, overrides)
                    log.info("topic %s: config overrides now %s", name, overrides)
                results.append((kind, name, 0, None))
            except KafkaError as exc:
                log.info("not altering the config of %r: %s", name, exc)
                results.append((kind, name, exc.code, str(exc)))
        reply(results)

    def alter_scram_credentials(self, args, reply) -> None:
        """AlterUserScramCredentials, checked by the processor: stored (ZooKeeper or the data dir's
        credentials.json) and mirrored to the file every processor authenticates from."""
        reply(self.store.alter_scram_credentials(args["deletions"], args["upsertions"]))

    def create_acls(self, args, reply) -> None:
        """CreateAcls, checked by the processor: stored (ZooKeeper or the data dir's acls.json) and mirrored
        to the file every processor authorises from; [(code, message)] per binding."""
        reply(self.store.create_acls(acl_changes.bindings_of(args)))

    def delete_acls(self, args, reply) -> None:
        """DeleteAcls: per filter, the bindings it removed (as tuples)."""
        reply([[tuple(b) for b in gone] for gone in self.store.delete_acls(acl_changes.filters_of(args))])

    def _alter_broker_config(self, name: str, changes, incremental: bool, validate_only: bool) -> None:
        """One broker resource: this broker's level or the cluster default, checked, stored, applied."""
        level = broker_configs.level_of(name, self.config["broker.id"])
        levels = dict(self.manager.dynamic.get("brokers", {}))
        values = broker_configs.altered(levels.get(level, {}), changes, incremental, self.config.values,
                                        self.manager.static_defaults)
        if validate_only:
            return
        self.store.alter_broker_config(self.manager, level, values)
        log.info("dynamic broker config %s now %s", level, values)
        self.apply_dynamic()

    def apply_dynamic(self) -> None:
        """Give the dynamic broker configs in force to what reads them outside the log manager (the
        supervisor's connection limits, the controller's unclean election default)."""
        values = merged(self.manager.dynamic.get("brokers", {}), self.config["broker.id"])
        for hook in self.on_dynamic:
            hook(values)

    def alter_client_quotas(self, args, reply) -> None:
        """AlterClientQuotas: each entry checked (`config/quotas.py`), then the valid ones stored together
        (validate_only: none). Processors take them with the catalogue; ZooKeeper carries them to the
        other brokers."""
        quotas = {k: dict(v) for k, v in self.manager.dynamic.get("quotas", {}).items()}
        results, changed = [], False
        for entity, ops in args["entries"]:
            try:
                where = client_quotas.entity_path(entity)
                values = client_quotas.altered(quotas.get(where, {}), ops)
                if values != quotas.get(where, {}):
                    quotas[where] = values
                    changed = True
                results.append((entity, 0, None))
            except client_quotas.QuotaError as exc:
                results.append((entity, InvalidRequest.code, str(exc)))
        if changed and not args["validate_only"]:
            self.store.set_client_quotas(self.manager, {k: v for k, v in quotas.items() if v})
            log.info("client quotas now %s", self.manager.dynamic.get("quotas", {}))
        reply(results)

    def next_producer_id(self, _args, reply) -> None:
        reply(self.store.next_producer_id())

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

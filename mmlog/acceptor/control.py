"""The control plane's request handlers and housekeeping timers, on the control thread.

Processors forward what changes cluster state: topic creation and deletion
(explicit, or automatic on Metadata), producer ids, and every consumer-group
request, which the group coordinator (`coordinator/`) serves. Topic admin and
producer ids go through the store: the data dir when standalone, ZooKeeper in
cluster mode (whose watches also land here, through `run_soon`). Housekeeping runs
here too, on timers: retention every `log.retention.check.interval.ms`, the
flush.ms / segment.ms checks every `log.flush.scheduler.interval.ms`, offset
expiry every `offsets.retention.check.interval.ms`, and the coordinator's session
and rebalance timers. Everything runs on the one control thread, holding the fork
lock, so the supervisor never forks while a handler holds a partition lock or is
half way through a catalogue write.

Limits (`limits.py`) are checked before anything is created. Auto-creation asked
for by Metadata is budgeted (`auto.create.topics.max.per.request`, `.max.per.second`)
and made in steps of about `AUTO_CREATE_STEP_S` each, one catalogue write per step,
queued behind whatever else the control thread has to do: group heartbeats keep
being answered in milliseconds while thousands of topics are created. A name past
the budget, or already being created for another request, is answered
LEADER_NOT_AVAILABLE (Kafka's answer for a topic being created) and the client
asks again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from mmlog.ipc.control_channel import ControlServer
from mmlog.acceptor.coordinator import GroupCoordinator
from mmlog.acceptor.transactions.coordinator import TransactionCoordinator
from mmlog.acceptor.limits import PartitionLimits, TokenBucket
from mmlog.config.broker import BrokerConfig
from mmlog.acceptor.topic_configs import altered
from mmlog.errors import InvalidConfig, InvalidRequest, KafkaError, TopicAlreadyExists, UnknownTopicOrPartition
from mmlog.log.manager import LogManager

log = logging.getLogger(__name__)

# How long one auto-creation step may keep the control thread (then it queues the next step
# behind the work that arrived meanwhile). One topic is created per step at least.
AUTO_CREATE_STEP_S = 0.01
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # DescribeConfigs / AlterConfigs resource types
THROTTLE_RATE = "follower.replication.throttled.rate"


def _code(exc: KafkaError | None) -> tuple[int, str | None]:
    """(Kafka error code, message) of a per-partition result (0, None when it succeeded)."""
    return (0, None) if exc is None else (exc.code, str(exc) or None)


@dataclass
class _AutoCreation:
    """One Metadata request's topics to auto-create, answered once all are made."""

    names: deque
    deferred: list[str]
    reply: object


class ControlPlane:
    """Handlers for the control ops, bound to the broker's log manager and store."""

    def __init__(self, config: BrokerConfig, manager: LogManager, store, fork_lock: threading.Lock) -> None:
        """`store` is an `EmbeddedStore` or a `ZooKeeperStore`."""
        self.config = config
        self.manager = manager
        self.store = store
        self.fork_lock = fork_lock
        self.limits = PartitionLimits(config)
        self._auto_budget = TokenBucket(config["auto.create.topics.max.per.second"])
        self._auto_queue: deque[_AutoCreation] = deque()
        self._auto_creating: set[str] = set()
        self.server = ControlServer({
            "create_topics": self._locked(self.create_topics),
            "auto_create_topics": self._locked(self.auto_create_topics),
            "delete_topics": self._locked(self.delete_topics),
            "next_producer_id": self._locked(self.next_producer_id),
        })
        self.server.handlers.update({op: self._locked(fn) for op, fn in self.admin_ops().items()})
        self.coordinator = GroupCoordinator(config, store.offset_store(self.run_soon), self._partition_count,
                                            self._call_later, owns=store.owns_group)
        for note in self.coordinator.load():
            log.warning("recovered: %s", note)
        self.server.handlers.update({op: self._locked(fn) for op, fn in self.coordinator.ops().items()})
        self.transactions = TransactionCoordinator(config, manager, store, self._call_later, self.run_soon)
        self.server.handlers.update({op: self._locked(fn) for op, fn in self.transactions.ops().items()})

    def _locked(self, fn):
        def run(args, reply):
            with self.fork_lock:
                fn(args, reply)

        return run

    def _locked_task(self, fn):
        def run():
            with self.fork_lock:
                fn()

        return run

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
        """The coordinator's timers: on the control thread, holding the fork lock like the ops."""
        self.server.call_later(delay, self._locked_task(fn))

    def _partition_count(self, topic: str) -> int | None:
        info = self.manager.topics().get(topic)
        if info is None:  # cluster mode: created through another broker, our watch not yet run
            self.store.sync_topics()
            info = self.manager.topics().get(topic)
        return None if info is None else info.partitions

    def start(self, me) -> None:
        """Start the store's part (registration, watches, the first view) and the control thread."""
        self.store.start(self, me)
        self.server.start()
        self._every(self.config["log.retention.check.interval.ms"], self.manager.apply_retention, "retention")
        self._every(self.config["log.flush.scheduler.interval.ms"], self._flush_and_roll, "flush")
        self._every(self.config["offsets.retention.check.interval.ms"], self.coordinator.expire_offsets,
                    "offset expiry")
        for interval_ms, fn, name in self.store.timers():
            self._every(interval_ms, fn, name)
        self.transactions.start()

    def set_wake(self, wake) -> None:
        """How the control thread wakes the processors' parked requests (the supervisor's wake board)."""
        self.store.wake = wake

    def controlled_shutdown(self, timeout: float) -> None:
        """Hand this broker's leaderships over (on the control thread) and wait for it, at most timeout s."""
        done = threading.Event()

        def run() -> None:
            try:
                self.store.controlled_shutdown()
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
        self.server.stop()
        self.transactions.stop()
        self.coordinator.close()

    # ------------------------------------------------------------ ops

    def create_topics(self, args, reply) -> None:
        """CreateTopics: each topic checked against the limits (the request's running total of partitions
        included) before anything is made, then made all or nothing; validate_only makes nothing."""
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
                results.append((name, 0, None))
            except KafkaError as exc:
                if not isinstance(exc, TopicAlreadyExists):
                    log.info("not creating topic %r: %s", name, exc)
                results.append((name, exc.code, str(exc)))
        reply(results)

    def auto_create_topics(self, names, reply) -> None:
        """Metadata's unknown topics: create those the budget allows, in steps; reply with the names left
        for later (past the budget, or being created for another request) once the others exist."""
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
        self._auto_creating.update(wanted[:granted])
        self._auto_queue.append(_AutoCreation(deque(wanted[:granted]), deferred, reply))
        if len(self._auto_queue) == 1:
            self.run_soon(self._auto_create_step)

    def _auto_create_step(self) -> None:
        """Create queued topics for about AUTO_CREATE_STEP_S (at least one), then write the catalogue
        beside this thread; the answers and the next step follow, behind whatever arrived meanwhile."""
        deadline = time.monotonic() + AUTO_CREATE_STEP_S
        done = []
        tried = 0
        with self.manager.one_catalogue_write(write_at_end=False):
            while self._auto_queue and (not tried or time.monotonic() < deadline):
                tried += 1
                job = self._auto_queue[0]
                name = job.names.popleft()
                try:
                    if name not in self.manager.topics():
                        self.store.create_topic(self.manager, name, self.config["num.partitions"], {},
                                                replication_factor=self.config["default.replication.factor"],
                                                limits=self.limits)
                        log.info("auto-created topic %s", name)
                except KafkaError as exc:
                    log.info("not auto-creating %r: %s", name, exc)
                finally:
                    self._auto_creating.discard(name)
                if not job.names:
                    done.append(self._auto_queue.popleft())
        # The catalogue write waits on an fsync (up to ~100 ms on a busy disk): a thread of its own
        # makes it, under the manager's lock, while this thread goes on answering heartbeats; the
        # answers and the next step come back here once it is written. Forking meanwhile is safe:
        # a processor never uses the main process's manager or the file being written.
        def write() -> None:
            try:
                self.manager.write_pending_catalogue()
            except Exception:  # noqa: BLE001 - the next write carries these topics too
                log.exception("writing the topic catalogue failed")
            finally:
                self.run_soon(lambda: self._auto_created(done))

        threading.Thread(target=write, name="catalogue-writer", daemon=True).start()

    def _auto_created(self, done: list[_AutoCreation]) -> None:
        """The catalogue is written: answer (the processors reload it and find the topics), go on."""
        for job in done:
            job.reply(job.deferred)
        if self._auto_queue:
            self._auto_create_step()

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
        """The admin APIs' ops (issue #18)."""
        return {"create_partitions": self.create_partitions, "alter_configs": self.alter_configs,
                "elect_leaders": self.elect_leaders, "alter_reassignments": self.alter_reassignments,
                "list_reassignments": self.list_reassignments}

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
        """AlterConfigs / IncrementalAlterConfigs of topics (`topic_configs.py`): each resource checked whole,
        then stored and applied to its running partitions (validate_only: checked only). Broker resources
        are refused: this broker's settings change only through server.properties and a restart."""
        results = []
        for kind, name, changes in args["resources"]:
            try:
                if kind == BROKER_RESOURCE and name == "" and hasattr(self.store, "alter_broker_config"):
                    results.append((kind, name, *self._alter_throttle(changes, args)))
                    continue
                if kind != TOPIC_RESOURCE:
                    raise InvalidRequest(f"resource type {kind}: only topic configs can be altered; broker "
                                         "settings are read from server.properties at start")
                if name not in self.manager.topics():
                    self.store.sync_topics()  # cluster mode: made through another broker a moment ago?
                if name not in self.manager.topics():
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

    def _alter_throttle(self, changes, args) -> tuple[int, str | None]:
        """The one dynamic broker config (every broker's, resource name ""): follower.replication.throttled.rate."""
        try:
            out = {}
            for key, op, value in changes:
                if key != THROTTLE_RATE:
                    raise InvalidRequest(f"Cannot update these configs dynamically: {{{key}}} (mmlog's only dynamic "
                                         f"broker config is {THROTTLE_RATE}; the rest are read from server.properties)")
                if (op == 1 and args["incremental"]) or value is None:
                    out[key] = None
                elif not value.isdigit() or int(value) <= 0:
                    raise InvalidConfig(f"Invalid value {value} for configuration {key}: must be a positive integer")
                else:
                    out[key] = value
            if not args["validate_only"]:
                self.store.alter_broker_config("", out)
            return 0, None
        except KafkaError as exc:
            return exc.code, str(exc)

    def next_producer_id(self, _args, reply) -> None:
        reply(self.store.next_producer_id())

    # ------------------------------------------------------------ housekeeping

    def _every(self, interval_ms: int, fn, name: str) -> None:
        def tick() -> None:
            try:
                with self.fork_lock:
                    fn()
            except Exception:  # noqa: BLE001 - a failed round is retried next time
                log.exception("housekeeping %s failed", name)
            self.server.call_later(interval_ms / 1000, tick)

        self.server.call_soon(lambda: self.server.call_later(interval_ms / 1000, tick))

    def _flush_and_roll(self) -> None:
        self.manager.flush_due()
        self.manager.roll_due()
        self.coordinator.flush_due(self.config["log.flush.interval.ms"])

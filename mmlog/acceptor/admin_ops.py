"""The control plane's topic and admin ops: what changes the topic catalogue, the configs, quotas, users,
ACLs and leaderships, done through the store (the data dir when standalone, ZooKeeper in cluster mode).

Each op is `op(args, reply)` (`mmlog/ipc/control_ops.py` says what each carries and answers), run by the
control plane (`control.py`) holding the topic lock: CreateTopics and CreatePartitions on the topic
worker, the others on the control thread. Limits (`limits.py`) are checked before anything is created.
"""

from __future__ import annotations

import logging
from typing import Callable

from mmlog.cluster import broker_configs
from mmlog.cluster.limits import PartitionLimits
from mmlog.cluster.topic_configs import altered
from mmlog.config import quotas as client_quotas
from mmlog.config.broker import BrokerConfig
from mmlog.errors import InvalidRequest, KafkaError, TopicAlreadyExists, UnknownTopicOrPartition
from mmlog.ipc.control_ops import (ALTER_CLIENT_QUOTAS, ALTER_CONFIGS, ALTER_REASSIGNMENTS, ALTER_SCRAM_CREDENTIALS,
                                   CREATE_ACLS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_ACLS, DELETE_TOPICS,
                                   ELECT_LEADERS, LIST_REASSIGNMENTS, NEXT_PRODUCER_ID)
from mmlog.log.manager import LogManager
from mmlog.security import acl_changes

log = logging.getLogger(__name__)

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # DescribeConfigs / AlterConfigs resource types


def _code(exc: KafkaError | None) -> tuple[int, str | None]:
    """(Kafka error code, message) of a per-partition result (0, None when it succeeded)."""
    return (0, None) if exc is None else (exc.code, str(exc) or None)


class AdminOps:
    """The topic and admin ops, bound to the broker's log manager and store."""

    def __init__(self, config: BrokerConfig, manager: LogManager, store, limits: PartitionLimits,
                 topic_deleted: Callable[[str], None], apply_dynamic: Callable[[], None]) -> None:
        """`topic_deleted(name)`: a topic went (the group coordinator drops its offsets); `apply_dynamic()`:
        the dynamic broker configs changed (the control plane gives them to what reads them)."""
        self.config = config
        self.manager = manager
        self.store = store
        self.limits = limits
        self.topic_deleted = topic_deleted
        self.apply_dynamic = apply_dynamic

    def making_ops(self) -> dict:
        """The ops that make partitions: the control plane runs them on the topic worker."""
        return {CREATE_TOPICS: self.create_topics, CREATE_PARTITIONS: self.create_partitions}

    def ops(self) -> dict:
        """The other ops, run on the control thread."""
        return {DELETE_TOPICS: self.delete_topics, NEXT_PRODUCER_ID: self.next_producer_id,
                ALTER_CONFIGS: self.alter_configs, ALTER_CLIENT_QUOTAS: self.alter_client_quotas,
                ALTER_SCRAM_CREDENTIALS: self.alter_scram_credentials,  # security
                CREATE_ACLS: self.create_acls, DELETE_ACLS: self.delete_acls,
                ELECT_LEADERS: self.elect_leaders, ALTER_REASSIGNMENTS: self.alter_reassignments,
                LIST_REASSIGNMENTS: self.list_reassignments}

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

    def delete_topics(self, names, reply) -> None:
        results = []
        for name in names:
            try:
                if not self.config["delete.topic.enable"]:
                    raise InvalidRequest("delete.topic.enable is false")
                self.store.delete_topic(self.manager, name)
                self.topic_deleted(name)  # its committed offsets go too
                log.info("deleted topic %s", name)
                results.append((name, 0))
            except KafkaError as exc:
                results.append((name, exc.code))
        reply(results)

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
        self.apply_dynamic()  # to what reads them outside the log manager

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

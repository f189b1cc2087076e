"""Cluster mode: configs, quotas, users and ACLs in ZooKeeper. AlterConfigs writes
`/config/topics/<name>`, which every broker watches and applies to its running partitions; dynamic
broker configs and client quotas go through `/config/brokers`, `/config/clients`, `/config/users` and
the change notifications under `/config/changes` (`dynamic_configs.py`); SCRAM credentials live in
`/config/users/<name>` and are mirrored to every broker's credentials.json; ACLs live in Kafka's
`/kafka-acl` nodes (`security/zookeeper_acls.py`). `ZooKeeperConfigs` is a part of `ZooKeeperStore`,
which holds the state named below."""

from __future__ import annotations

import logging

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import DataWatch

from mmlog.cluster import paths
from mmlog.cluster.dynamic_configs import update_config
from mmlog.config.broker import BROKER_SETTINGS
from mmlog.config.settings import ConfigError
from mmlog.errors import KafkaError
from mmlog.log.manager import LogManager
from mmlog.security import credentials, scram, users as users_module
from mmlog.cluster.zookeeper_state import ZooKeeperState

log = logging.getLogger(__name__)


class ZooKeeperConfigs(ZooKeeperState):
    """Topic and broker configs, client quotas, SCRAM users and ACLs, written to ZooKeeper and applied here."""

    # ------------------------------------------------------------ SCRAM credentials and ACLs

    def _users_changed(self, names) -> None:
        """/config/users changed (kazoo's thread): watch each user's node, mirror them all."""
        for name in set(names) - self._user_watches:
            self._user_watches.add(name)
            DataWatch(self.zk, paths.user_config(name), lambda *_: self._soon(self._mirror_users))
        self._soon(self._mirror_users)

    def _mirror_users(self) -> None:
        """Copy every user's credentials from ZooKeeper to credentials.json, which processors read."""
        users = {}
        for name in self.zk.get_children(paths.USER_CONFIGS):
            try:
                config = paths.load(self.zk.get(paths.user_config(name))[0]).get("config", {})
            except NoNodeError:
                continue
            config = {k: v for k, v in config.items() if k in scram.MECHANISMS}  # the node holds quotas too
            if config:
                users[name] = config
        credentials.save(credentials.path_in(self.dir), users)

    def alter_scram_credentials(self, deletions, upsertions) -> dict:
        """Write each user's /config/users/<name> (the version read, so a concurrent change through
        another broker is retried, not lost), then mirror here; others mirror through their watches."""
        results = {}
        for name in dict.fromkeys([d[0] for d in deletions] + [u[0] for u in upsertions]):
            mine_d = [d for d in deletions if d[0] == name]
            mine_u = [u for u in upsertions if u[0] == name]

            def change(config: dict, name=name, mine_d=mine_d, mine_u=mine_u) -> dict:
                users = {name: config}  # its quotas too: apply changes only the mechanisms
                results.update(users_module.apply(users, mine_d, mine_u))  # a retry's results replace these
                return users.get(name, {})

            update_config(self.zk, paths.user_config(name), change, create_empty=False)
        self._mirror_users()
        return results

    def create_acls(self, bindings) -> list[tuple[int, str | None]]:
        """Kafka's ACL nodes, versioned writes and change notifications (zookeeper/acls.py), mirrored here."""
        return self.acls.create(bindings)

    def delete_acls(self, filters) -> list[list]:
        return self.acls.delete(filters)

    # ------------------------------------------------------------ configs and quotas

    def alter_topic_config(self, manager: LogManager, name: str, overrides: dict[str, str]) -> None:
        """Write /config/topics/<name> (Kafka's node), then apply here; the other brokers apply it through
        their watch on that node."""
        path = paths.topic_config(name)
        data = paths.dump({"version": 1, "config": overrides})
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        manager.alter_topic_config(name, overrides)
        if self.replicas is not None:
            self.replicas.write_plan()  # follower.replication.throttled.replicas may have changed

    def alter_broker_config(self, manager: LogManager, level: str, values: dict[str, str]) -> None:
        """Write /config/brokers/<level> and a change notification, then apply here; the other brokers
        apply it through their watch on /config/changes (`dynamic_configs.py`)."""
        self.dynamic.write_broker(level, values)
        manager.set_broker_level(level, values)

    def set_client_quotas(self, manager: LogManager, quotas: dict[str, dict]) -> None:
        """Write the changed /config/clients and /config/users nodes, then apply here."""
        self.dynamic.write_quotas(manager.dynamic.get("quotas", {}), quotas)
        manager.set_dynamic("quotas", quotas)

    def _load_dynamic(self) -> None:
        """A config change notification (or start-up): take the broker levels and quotas ZooKeeper holds."""
        try:
            brokers, quotas = self.dynamic.read()
            if quotas != self.manager.dynamic.get("quotas", {}):
                self.manager.set_dynamic("quotas", quotas)
                log.info("client quotas now %s", quotas)
            if brokers != self.manager.dynamic.get("brokers", {}):
                self.manager.set_dynamic("brokers", brokers)
                log.info("dynamic broker configs now %s", brokers)
            if self.control is not None:
                self.control.apply_dynamic()
        except (ConfigError, ValueError) as exc:  # written by another tool without our checks: keep what we had
            log.error("cannot apply the dynamic configs in ZooKeeper: %s", exc)

    def _dynamic_applied(self, values: dict[str, str]) -> None:
        """The controller's unclean election default and the replica fetcher's throttle follow the dynamic
        broker configs (else server.properties')."""
        setting = BROKER_SETTINGS["unclean.leader.election.enable"]
        self.controller.unclean_default = setting.parse(values.get(setting.name, self.config[setting.name]))
        setting = BROKER_SETTINGS["follower.replication.throttled.rate"]
        rate = setting.parse(values.get(setting.name, self.config[setting.name]))
        rate = rate if rate < 2**63 - 1 else None
        if self.replicas is not None and rate != self.replicas.throttle_rate:
            self.replicas.throttle_rate = rate
            self.replicas.write_plan()
            log.info("follower.replication.throttled.rate: %s", "unlimited" if rate is None else f"{rate} B/s")

    def _config_changed(self, name: str, topic_id: str, data: bytes) -> None:
        """A topic's config node changed (control thread): apply it if it is not what we hold."""
        info = self.manager.topics().get(name)
        if info is None or info.topic_id != topic_id:
            return
        config = {k: str(v) for k, v in paths.load(data).get("config", {}).items()}
        if config != info.config:
            try:
                self.manager.alter_topic_config(name, config)
                log.info("topic %s: config overrides now %s", name, config)
                if self.replicas is not None:
                    self.replicas.write_plan()  # follower.replication.throttled.replicas may have changed
            except KafkaError as exc:
                log.error("cannot apply the config of topic %s from ZooKeeper: %s", name, exc)

"""Dynamic broker configs and client quotas in ZooKeeper, mirrored into each broker's catalogue.

Nodes are Kafka's (`paths.py`): `/config/brokers/<id>` and `/config/brokers/<default>`,
`/config/clients/<id>`, `/config/users/<user>[/clients/<id>]`, each
`{"version":1,"config":{...}}`. A broker that changes one writes the node, then a
sequential change notification `/config/changes/config_change_<seq>` (as Kafka's
ConfigChangeNotifier), then applies it to its own catalogue. A node is written with the version it was read
at, and read again if another writer got there first: a user's node also holds its SCRAM
credentials (Kafka's layout), and a quota written over a stale read would put back the
credentials a concurrent AlterUserScramCredentials had just changed. Every broker watches
`/config/changes` and, on a new notification, reads its two broker levels and every
quota entity again (a handful of small nodes) and applies what differs: the log
manager writes the catalogue, the processors pick it up within `CATALOGUE_CHECK_S`.
Only the newest `KEEP_CHANGES` notifications are kept.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError

from mmlog.cluster import paths
from mmlog.config.dynamic import DEFAULT

log = logging.getLogger(__name__)

KEEP_CHANGES = 50
QUOTA_VALUE = {"producer_byte_rate": int, "consumer_byte_rate": int, "request_percentage": float}


class DynamicConfigs:
    """Read, write and watch the dynamic config nodes for one broker."""

    def __init__(self, zk, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id

    # ------------------------------------------------------------ writing

    def write_broker(self, level: str, values: dict[str, str]) -> None:
        self._write(f"{paths.BROKER_CONFIGS}/{level}", lambda _: values, f"brokers/{level}")

    def write_quotas(self, old: dict[str, dict], new: dict[str, dict]) -> None:
        """Write the entities whose quotas changed (an empty config for those removed)."""
        for where in sorted(set(old) | set(new)):
            if old.get(where) != new.get(where):
                quotas = {k: str(v) for k, v in new.get(where, {}).items()}
                self._write(f"{paths.CONFIG}/{where}", lambda config, quotas=quotas: _with_quotas(config, quotas),
                            where)

    def _write(self, path: str, change, entity: str) -> None:
        """update_config, then a change notification for every broker."""
        update_config(self.zk, path, change)
        self.zk.create(f"{paths.CONFIG_CHANGES}/config_change_", paths.dump({"version": 2, "entity_path": entity}),
                       sequence=True, makepath=True)
        self._prune()

    def _prune(self) -> None:
        changes = sorted(self.zk.get_children(paths.CONFIG_CHANGES))
        for name in changes[:-KEEP_CHANGES]:
            try:
                self.zk.delete(f"{paths.CONFIG_CHANGES}/{name}")
            except NoNodeError:
                pass  # another broker pruned it

    # ------------------------------------------------------------ reading

    def read(self) -> tuple[dict[str, dict], dict[str, dict]]:
        """(broker levels {DEFAULT / own id: configs}, quotas {entity path: {key: value}}) as stored now."""
        brokers = {level: self._config(f"{paths.BROKER_CONFIGS}/{level}") for level in (DEFAULT, str(self.broker_id))}
        quotas = {}
        for where in self._quota_entities():
            config = self._config(f"{paths.CONFIG}/{where}")
            values = {k: QUOTA_VALUE[k](float(v)) for k, v in config.items() if k in QUOTA_VALUE}
            if values:
                quotas[where] = values
        return {k: v for k, v in brokers.items() if v}, quotas

    def _quota_entities(self) -> list[str]:
        found = [f"clients/{c}" for c in self._children("/config/clients")]
        for user in self._children("/config/users"):
            found.append(f"users/{user}")
            found += [f"users/{user}/clients/{c}" for c in self._children(f"/config/users/{user}/clients")]
        return found

    def _children(self, path: str) -> list[str]:
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []

    def _config(self, path: str) -> dict:
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return {}
        return dict(paths.load(data).get("config", {})) if data else {}


def update_config(zk, path: str, change, create_empty: bool = True) -> None:
    """Set the node's config to change(its config now: {} if there is no node), by a write of the version
    read, read again whenever another writer came between. A node that does not exist is created
    (unless the new config is empty and not `create_empty`)."""
    while True:
        try:
            data, stat = zk.get(path)
            config, version = (dict(paths.load(data).get("config", {})) if data else {}), stat.version
        except NoNodeError:
            config, version = {}, None
        new = change(config)
        doc = paths.dump({"version": 1, "config": new})
        try:
            if version is not None:
                zk.set(path, doc, version=version)
            elif new or create_empty:
                zk.create(path, doc, makepath=True)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # changed, created or deleted since the read: read it again


def _with_quotas(config: dict, quotas: dict[str, str]) -> dict:
    """A quota entity's config with its quotas replaced; what else it holds (a user's SCRAM credentials) kept."""
    return {**{k: v for k, v in config.items() if k not in QUOTA_VALUE}, **quotas}

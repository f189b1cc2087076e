"""Dynamic broker configs and client quotas in ZooKeeper, mirrored into each broker's catalogue.

Nodes are Kafka's (`paths.py`): `/config/brokers/<id>` and `/config/brokers/<default>`,
`/config/clients/<id>`, `/config/users/<user>[/clients/<id>]`, each
`{"version":1,"config":{...}}`. A broker that changes one writes the node, then a
sequential change notification `/config/changes/config_change_<seq>` (as Kafka's
ConfigChangeNotifier), then applies it to its own catalogue. Every broker watches
`/config/changes` and, on a new notification, reads its two broker levels and every
quota entity again (a handful of small nodes) and applies what differs: the log
manager writes the catalogue, the processors pick it up within `CATALOGUE_CHECK_S`.
Only the newest `KEEP_CHANGES` notifications are kept.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import NoNodeError, NodeExistsError

from mmlog.acceptor.zookeeper import paths
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
        self._write(f"{paths.BROKER_CONFIGS}/{level}", values, f"brokers/{level}")

    def write_quotas(self, old: dict[str, dict], new: dict[str, dict]) -> None:
        """Write the entities whose quotas changed (an empty config for those removed)."""
        for where in sorted(set(old) | set(new)):
            if old.get(where) != new.get(where):
                path = f"{paths.CONFIG}/{where}"
                # A user's node holds its SCRAM credentials too (Kafka's layout): those stay as they are.
                kept = {k: v for k, v in self._config(path).items() if k not in QUOTA_VALUE}
                self._write(path, {**kept, **{k: str(v) for k, v in new.get(where, {}).items()}}, where)

    def _write(self, path: str, config: dict, entity: str) -> None:
        data = paths.dump({"version": 1, "config": config})
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)
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

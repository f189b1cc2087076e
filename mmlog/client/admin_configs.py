"""The admin client's broker-wide settings: dynamic broker configs and client quotas.

A mixin of `Admin` (admin.py); a topic's own configs are with the topics there."""

from __future__ import annotations

from mmlog.errors import error_for_code
from mmlog.protocol.messages import (alter_client_quotas, describe_client_quotas, describe_configs,
                                     incremental_alter_configs)

BROKER_RESOURCE = 4  # DescribeConfigs / IncrementalAlterConfigs resource type


def _entity_text(entity) -> str:
    """A quota entity as `mmlog quotas` prints it: user=alice,client-id=<default>."""
    return ",".join(f"{e.entity_type}={'<default>' if e.entity_name is None else e.entity_name}" for e in entity)


class ConfigAdmin:
    """Dynamic configs of a broker or of the cluster-wide default, and client quotas."""

    def alter_broker_config(self, broker: int | None, set: dict[str, str] | None = None, delete: list[str] = (),
                            validate_only: bool = False) -> None:
        """Set and delete dynamic configs of one broker (its id) or, with None, the cluster-wide default
        (IncrementalAlterConfigs); InvalidConfig for a setting that only takes effect at start."""
        node = self._controller() if broker is None else broker
        if broker is not None and broker not in self.cluster.brokers:
            self.cluster.refresh([])
        configs = [{"name": k, "config_operation": 0, "value": str(v)} for k, v in (set or {}).items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        body = self._request(node, incremental_alter_configs.API_KEY, 0,
                             incremental_alter_configs.REQUEST(validate_only=validate_only, resources=[
                                 {"resource_type": BROKER_RESOURCE, "resource_name": "" if broker is None else
                                  str(broker), "configs": configs}]))
        self._raise_first((r.error_code, f"broker {r.resource_name or '<default>'}: {r.error_message or ''}")
                          for r in body.responses)

    def broker_config(self, broker: int) -> dict[str, tuple[str | None, int]]:
        """A broker's settings: name -> (value, Kafka config_source: 2 dynamic, 3 dynamic default, 4 static,
        5 default)."""
        if broker not in self.cluster.brokers:
            self.cluster.refresh([])
        body = self._request(broker, describe_configs.API_KEY, 1, describe_configs.REQUEST(
            resources=[{"resource_type": BROKER_RESOURCE, "resource_name": str(broker), "configuration_keys": None}]))
        [result] = body.results
        if result.error_code:
            raise error_for_code(result.error_code, result.error_message or str(broker))
        return {c.name: (c.value, c.config_source) for c in result.configs}

    def alter_client_quotas(self, changes: dict[tuple, dict[str, float | None]], validate_only: bool = False) -> None:
        """Set (a number) or remove (None) quotas: {entity: {key: value}}, an entity being a tuple of
        (type, name) pairs, type "user" or "client-id", name None for `<default>`; keys producer_byte_rate,
        consumer_byte_rate (bytes/s) and request_percentage. InvalidRequest for a bad entity, key or value."""
        body = self._request(self._controller(), alter_client_quotas.API_KEY, 0, alter_client_quotas.REQUEST(
            validate_only=validate_only, entries=[
                {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                 "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                         for k, v in ops.items()]}
                for entity, ops in changes.items()]))
        self._raise_first((e.error_code, f"{_entity_text(e.entity)}: {e.error_message or ''}") for e in body.entries)

    def describe_client_quotas(self, filters: list[tuple[str, int, str | None]] = (),
                               strict: bool = False) -> dict[tuple, dict[str, float]]:
        """The quotas set: {entity: {key: value}}; filters are (type, match type 0 exact / 1 default / 2 any,
        name), as DescribeClientQuotas takes them (none: every entity)."""
        body = self._request(self._controller(), describe_client_quotas.API_KEY, 0, describe_client_quotas.REQUEST(
            strict=strict, components=[{"entity_type": t, "match_type": m, "match": n} for t, m, n in filters]))
        if body.error_code:
            raise error_for_code(body.error_code, body.error_message or "DescribeClientQuotas")
        return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                for entry in body.entries or []}

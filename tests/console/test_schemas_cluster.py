"""On a cluster, the Schemas page changes a level from any broker: one that does not write the registry's
changes sends it, as the user, through the registry's REST API, which forwards it to the writer and
answers once this broker's view holds it; the other brokers' views follow the store."""

from __future__ import annotations

import json

from mmlog.client.admin import Admin
from mmlog.client.serde import Schema, SchemaRegistry
from mmlog.testing.cluster import REPLICATION, three_brokers
from mmlog.testing.wait import wait_for
from tests.console.secured_console import ConsoleSession

CONFIG = {"console.listeners": "http://127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0",
          **REPLICATION}
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def test_a_level_changed_on_a_broker_that_does_not_write_the_registry(tmp_path, zk_connect):
    with three_brokers(tmp_path, zk_connect, **CONFIG) as brokers:
        with SchemaRegistry(brokers[0].registry_urls[0]) as registry:
            registry.register("orders-value", Schema(ORDER))
        with Admin(brokers[0].bootstrap) as admin:
            leader = admin.describe_topic("_schemas").partitions[0].leader
        follower = next(b for b in brokers if b.broker_id != leader)
        session = ConsoleSession(follower.console_urls[0])
        assert session.put("/schemas/subjects/orders-value/compatibility", {"compatibility": "full"}) == {
            "subject": "orders-value", "compatibility": "FULL"}
        assert session.get("/schemas/subjects/orders-value")["compatibility"] == "FULL"  # read back here at once
        for broker in brokers:  # every other broker's view follows the store: soon, not at once
            with SchemaRegistry(broker.registry_urls[0]) as registry:
                wait_for(lambda registry=registry: registry.compatibility("orders-value") == "FULL",
                         what=f"broker {broker.broker_id} reading the new level")

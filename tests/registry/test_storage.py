"""`_schemas` as the registry keeps it: Confluent's keys and values, read back after a restart, ids going on
from the highest ever given."""

from __future__ import annotations

import json

from confluent_kafka import Consumer

from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker
from tests.registry.conftest import REGISTRY_ON, call, compact


def schema(name: str) -> str:
    return compact({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})


def records(broker) -> list[tuple[dict, dict | None]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "look", "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    consumer.subscribe(["_schemas"])
    out = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None
            if message.error():
                break  # the partition's end
            value = message.value()
            out.append((json.loads(message.key()), None if value is None else json.loads(value)))
    finally:
        consumer.close()
    return out


def test_the_records_read_like_confluents_and_survive_a_restart(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1, config=REGISTRY_ON) as broker:
        url = broker.registry_urls[0]
        first = call(url, "POST", "/subjects/kept-value/versions", {"schema": schema("Kept")})[1]["id"]
        call(url, "POST", "/subjects/dropped-value/versions", {"schema": schema("Dropped")})
        call(url, "DELETE", "/subjects/dropped-value")
        call(url, "PUT", "/config/kept-value", {"compatibility": "FULL"})
        call(url, "PUT", "/mode/kept-value", {"mode": "READONLY"})
        assert records(broker) == [
            ({"keytype": "SCHEMA", "subject": "kept-value", "version": 1, "magic": 1},
             {"subject": "kept-value", "version": 1, "id": first, "schema": schema("Kept"), "deleted": False}),
            ({"keytype": "SCHEMA", "subject": "dropped-value", "version": 1, "magic": 1},
             {"subject": "dropped-value", "version": 1, "id": first + 1, "schema": schema("Dropped"),
              "deleted": False}),
            ({"keytype": "DELETE_SUBJECT", "subject": "dropped-value", "magic": 0},
             {"subject": "dropped-value", "version": 1}),
            ({"keytype": "CONFIG", "subject": "kept-value", "magic": 0}, {"compatibilityLevel": "FULL"}),
            ({"keytype": "MODE", "subject": "kept-value", "magic": 0}, {"mode": "READONLY"}),
        ]
        with Admin(broker.bootstrap) as admin:
            config, _ = admin.topic_config("_schemas")
        assert config["cleanup.policy"] == "compact"

        broker.restart()
        url = broker.registry_urls[0]
        assert call(url, "GET", "/subjects/kept-value/versions/1")[1]["id"] == first
        assert call(url, "GET", "/subjects?deleted=true")[1] == ["dropped-value", "kept-value"]
        assert call(url, "GET", "/config/kept-value") == (200, {"compatibilityLevel": "FULL"})
        assert call(url, "GET", "/mode/kept-value") == (200, {"mode": "READONLY"})
        assert call(url, "POST", "/subjects/next-value/versions", {"schema": schema("Next")}) == (
            200, {"id": first + 2})
        call(url, "DELETE", "/subjects/dropped-value?permanent=true")
        assert call(url, "GET", f"/schemas/ids/{first + 1}")[1]["error_code"] == 40403
        assert records(broker)[-1] == ({"keytype": "SCHEMA", "subject": "dropped-value", "version": 1, "magic": 1},
                                       None)

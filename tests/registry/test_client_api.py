"""confluent-kafka's SchemaRegistryClient, method by method, against the broker's registry: every answer in
the shape the client reads."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry import ConfigCompatibilityLevel, Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.registry.conftest import compact


def record(name: str, *extra: dict) -> Schema:
    fields = [{"name": "a", "type": "int"}, *extra]
    return Schema(compact({"type": "record", "name": name, "namespace": "client", "fields": fields}), "AVRO")


@pytest.fixture
def client(url):
    return SchemaRegistryClient({"url": url})


def test_subjects_versions_and_ids(client):
    first = client.register_schema("c1-value", record("C1"))
    second = client.register_schema("c1-value", record("C1", {"name": "b", "type": "int", "default": 0}))
    assert sorted(client.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]
    assert "c1-value" in client.get_subjects()
    assert client.get_versions("c1-value") == [1, 2]
    version = client.get_version("c1-value", 1)
    assert (version.schema_id, version.subject, version.version) == (first, "c1-value", 1)
    assert client.get_latest_version("c1-value").schema_id == second
    assert client.get_subjects_by_schema_id(first) == ["c1-value"]
    assert client.lookup_schema("c1-value", record("C1")).version == 1
    assert client.get_schema(first).schema_str == record("C1").schema_str


def test_deletes(client):
    client.register_schema("c2-value", record("C2"))
    client.register_schema("c2-value", record("C2", {"name": "b", "type": "int", "default": 0}))
    assert client.delete_version("c2-value", 1) == 1
    assert client.delete_version("c2-value", 1, permanent=True) == 1
    assert client.delete_subject("c2-value") == [2]
    assert client.delete_subject("c2-value", permanent=True) == [2]
    with pytest.raises(SchemaRegistryError) as refused:
        client.get_versions("c2-value")
    assert (refused.value.http_status_code, refused.value.error_code) == (404, 40401)


def test_compatibility_and_config(client):
    client.register_schema("c3-value", record("C3"))
    breaking = record("C3", {"name": "b", "type": "int"})
    assert client.test_compatibility("c3-value", breaking) is False
    assert client.test_compatibility_all_versions("c3-value", breaking) is False
    assert client.set_compatibility("c3-value", "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility("c3-value") == "NONE"
    assert client.test_compatibility("c3-value", breaking) is True
    assert client.get_config("c3-value").compatibility_level == ConfigCompatibilityLevel.NONE
    assert client.delete_config("c3-value").compatibility_level == ConfigCompatibilityLevel.NONE
    assert client.get_compatibility() == "BACKWARD"


def test_modes(client):
    assert client.get_global_mode() == "READWRITE"
    assert client.update_mode("c4-value", "READONLY") == "READONLY"
    assert client.get_mode("c4-value") == "READONLY"
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("c4-value", record("C4"))
    assert refused.value.error_code == 42205
    assert client.delete_mode("c4-value") == "READONLY"
    assert client.register_schema("c4-value", record("C4")) > 0


def test_references(client):
    inner_id = client.register_schema("c5-inner", record("Inner"))
    outer = Schema(compact({"type": "record", "name": "Outer", "namespace": "client",
                            "fields": [{"name": "in", "type": "client.Inner"}]}), "AVRO",
                   [SchemaReference("client.Inner", "c5-inner", 1)])
    outer_id = client.register_schema("c5-outer", outer)
    assert inner_id != outer_id
    assert client.get_referenced_by("c5-inner", 1) == [outer_id]
    assert client.get_schema(outer_id).references[0].subject == "c5-inner"

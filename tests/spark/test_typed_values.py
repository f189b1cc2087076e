"""Values typed by the schema registry in Spark: the source decodes Avro, JSON and Protobuf values into a
struct column of the schema's fields (with the id each was written with), and the sink encodes a struct
column by the registry's schema, so a job reads and writes typed rows with no JVM jar."""

from __future__ import annotations

import datetime

import pytest

from mmlog.client.serde import (AvroDeserializer, AvroSerializer, JSONSerializer, ProtobufSerializer,
                                SchemaRegistry)
from tests.client.serde.test_serde import shipment_classes

CLICK = {"type": "record", "name": "Click", "namespace": "web", "fields": [
    {"name": "user", "type": "long"}, {"name": "page", "type": "string"}, {"name": "ms", "type": "int"},
    {"name": "score", "type": "float"}, {"name": "bot", "type": "boolean"}, {"name": "raw", "type": "bytes"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
    {"name": "agent", "type": ["null", "string"]},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
NESTED = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}}]}


@pytest.fixture
def registry(broker):
    with SchemaRegistry(broker.registry_urls[0]) as reg:
        yield reg


def read(spark, broker, topic, fmt, **options):
    reader = (spark.read.format("mmlog").option("bootstrap", broker.bootstrap).option("subscribe", topic)
              .option("valueFormat", fmt).option("schemaRegistry", broker.registry_urls[0]))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def clicks(n: int) -> list[dict]:
    at = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.timezone.utc)
    return [{"user": i * 1_000_003, "page": f"/p/{i}" + "é" * (i % 4), "ms": i % 700, "score": i / 4, "bot": i % 5 == 0,
             "raw": bytes([i % 256]) * (i % 3), "kind": "BUY" if i % 7 == 0 else "VIEW",
             "agent": None if i % 2 else f"agent-{i}", "at": at + datetime.timedelta(milliseconds=i)} for i in range(n)]


def test_flat_avro_values_become_typed_columns(spark, broker, topic, produce, registry):
    serialize = AvroSerializer(registry, CLICK)
    sent = clicks(300)
    produce(topic, [(i % 3, None, serialize(topic, c), []) for i, c in enumerate(sent)] + [(0, None, None, [])])
    df = read(spark, broker, topic, "avro")
    assert df.columns[-1] == "valueSchemaId"
    assert [f.name for f in df.schema["value"].dataType.fields] == [f["name"] for f in CLICK["fields"]]
    rows = df.select("value.*", "valueSchemaId").collect()
    got = sorted((r.asDict() for r in rows if r.user is not None), key=lambda r: r["user"])
    schema_id = registry.version(f"{topic}-value").id
    assert {r.pop("valueSchemaId") for r in got} == {schema_id}
    for r in got:
        r["at"] = r["at"].astimezone(datetime.timezone.utc)
    assert got == sent
    assert sum(1 for r in rows if r.user is None and r.valueSchemaId is None) == 1  # the null value: a null row


def test_nested_avro_and_older_writers_are_read_with_the_latest_schema(spark, broker, topic, produce, registry):
    v1 = AvroSerializer(registry, NESTED)
    v2_schema = {**NESTED, "fields": NESTED["fields"] + [{"name": "note", "type": "string", "default": "-"}]}
    v2 = AvroSerializer(registry, v2_schema)
    produce(topic, [(0, None, v1(topic, {"id": 1, "lines": [{"sku": "a", "qty": 2}]}), []),
                    (0, None, v2(topic, {"id": 2, "lines": [], "note": "gift"}), [])])
    rows = read(spark, broker, topic, "avro").orderBy("offset").select("value.*").collect()
    assert [(r.id, [(l.sku, l.qty) for l in r.lines], r.note) for r in rows] == [(1, [("a", 2)], "-"), (2, [], "gift")]


def test_json_values_become_typed_columns(spark, broker, topic, produce, registry):
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                               "price": {"type": "number"}, "tags": {"type": "array",
                                                                                     "items": {"type": "string"}}}}
    serialize = JSONSerializer(registry, schema)
    sent = [{"id": i, "name": f"n{i}", "price": i + 0.5, "tags": ["x"] * (i % 3)} for i in range(30)]
    produce(topic, [(i % 3, None, serialize(topic, v), []) for i, v in enumerate(sent)])
    rows = read(spark, broker, topic, "json").select("value.*").collect()
    assert sorted((r.asDict() for r in rows), key=lambda r: r["id"]) == sent


def test_protobuf_values_become_typed_columns(spark, broker, topic, produce, registry):
    shipment, box = shipment_classes()
    serialize = ProtobufSerializer(registry, shipment)
    produce(topic, [(0, None, serialize(topic, shipment(id=i, tags=["t"] * i, box=box(grams=i * 10))), [])
                    for i in range(5)])
    rows = read(spark, broker, topic, "protobuf").orderBy("offset").select("value.*").collect()
    assert [(r.id, r.tags, r.box.grams) for r in rows] == [(i, ["t"] * i, i * 10) for i in range(5)]


def test_the_sink_encodes_a_struct_value_by_a_schema_it_registers(spark, broker, topic, registry):
    df = spark.createDataFrame([(i, f"item-{i}", None if i % 2 else i * 1.5) for i in range(20)],
                               "id long, name string, price double")
    (df.selectExpr("struct(*) AS value").write.format("mmlog").option("bootstrap", broker.bootstrap)
     .option("topic", topic).option("valueFormat", "avro").option("schemaRegistry", broker.registry_urls[0])
     .mode("append").save())
    back = read(spark, broker, topic, "avro").select("value.*").collect()
    assert sorted((r.id, r.name, r.price) for r in back) == [(i, f"item-{i}", None if i % 2 else i * 1.5)
                                                            for i in range(20)]
    assert registry.version(f"{topic}-value").schema.schema_type == "AVRO"


def test_a_bad_value_format_or_a_missing_registry_fails_on_the_driver(spark, broker, topic):
    with pytest.raises(Exception, match="valueFormat"):
        read(spark, broker, topic, "xml").schema
    with pytest.raises(Exception, match="schemaRegistry is required"):
        spark.read.format("mmlog").option("bootstrap", broker.bootstrap).option("subscribe", topic) \
            .option("valueFormat", "avro").load().schema


def test_the_sink_encodes_protobuf_rows_by_the_subjects_latest_version(spark, broker, topic, registry):
    shipment, box = shipment_classes()
    ProtobufSerializer(registry, shipment).schema_id(topic)  # registers the subject's version 1
    df = spark.createDataFrame([(i, ["a"] * i, (i * 5,)) for i in range(1, 6)],
                               "id long, tags array<string>, box struct<grams: int>")
    (df.selectExpr("struct(*) AS value").write.format("mmlog").option("bootstrap", broker.bootstrap)
     .option("topic", topic).option("valueFormat", "protobuf").option("schemaRegistry", broker.registry_urls[0])
     .mode("append").save())
    rows = read(spark, broker, topic, "protobuf").select("value.*").collect()
    assert sorted((r.id, r.tags, r.box.grams) for r in rows) == [(i, ["a"] * i, i * 5) for i in range(1, 6)]

"""mmlog's serializers and deserializers against the broker's registry: records round trip through the broker,
the bytes are Confluent's wire format both ways (confluent-kafka reads what mmlog writes and the other way
round), a reader schema resolves older writers, and a whole fetched chunk decodes at once."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CkAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CkJSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from mmlog.client import Consumer, Producer
from mmlog.client.serde import (AvroDeserializer, AvroSerializer, JSONDeserializer, JSONSerializer, RegistryError,
                                SchemaRegistry, SerializationError, record_name)
from mmlog.testing import EmbeddedBroker

PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "note", "type": ["null", "string"]}]}
PAYMENT_V2 = {**PAYMENT, "fields": PAYMENT["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}
ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
         "properties": {"id": {"type": "integer"}, "items": {"type": "array", "items": {"type": "string"}}},
         "required": ["id"]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"schema.registry.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": 0}
    with EmbeddedBroker(tmp_path_factory.mktemp("serde"), processors=1, config=config) as b:
        yield b


@pytest.fixture
def registry(broker):
    with SchemaRegistry(broker.registry_urls[0]) as reg:
        yield reg


def consume_all(broker, topic: str, count: int, decode) -> list:
    """Every value of `topic` decoded chunk by chunk (decode(RecordArrays) -> list)."""
    got: list = []
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for chunk in consumer.poll_batch(timeout=1.0):
                got += decode(chunk)
    return got


def test_avro_values_round_trip_through_the_broker_a_chunk_at_a_time(broker, registry):
    serialize = AvroSerializer(registry, PAYMENT)
    payments = [{"id": i, "amount": i * 1.25, "note": None if i % 3 else f"n{i}"} for i in range(200)]
    with Producer(broker.bootstrap) as producer:
        for p in payments:
            producer.send("payments", value=serialize("payments", p))
    assert consume_all(broker, "payments", 200, AvroDeserializer(registry).decode_arrays) == payments
    assert registry.version("payments-value").schema.schema_type == "AVRO"


def test_mmlog_and_confluent_kafka_read_each_others_avro_bytes(registry, broker):
    ck = SchemaRegistryClient({"url": broker.registry_urls[0]})
    ctx = SerializationContext("interop", MessageField.VALUE)
    value = {"id": 7, "amount": 2.5, "note": "x"}
    ours = AvroSerializer(registry, PAYMENT)("interop", value)
    theirs = CkAvroSerializer(ck, AvroSerializer(registry, PAYMENT).schema.text)(value, ctx)
    assert ours == theirs  # the same schema id, the same bytes
    assert CkAvroDeserializer(ck)(ours, ctx) == value
    assert AvroDeserializer(registry)(theirs) == value


def test_a_reader_schema_reads_values_written_with_an_older_version(registry):
    old = AvroSerializer(registry, PAYMENT)("evolving", {"id": 1, "amount": 1.0, "note": None})
    new = AvroSerializer(registry, PAYMENT_V2)("evolving", {"id": 2, "amount": 2.0, "note": None, "currency": "USD"})
    assert registry.versions("evolving-value") == [1, 2]
    reader = AvroDeserializer(registry, reader_schema=PAYMENT_V2)
    assert [reader(v)["currency"] for v in (old, new)] == ["EUR", "USD"]


def test_an_incompatible_schema_is_refused_with_the_registrys_reasons(registry):
    AvroSerializer(registry, PAYMENT)("strict", {"id": 1, "amount": 1.0, "note": None})
    breaking = {**PAYMENT, "fields": [{"name": "id", "type": "string"}]}
    with pytest.raises(RegistryError) as caught:
        AvroSerializer(registry, breaking)("strict", {"id": "1"})
    assert caught.value.status == 409
    from mmlog.client.serde.registry import Schema
    import json
    assert registry.compatibility_problems("strict-value", Schema(json.dumps(breaking)))


def test_json_values_are_checked_against_their_schema_and_read_by_confluent_kafka(registry, broker):
    serialize = JSONSerializer(registry, ORDER)
    value = serialize("orders", {"id": 5, "items": ["a", "b"]})
    assert JSONDeserializer(registry, validate=True)(value) == {"id": 5, "items": ["a", "b"]}
    ck = SchemaRegistryClient({"url": broker.registry_urls[0]})
    got = CkJSONDeserializer(None, schema_registry_client=ck)(value, SerializationContext("orders", MessageField.VALUE))
    assert got == {"id": 5, "items": ["a", "b"]}
    with pytest.raises(SerializationError, match="not of type 'integer'"):
        serialize("orders", {"id": "five"})


def test_the_record_name_strategy_registers_under_the_records_full_name(registry):
    AvroSerializer(registry, PAYMENT, subject_name_strategy=record_name)("any-topic", {"id": 1, "amount": 0.0,
                                                                                      "note": None})
    assert "shop.Payment" in registry.subjects()


def test_a_value_not_in_the_wire_format_is_refused_naming_it(registry):
    with pytest.raises(SerializationError, match="wire format"):
        AvroDeserializer(registry)(b"plain text")


def shipment_classes():
    """A Protobuf file with a top-level and a nested message, built at run time (no generated code)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="ship.proto", package="ship", syntax="proto3")
    top = file.message_type.add(name="Shipment")
    top.field.add(name="id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    top.field.add(name="tags", number=2, label=F.LABEL_REPEATED, type=F.TYPE_STRING)
    box = top.nested_type.add(name="Box")
    box.field.add(name="grams", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)
    top.field.add(name="box", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE, type_name=".ship.Shipment.Box")
    made = descriptor_pool.DescriptorPool().Add(file).message_types_by_name["Shipment"]
    return message_factory.GetMessageClass(made), message_factory.GetMessageClass(made.nested_types_by_name["Box"])


def test_protobuf_messages_round_trip_without_generated_code_on_the_reading_side(registry, broker):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CkProtobufDeserializer

    from mmlog.client.serde import ProtobufDeserializer, ProtobufSerializer

    shipment, box = shipment_classes()
    value = ProtobufSerializer(registry, shipment)("ships", shipment(id=9, tags=["a"], box=box(grams=12)))
    nested = ProtobufSerializer(registry, box)("boxes", box(grams=3))
    assert ProtobufDeserializer(registry, as_dict=True)(value) == {"id": 9, "tags": ["a"], "box": {"grams": 12}}
    assert ProtobufDeserializer(registry, as_dict=True)(nested) == {"grams": 3}  # the nested message's path
    assert ProtobufDeserializer(registry, shipment)(value).box.grams == 12
    ck = SchemaRegistryClient({"url": broker.registry_urls[0]})
    ck_value = CkProtobufDeserializer(shipment, {"use.deprecated.format": False}, schema_registry_client=ck)
    assert ck_value(value, SerializationContext("ships", MessageField.VALUE)).id == 9


def test_a_chunk_of_flat_records_decodes_into_the_columns_its_records_give(registry, broker):
    import numpy as np

    from mmlog.client.serde.avro import records_to_columns
    from mmlog.client.serde.avro import parsed as parsed_schema

    serialize = AvroSerializer(registry, PAYMENT)
    with Producer(broker.bootstrap) as producer:
        for i in range(300):
            producer.send("columns", value=None if i == 17 else serialize("columns", {
                "id": i, "amount": i / 8, "note": None if i % 4 else "é" * (i % 9)}))
    chunks: list = []
    consume_all(broker, "columns", 300, lambda chunk: chunks.append(chunk) or [None] * len(chunk))
    deserialize = AvroDeserializer(registry)
    for chunk in chunks:
        fast = deserialize.columns(chunk)  # one numba pass
        reference = records_to_columns(deserialize.decode_arrays(chunk), parsed_schema(registry, serialize.schema))
        assert fast.keys() == reference.keys() == {"id", "amount", "note"}
        for name in fast:
            a, b = np.ma.asarray(fast[name]), np.ma.asarray(reference[name])
            assert a.dtype == b.dtype and (np.ma.getmaskarray(a) == np.ma.getmaskarray(b)).all(), name
            assert a.compressed().tolist() == b.compressed().tolist(), name
    assert fast["id"].dtype == np.int64 and fast["amount"].dtype == np.float64

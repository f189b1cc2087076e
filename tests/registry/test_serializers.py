"""confluent-kafka's SchemaRegistryClient and its Avro serializer and deserializer, unmodified, against the
broker's registry, records produced and consumed through the same broker."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.registry.conftest import compact

USER = compact({"type": "record", "name": "User", "namespace": "test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
USER_V2 = compact({"type": "record", "name": "User", "namespace": "test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None}]})

ACCOUNT, ACCOUNT_V2 = (s.replace('"User"', '"Account"') for s in (USER, USER_V2))


def test_avro_records_round_trip_through_the_broker(broker, url):
    client = SchemaRegistryClient({"url": url})
    serialize = AvroSerializer(client, USER)
    deserialize = AvroDeserializer(client)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    people = [{"name": f"user-{i}", "age": 20 + i} for i in range(5)]
    for person in people:
        producer.produce("people", value=serialize(person, SerializationContext("people", MessageField.VALUE)))
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers", "auto.offset.reset": "earliest"})
    consumer.subscribe(["people"])
    got = []
    try:
        while len(got) < len(people):
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            got.append(deserialize(message.value(), SerializationContext("people", MessageField.VALUE)))
    finally:
        consumer.close()
    assert got == people
    assert "people-value" in client.get_subjects()
    assert client.get_latest_version("people-value").schema.schema_str == USER


def test_a_schema_keeps_one_id_across_subjects_and_a_compatible_change_gets_the_next(url):
    client = SchemaRegistryClient({"url": url})
    first = client.register_schema("ids-a-value", Schema(ACCOUNT, "AVRO"))
    assert SchemaRegistryClient({"url": url}).register_schema("ids-a-value", Schema(ACCOUNT, "AVRO")) == first
    assert client.register_schema("ids-b-value", Schema(ACCOUNT, "AVRO")) == first
    second = client.register_schema("ids-a-value", Schema(ACCOUNT_V2, "AVRO"))
    assert second > first
    assert client.get_versions("ids-a-value") == [1, 2]
    assert client.get_schema(second).schema_str == ACCOUNT_V2
    assert {(v.subject, v.version) for v in client.get_schema_versions(first)} == {("ids-a-value", 1),
                                                                                    ("ids-b-value", 1)}
    found = client.lookup_schema("ids-a-value", Schema(ACCOUNT, "AVRO"))
    assert (found.schema_id, found.version) == (first, 1)


def test_the_serializer_can_use_the_latest_version_without_registering(broker, url):
    client = SchemaRegistryClient({"url": url})
    client.register_schema("latest-value", Schema(USER, "AVRO"))
    serialize = AvroSerializer(client, USER, conf={"auto.register.schemas": False, "use.latest.version": True})
    data = serialize({"name": "x", "age": 1}, SerializationContext("latest", MessageField.VALUE))
    assert AvroDeserializer(client)(data, SerializationContext("latest", MessageField.VALUE)) == {"name": "x",
                                                                                                 "age": 1}

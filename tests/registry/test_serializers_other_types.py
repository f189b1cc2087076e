"""confluent-kafka's Protobuf and JSON Schema serializers and deserializers, unmodified, against the broker's
registry, records produced and consumed through the same broker."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.registry.conftest import call, compact

ORDER_SCHEMA = compact({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                        "properties": {"id": {"type": "string"}, "cents": {"type": "integer"}},
                        "required": ["id"]})


def order_class():
    """A message class as protoc would generate it (its file descriptor built by hand)."""
    file = descriptor_pb2.FileDescriptorProto(name="shop/item.proto", package="shop", syntax="proto3")
    item = file.message_type.add(name="Item")
    F = descriptor_pb2.FieldDescriptorProto
    item.field.add(name="sku", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="sku")
    item.field.add(name="count", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32, json_name="count")
    return message_factory.GetMessageClass(descriptor_pool.DescriptorPool().Add(file).message_types_by_name["Item"])


def round_trip(broker, topic: str, serialize, deserialize, values: list) -> list:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-readers",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < len(values):
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            got.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


def test_protobuf_records_round_trip_through_the_broker(broker, url):
    client = SchemaRegistryClient({"url": url})
    item = order_class()
    serialize = ProtobufSerializer(item, client, {"use.deprecated.format": False})
    deserialize = ProtobufDeserializer(item, {"use.deprecated.format": False})
    sent = [item(sku=f"s{i}", count=i) for i in range(3)]
    assert round_trip(broker, "items", serialize, deserialize, sent) == sent
    registered = client.get_latest_version("items-value")
    assert registered.schema.schema_type == "PROTOBUF" and "message Item" in registered.schema.schema_str
    status, body = call(url, "GET", f"/schemas/ids/{registered.schema_id}?format=serialized")
    assert status == 200 and body["schemaType"] == "PROTOBUF" and "message" not in body["schema"]


def test_json_schema_records_round_trip_through_the_broker(broker, url):
    client = SchemaRegistryClient({"url": url})
    serialize = JSONSerializer(ORDER_SCHEMA, client)
    deserialize = JSONDeserializer(ORDER_SCHEMA, schema_registry_client=client)
    sent = [{"id": f"o{i}", "cents": 100 * i} for i in range(3)]
    assert round_trip(broker, "orders", serialize, deserialize, sent) == sent
    assert client.get_latest_version("orders-value").schema.schema_type == "JSON"

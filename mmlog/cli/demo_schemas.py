"""`mmlog demo --schemas`: the broker's schema registry in the round trip.

Registers an Avro schema through the registry the demo broker serves, produces records that carry its
id with mmlog's AvroSerializer, consumes them back with the AvroDeserializer (whole fetched chunks
decoded at once) and checks every one; then asks the registry whether a changed schema may follow.
"""

from __future__ import annotations

import time

from mmlog.cli import CommandError

TOPIC = "demo-payments"
PAYMENT = {"type": "record", "name": "Payment", "namespace": "demo", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "note", "type": "string"}]}
BREAKING = {**PAYMENT, "fields": [{"name": "id", "type": "string"}]}


def payment(i: int) -> dict:
    return {"id": i, "amount": i * 0.25, "note": f"payment {i}"}


def round_trip(bootstrap: str, registry_url: str, count: int = 10_000) -> None:
    import json

    from mmlog.client import Consumer, Producer
    from mmlog.client.serde import AvroDeserializer, AvroSerializer, Schema, SchemaRegistry

    with SchemaRegistry(registry_url) as registry:
        serialize = AvroSerializer(registry, PAYMENT)
        start = time.perf_counter()
        with Producer(bootstrap, acks="all", linger_ms=5) as producer:
            for i in range(count):
                producer.send(TOPIC, value=serialize(TOPIC, payment(i)))
        produce_s = time.perf_counter() - start
        deserialize, got = AvroDeserializer(registry), []
        start = time.perf_counter()
        with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(TOPIC, 0)])
            deadline = time.monotonic() + 60
            while len(got) < count and time.monotonic() < deadline:
                for chunk in consumer.poll_batch(timeout=1.0):
                    got += deserialize.decode_arrays(chunk)
        consume_s = time.perf_counter() - start
        if got != [payment(i) for i in range(count)]:
            raise CommandError(f"schema registry round trip: read back {len(got)} records, not the {count} sent")
        problems = registry.compatibility_problems(f"{TOPIC}-value", Schema(json.dumps(BREAKING)))
        schema_id = serialize.schema_id(TOPIC)
    print(f"  schema registry on {registry_url}: Avro schema id {schema_id} under {TOPIC}-value; "
          f"{count} Avro records produced in {produce_s:.2f} s and decoded back in {consume_s:.2f} s: ok")
    print(f"  a changed schema checked against it: {'incompatible' if problems else 'compatible'}"
          + (f" ({problems[0][:90]}...)" if problems else ""))

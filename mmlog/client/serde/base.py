"""What every schema-typed serializer and deserializer shares: the subject a value is registered under,
the id the registry gives its schema (asked once per subject), and per-id decoders for a consumer."""

from __future__ import annotations

from typing import Callable

from mmlog.client.serde import wire
from mmlog.client.serde.registry import Schema, SchemaRegistry


def topic_name(topic: str, is_key: bool, record_name: str | None) -> str:
    """Confluent's default: `<topic>-key` or `<topic>-value`."""
    return f"{topic}-{'key' if is_key else 'value'}"


def record_name(topic: str, is_key: bool, record_name: str | None) -> str:
    """The record's full name, whatever the topic."""
    if not record_name:
        raise wire.SerializationError("record_name needs a named schema")
    return record_name


def topic_record_name(topic: str, is_key: bool, record_name: str | None) -> str:
    return f"{topic}-{record_name}"


SubjectNameStrategy = Callable[[str, bool, "str | None"], str]


class Serializer:
    """Turns an object into a registry-framed value; subclasses supply the schema and the encoding."""

    schema: Schema
    record: str | None = None  # the full name the record_name strategies use

    def __init__(self, registry: SchemaRegistry, *, is_key: bool = False, auto_register: bool = True,
                 use_latest_version: bool = False, normalize: bool = False,
                 subject_name_strategy: SubjectNameStrategy = topic_name) -> None:
        self.registry = registry
        self.is_key = is_key
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.normalize = normalize
        self.subject_name = subject_name_strategy
        self._ids: dict[str, int] = {}
        self._headers: dict[str, bytes] = {}  # topic -> the wire format's header (magic, id): the hot path's

    def subject(self, topic: str) -> str:
        return self.subject_name(topic, self.is_key, self.record)

    def schema_id(self, topic: str) -> int:
        """The id values for `topic` carry: registered on first use, or looked up when not auto-registering."""
        subject = self.subject(topic)
        found = self._ids.get(subject)
        if found is None:
            if self.use_latest_version:
                found = self.registry.version(subject, "latest").id
            elif self.auto_register:
                found = self.registry.register(subject, self.schema, normalize=self.normalize)
            else:
                found = self.registry.lookup(subject, self.schema).id
            self._ids[subject] = found
        return found

    def header(self, topic: str) -> bytes:
        """The bytes every value for `topic` starts with (asked of the registry once per topic)."""
        found = self._headers.get(topic)
        if found is None:
            found = self._headers[topic] = wire.frame(self.schema_id(topic), b"")
        return found

    def __call__(self, topic: str, obj) -> bytes | None:
        if obj is None:
            return None
        return self.header(topic) + self.indexes(obj) + self.encode(obj)

    def encode(self, obj) -> bytes:
        raise NotImplementedError

    def indexes(self, obj) -> bytes:
        return b""


class Deserializer:
    """Turns registry-framed values back into objects, one decoder per writer schema id."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self._decoders: dict[int, Callable] = {}

    def __call__(self, data):
        if data is None:
            return None
        schema_id, payload = wire.split(data)
        return self.decoder(schema_id)(payload)

    def decoder(self, schema_id: int) -> Callable:
        found = self._decoders.get(schema_id)
        if found is None:
            found = self._decoders[schema_id] = self.make_decoder(schema_id, self.registry.schema(schema_id))
        return found

    def make_decoder(self, schema_id: int, schema: Schema) -> Callable:
        raise NotImplementedError

    def decode_arrays(self, arrays) -> list:
        """The values of one fetched chunk (`RecordArrays`), decoded; None for null values.

        The ids are read for the whole chunk at once and each distinct schema's decoder found once."""
        ids = wire.schema_ids(arrays.buffer, arrays.value_starts, arrays.value_lengths)
        bad = ids == wire.BAD_ID
        if bad.any():
            i = int(bad.argmax())
            raise wire.SerializationError(f"{arrays.topic}-{arrays.partition} offset {int(arrays.offsets[i])}: "
                                          "value is not in the schema registry's wire format")
        decoders = {int(i): self.decoder(int(i)) for i in set(ids.tolist()) if i >= 0}
        buf = memoryview(arrays.buffer)
        return [None if sid < 0 else decoders[sid](buf[start + wire.HEADER:start + length])
                for sid, start, length in zip(ids.tolist(), arrays.value_starts.tolist(),
                                              arrays.value_lengths.tolist())]

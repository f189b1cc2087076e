"""Protobuf messages in the registry's wire format, as Confluent's serializers frame them.

The serializer registers the message's .proto file as Confluent's Python serializer does (the file
descriptor, serialized and base64-encoded), its imports first under subjects named by their paths
(Google's well-known types excepted: every registry knows them), and writes the message's path in its
file before the bytes. The deserializer parses into a given message class, or, without one, builds the
writer's classes from the registry's schema, so a consumer needs no generated code."""

from __future__ import annotations

import base64

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor

from mmlog.client.serde import wire
from mmlog.client.serde.base import Deserializer, Serializer
from mmlog.client.serde.registry import Reference, Schema, SchemaRegistry

WELL_KNOWN = "google/protobuf/"


def message_path(descriptor) -> list[int]:
    """Where a message sits in its file: the index among the file's messages, then among nested ones."""
    path = []
    while descriptor.containing_type is not None:
        parent = descriptor.containing_type
        path.append(list(parent.nested_types).index(descriptor))
        descriptor = parent
    path.append(list(descriptor.file.message_types_by_name).index(descriptor.name))
    return path[::-1]


def file_schema(file_descriptor) -> str:
    return base64.standard_b64encode(file_descriptor.serialized_pb).decode("ascii")


class ProtobufSerializer(Serializer):
    """Messages of one class to framed Protobuf; the .proto file and its imports registered on first use."""

    def __init__(self, registry: SchemaRegistry, message_class, **options) -> None:
        super().__init__(registry, **options)
        self.message_class = message_class
        self.descriptor = message_class.DESCRIPTOR
        self.record = self.descriptor.full_name
        self._path = wire.zigzag_varints(message_path(self.descriptor))
        self._schema: Schema | None = None

    @property
    def schema(self) -> Schema:  # the references need the registry: resolved on first use
        if self._schema is None:
            self._schema = Schema(file_schema(self.descriptor.file), "PROTOBUF",
                                  self._register_imports(self.descriptor.file))
        return self._schema

    def _register_imports(self, file_descriptor) -> tuple[Reference, ...]:
        refs = []
        for dep in file_descriptor.dependencies:
            if dep.name.startswith(WELL_KNOWN):
                continue
            schema = Schema(file_schema(dep), "PROTOBUF", self._register_imports(dep))
            self.registry.register(dep.name, schema)
            refs.append(Reference(dep.name, dep.name, self.registry.lookup(dep.name, schema).version))
        return tuple(refs)

    def encode(self, obj) -> bytes:
        if not isinstance(obj, self.message_class):
            raise wire.SerializationError(f"expected a {self.descriptor.full_name}, got {type(obj).__name__}")
        return obj.SerializeToString()

    def indexes(self, obj) -> bytes:
        return self._path


class ProtobufDeserializer(Deserializer):
    """Framed Protobuf to messages of `message_class`, or of the writer's own classes when none is given
    (`as_dict=True` answers dicts: `message_dict`)."""

    def __init__(self, registry: SchemaRegistry, message_class=None, *, as_dict: bool = False) -> None:
        super().__init__(registry)
        self.message_class = message_class
        self.as_dict = as_dict

    def make_decoder(self, schema_id: int, schema: Schema):
        if schema.schema_type != "PROTOBUF":
            raise wire.SerializationError(f"schema {schema_id} is {schema.schema_type}, not PROTOBUF")
        fixed = self.message_class
        file_proto = None if fixed is not None else self._load(schema_id)
        classes: dict[tuple, type] = {}

        def decode(payload: memoryview):
            path, body = wire.read_zigzag_varints(payload)
            cls = fixed
            if cls is None:
                cls = classes.get(tuple(path)) or classes.setdefault(tuple(path), _class_at(file_proto, path))
            message = cls()
            message.ParseFromString(bytes(body))
            return message_dict(message) if self.as_dict else message

        return decode

    def _load(self, schema_id: int):
        """The writer's file in a pool of its own, its references added first; answers (pool, file proto)."""
        pool = descriptor_pool.DescriptorPool()
        seen: set = set()

        def add(schema: Schema) -> descriptor_pb2.FileDescriptorProto:
            for ref in schema.references:
                if ref.name not in seen:
                    seen.add(ref.name)
                    found = self.registry.version(ref.subject, ref.version)
                    add(self.registry.schema(found.id, fmt="serialized"))
            proto = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(schema.text))
            for dep in proto.dependency:
                if dep.startswith(WELL_KNOWN) and dep not in seen:
                    seen.add(dep)
                    pool.AddSerializedFile(descriptor_pool.Default().FindFileByName(dep).serialized_pb)
            pool.Add(proto)
            return proto

        return pool, add(self.registry.schema(schema_id, fmt="serialized"))


def message_dict(message) -> dict:
    """Every field of a message by name (unset ones at their defaults), integers as integers and enums by
    name: the shape a typed column wants (json_format writes 64-bit integers as strings)."""
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.is_repeated:
                value = [message_dict(v) for v in value]
            else:
                value = message_dict(value) if message.HasField(field.name) else None
        elif field.type == FieldDescriptor.TYPE_ENUM:
            names = field.enum_type.values_by_number
            value = [names[v].name if v in names else v for v in value] if field.is_repeated \
                else (names[value].name if value in names else value)
        elif field.is_repeated:
            value = list(value)
        out[field.name] = value
    return out


def message_from_dict(cls, values: dict):
    """A message of `cls` filled from a dict of the shape `message_dict` answers (None: left unset)."""
    message = cls()
    for field in message.DESCRIPTOR.fields:
        value = values.get(field.name)
        if value is None:
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            sub = message_factory.GetMessageClass(field.message_type)
            if field.is_repeated:
                getattr(message, field.name).extend(message_from_dict(sub, v) for v in value)
            else:
                getattr(message, field.name).CopyFrom(message_from_dict(sub, value))
        elif field.is_repeated:
            getattr(message, field.name).extend(value)
        else:
            setattr(message, field.name, value)
    return message


def writer_class(registry: SchemaRegistry, schema_id: int, path: list[int] = (0,)):
    """The message class at `path` of the registered schema `schema_id`, built from the registry."""
    return _class_at(ProtobufDeserializer(registry)._load(schema_id), list(path))


def _class_at(loaded, path: list[int]) -> type:
    pool, proto = loaded
    message = proto.message_type[path[0]]
    name = message.name
    for index in path[1:]:
        message = message.nested_type[index]
        name += "." + message.name
    full = f"{proto.package}.{name}" if proto.package else name
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full))

"""The files a Protobuf schema may import without a reference, and the descriptor pool that checks a schema.

As Confluent Schema Registry does, `google/protobuf/*.proto` (timestamp, any, wrappers, ...), the
`google/type/*.proto` common types and Confluent's own `confluent/meta.proto` and
`confluent/type/decimal.proto` resolve without being registered: their descriptors come from the Python
modules that ship them. A schema's own references come first, so a registered file of the same name wins.
"""

from __future__ import annotations

import importlib
import re

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import descriptor_pool

from mmlog.schemas.errors import InvalidSchema
from mmlog.schemas.protobuf_print import json_name

WELL_KNOWN = re.compile(r"google/(protobuf|type)/([a-z_]+)\.proto")
CONFLUENT = {  # shipped with confluent-kafka's registry client, when it is installed
    "confluent/meta.proto": "confluent_kafka.schema_registry.confluent.meta_pb2",
    "confluent/type/decimal.proto": "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
}


def well_known(name: str) -> pb.FileDescriptorProto | None:
    """The descriptor of a file every schema may import, or None when `name` is not one."""
    m = WELL_KNOWN.fullmatch(name)
    module_name = f"google.{m.group(1)}.{m.group(2)}_pb2" if m else CONFLUENT.get(name)
    if module_name is None:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    file = pb.FileDescriptorProto()
    file.ParseFromString(module.DESCRIPTOR.serialized_pb)
    return file if file.name == name else None


def _drop_implied_json_names(fields, messages) -> None:
    """protoc writes every field's JSON name into a descriptor; one that says what the name implies is noise."""
    for f in fields:
        if f.HasField("json_name") and f.json_name == json_name(f.name):
            f.ClearField("json_name")
    for msg in messages:
        _drop_implied_json_names([*msg.field, *msg.extension], msg.nested_type)


class Pool:
    """A descriptor pool of one schema's world: its references, the well-known files it imports, itself.

    `files` keeps each added file's resolved descriptor (type names made full, field types filled in),
    and `origin` says where each came from: a reference's name, or "" for a well-known file.
    """

    def __init__(self):
        self.pool = descriptor_pool.DescriptorPool()
        self.files: dict[str, pb.FileDescriptorProto] = {}
        self.well_known: set[str] = set()

    def add(self, file: pb.FileDescriptorProto) -> pb.FileDescriptorProto:
        """Adds `file` once its imports are in; returns it resolved. InvalidSchema with the pool's reason."""
        if file.name in self.files:
            raise InvalidSchema(f"two files named {file.name!r}")
        for dep in file.dependency:
            if dep not in self.files:
                self._add_well_known(dep)
        try:
            self.pool.Add(file)
            added = self.pool.FindFileByName(file.name)
        except (TypeError, ValueError, KeyError) as e:
            reason = str(e).removeprefix("Couldn't build proto file into descriptor pool: ")
            raise InvalidSchema(reason or type(e).__name__) from None
        resolved = pb.FileDescriptorProto()
        added.CopyToProto(resolved)
        _drop_implied_json_names(resolved.extension, resolved.message_type)
        self.files[file.name] = resolved
        return resolved

    def _add_well_known(self, name: str) -> None:
        file = well_known(name)
        if file is None:
            raise InvalidSchema(f"import {name!r}: no reference of that name was given")
        self.well_known.add(name)
        self.add(file)

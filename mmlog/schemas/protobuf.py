"""The PROTOBUF schema type: a `.proto` file as the registry takes it, keeps it, serves it and compares it.

Accepted, as Confluent Schema Registry accepts them: `.proto` text (proto2 or proto3 syntax), or a base64
serialized FileDescriptorProto (what confluent-kafka's ProtobufSerializer registers). Either is read into
one resolved FileDescriptorProto, checked by a descriptor pool holding the schema's references (import path
-> schema, dependencies first) and the well-known files (protobuf_files.py).

`ProtobufSchema.formatted(fmt)` is the schema in each form the registry serves: "" (or "default") the
canonical `.proto` text, also `text` and `identity`: no comments, one layout, so whitespace and comments do
not make a new version; "serialized" the base64 FileDescriptorProto, which confluent-kafka's
ProtobufDeserializer asks for (`?format=serialized`) and loads into its own pool.
"""

from __future__ import annotations

import base64
import binascii
import re

from google.protobuf import descriptor_pb2 as pb
from google.protobuf.message import DecodeError

from mmlog.schemas.errors import InvalidSchema
from mmlog.schemas.protobuf_compat import COMPATIBLE, World, differences
from mmlog.schemas.protobuf_files import Pool
from mmlog.schemas.protobuf_print import print_file
from mmlog.schemas.protobuf_text import compile_text

BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
MAIN_NAME = "default"  # the schema's own file name in its pool, as confluent-kafka names it when it reads one


class ProtobufSchema:
    """One parsed `.proto` file: its resolved descriptor, its canonical text, the types it can see."""

    schema_type = "PROTOBUF"

    def __init__(self, file: pb.FileDescriptorProto, pool: Pool, references: dict[str, ProtobufSchema]):
        self.file = file
        self.references = references
        self.text = print_file(file)
        self.identity = self.text
        others = {name: f for name, f in pool.files.items() if name != file.name}
        identities = {name: ref.identity for name, ref in references.items()}
        self.world = World.of(file, others, identities)

    def formatted(self, fmt: str = "") -> str:
        """The schema as served for `?format=fmt`: the text, or "serialized", the base64 descriptor.

        Other format names get the text, as Confluent Schema Registry answers a format it does not know.
        """
        if fmt == "serialized":
            return base64.standard_b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")
        return self.text

    def differences(self, writer: ProtobufSchema) -> list[tuple[str, str]]:
        """Every difference from `writer` to this schema, (type, path), compatible ones included."""
        return differences(writer.world, self.world)

    def reader_problems(self, writer) -> list[str]:
        if getattr(writer, "schema_type", None) != "PROTOBUF":
            return [f"a PROTOBUF schema cannot read data written with a {writer.schema_type} schema"]
        return [f"{kind} {path}" for kind, path in self.differences(writer) if kind not in COMPATIBLE]

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.text!r})"


def read_file(text: str, name: str) -> pb.FileDescriptorProto:
    """`.proto` text or a base64 FileDescriptorProto -> the descriptor, named `name`, types unresolved."""
    if not BASE64.fullmatch(text):
        return compile_text(text, name)
    try:
        file = pb.FileDescriptorProto()
        file.ParseFromString(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        try:  # text of base64's letters may still be .proto text: "// nothing yet", say
            return compile_text(text, name)
        except InvalidSchema as e:
            raise InvalidSchema(f"neither a base64 serialized FileDescriptorProto nor .proto text ({e})") from None
    file.name = name
    return file


def parse_protobuf(text: str, references=()) -> ProtobufSchema:
    """A PROTOBUF schema from its text and its references [(import path, schema type, text), ...]."""
    if not isinstance(text, str):
        raise InvalidSchema("a PROTOBUF schema is a string")
    if not text.strip():
        raise InvalidSchema("empty schema")
    pool = Pool()
    parsed: dict[str, ProtobufSchema] = {}
    for name, schema_type, ref_text in references:
        if schema_type != "PROTOBUF":
            raise InvalidSchema(f"reference {name!r} is a {schema_type} schema: a .proto imports .proto files")
        resolved = _add(pool, ref_text, name, f"reference {name!r}: ")
        parsed[name] = ProtobufSchema(resolved, pool, {})
    name = MAIN_NAME
    while name in pool.files:
        name = "_" + name
    return _guarded(lambda: ProtobufSchema(pool.add(read_file(text, name)), pool, parsed), "")


def _add(pool: Pool, text: str, name: str, context: str) -> pb.FileDescriptorProto:
    return _guarded(lambda: pool.add(read_file(text, name)), context)


def _guarded(make, context: str):
    """`make()`, its failures as InvalidSchema: a descriptor from outside may be malformed in ways the
    pool lets through (a string field that is not UTF-8, say), and that is the schema's fault."""
    try:
        return make()
    except InvalidSchema as e:
        raise InvalidSchema(context + str(e)) from None
    except (TypeError, ValueError, KeyError, IndexError, StopIteration, AttributeError) as e:
        raise InvalidSchema(f"{context}not a usable .proto file: {e}") from None

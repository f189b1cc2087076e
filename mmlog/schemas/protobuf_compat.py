"""Which changes between two Protobuf schemas a reader survives: the differences, named as Confluent names them.

`differences(writer, reader)` walks the two files side by side the way Confluent Schema Registry does and
lists every difference as (type, path), e.g. ("FIELD_SCALAR_KIND_CHANGED", "#/MyRecord/2"): messages and
enums by name, fields by number (a oneof member's path names its oneof), enum constants by number.
`COMPATIBLE` holds the kinds a reader reads through; every other kind makes the reader unable to read:

- a message removed, or the package changed;
- a field whose kind changed between scalar, message and map, or a scalar moved to another wire group
  (int32/int64/uint32/uint64/bool/enum; sint32/sint64; string/bytes; fixed32/sfixed32; fixed64/sfixed64;
  float; double), or a message field now of a differently named type or of a type the reader cannot read;
- a numeric field turned from or to `repeated` (string and bytes may change label);
- a required field added or removed (proto2);
- a oneof member removed while the rest of its oneof lives on, several fields that were independent moved
  into one oneof, or a field moved into a oneof that already held others.

Field names, syntax, options, enum constants, enums, new messages, new fields and whole oneofs are free to
change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2 as pb

from mmlog.schemas.protobuf_print import SCALAR_NAMES

F = pb.FieldDescriptorProto
COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})
# The groups of scalar types that share a wire encoding: a field may move within a group, not across.
SCALAR_KIND = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER", "sint64": "SIGNED_NUMBER",
    "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES", "fixed32": "FIXED32", "sfixed32": "FIXED32",
    "fixed64": "FIXED64", "sfixed64": "FIXED64", "float": "FLOAT", "double": "DOUBLE",
}


@dataclass(frozen=True)
class TypeInfo:
    """One message or enum of a schema's world, by its full name."""
    proto: pb.DescriptorProto | pb.EnumDescriptorProto
    package: str
    proto3: bool
    source: str  # the identity of the file that declares it, "" for the schema itself

    @property
    def is_map(self) -> bool:
        return isinstance(self.proto, pb.DescriptorProto) and self.proto.options.map_entry


@dataclass
class World:
    """A schema's file and the types it can see (its own, its references', the well-known ones)."""
    file: pb.FileDescriptorProto
    types: dict[str, TypeInfo]

    @classmethod
    def of(cls, file: pb.FileDescriptorProto, others: dict[str, pb.FileDescriptorProto],
           identities: dict[str, str]) -> World:
        types: dict[str, TypeInfo] = {}
        for name, other in others.items():
            _collect(types, other, identities.get(name, name))
        _collect(types, file, "")
        return cls(file, types)


def _collect(types: dict, file: pb.FileDescriptorProto, source: str) -> None:
    proto3 = file.syntax == "proto3"

    def walk(prefix: str, messages, enums) -> None:
        for en in enums:
            types[prefix + en.name] = TypeInfo(en, file.package, proto3, source)
        for msg in messages:
            types[prefix + msg.name] = TypeInfo(msg, file.package, proto3, source)
            walk(prefix + msg.name + ".", msg.nested_type, msg.enum_type)
    walk(file.package + "." if file.package else "", file.message_type, file.enum_type)


def differences(writer: World, reader: World) -> list[tuple[str, str]]:
    """Every difference from `writer` (the original) to `reader` (the update), compatible ones included."""
    diff = _Diff(writer.types, reader.types)
    if writer.file.package != reader.file.package:
        diff.add("PACKAGE_CHANGED")
    diff.types(writer.file.message_type, writer.file.enum_type, reader.file.message_type,
               reader.file.enum_type, (writer.file.syntax == "proto3", reader.file.syntax == "proto3"))
    return diff.found


@dataclass
class _Diff:
    old_types: dict[str, TypeInfo]
    new_types: dict[str, TypeInfo]
    path: list[str] = field(default_factory=list)
    found: list[tuple[str, str]] = field(default_factory=list)
    comparing: set[int] = field(default_factory=set)  # messages on the way down: a recursive type ends there

    def add(self, kind: str, *more: str) -> None:
        self.found.append((kind, "#/" + "/".join([*self.path, *more])))

    def types(self, old_msgs, old_enums, new_msgs, new_enums, proto3: tuple[bool, bool]) -> None:
        old = {m.name: (i, m) for i, m in enumerate(old_msgs) if not m.options.map_entry}
        new = {m.name: (i, m) for i, m in enumerate(new_msgs) if not m.options.map_entry}
        for name in [*old, *(n for n in new if n not in old)]:
            self.path.append(name)
            if name not in new:
                self.add("MESSAGE_REMOVED")
            elif name not in old:
                self.add("MESSAGE_ADDED")
            else:
                self.message(old[name][1], new[name][1], proto3)
                if old[name][0] != new[name][0]:
                    self.add("MESSAGE_MOVED")
            self.path.pop()
        old_e, new_e = {e.name: e for e in old_enums}, {e.name: e for e in new_enums}
        for name in [*old_e, *(n for n in new_e if n not in old_e)]:
            self.path.append(name)
            if name not in new_e:
                self.add("ENUM_REMOVED")
            elif name not in old_e:
                self.add("ENUM_ADDED")
            else:
                self.enum(old_e[name], new_e[name])
            self.path.pop()

    def enum(self, old: pb.EnumDescriptorProto, new: pb.EnumDescriptorProto) -> None:
        old_v, new_v = {v.number: v.name for v in old.value}, {v.number: v.name for v in new.value}
        for number in sorted(old_v.keys() | new_v.keys()):
            if number not in new_v:
                self.add("ENUM_CONST_REMOVED", str(number))
            elif number not in old_v:
                self.add("ENUM_CONST_ADDED", str(number))
            elif old_v[number] != new_v[number]:
                self.add("ENUM_CONST_CHANGED", str(number))

    def message(self, old: pb.DescriptorProto, new: pb.DescriptorProto, proto3: tuple[bool, bool]) -> None:
        if id(old) in self.comparing:
            return
        self.comparing.add(id(old))
        try:
            self._fields(old, new, proto3)
            self.types(old.nested_type, old.enum_type, new.nested_type, new.enum_type, proto3)
        finally:
            self.comparing.discard(id(old))

    def _fields(self, old: pb.DescriptorProto, new: pb.DescriptorProto, proto3: tuple[bool, bool]) -> None:
        old_by, old_oneof, old_oneofs = _by_number(old)
        new_by, new_oneof, new_oneofs = _by_number(new)
        deleted = {name for name, members in old_oneofs.items()
                   if name not in new_oneofs and not any(n in new_by for n in members)}
        for name, members in new_oneofs.items():
            # members that came from more than one place were independent before: now they exclude each other
            origins = {("oneof", old_oneof[n]) if n in old_oneof else ("field", n)
                       for n in members if n in old_by}
            moved_in = sum(1 for n in members if n in old_by and n not in old_oneof)
            if len(origins) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF",
                         name)
        for name in sorted(old_oneofs.keys() | new_oneofs.keys()):
            if name not in new_oneofs:
                self.add("ONEOF_REMOVED", name)
            elif name not in old_oneofs:
                self.add("ONEOF_ADDED", name)
        for number in sorted(old_by.keys() | new_by.keys()):
            self._field(number, old_by.get(number), new_by.get(number), old_oneof.get(number),
                        new_oneof.get(number), deleted, proto3)

    def _field(self, number, old, new, old_oneof, new_oneof, deleted, proto3) -> None:
        tag = str(number)
        if new is None:
            if old_oneof is not None:
                if old_oneof not in deleted:
                    self.add("ONEOF_FIELD_REMOVED", old_oneof, tag)
            else:
                self.add("REQUIRED_FIELD_REMOVED" if old.label == F.LABEL_REQUIRED else "FIELD_REMOVED", tag)
        elif old is None:
            if new_oneof is not None:
                self.add("ONEOF_FIELD_ADDED", new_oneof, tag)
            else:
                self.add("REQUIRED_FIELD_ADDED" if new.label == F.LABEL_REQUIRED else "FIELD_ADDED", tag)
        else:
            if old_oneof is not None and new_oneof is None:
                self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", tag)
            where = [new_oneof, tag] if new_oneof is not None else [tag]
            self.path += where
            if old.name != new.name:
                self.add("FIELD_NAME_CHANGED")
            self.labels_and_types(_label(old, old_oneof, proto3[0]), _label(new, new_oneof, proto3[1]),
                                  self._type(old, self.old_types), self._type(new, self.new_types))
            del self.path[-len(where):]

    @staticmethod
    def _type(f: pb.FieldDescriptorProto, types: dict[str, TypeInfo]) -> tuple:
        """("scalar", name) | ("enum", full name) | ("message", full name) | ("map", key, value)."""
        if f.type in SCALAR_NAMES:
            return ("scalar", SCALAR_NAMES[f.type])
        full = f.type_name.lstrip(".")
        if f.type == F.TYPE_ENUM:
            return ("enum", full)
        info = types.get(full)
        if info is not None and info.is_map:
            key, value = info.proto.field[0], info.proto.field[1]
            return ("map", _Diff._type(key, types), _Diff._type(value, types))
        return ("message", full)

    def labels_and_types(self, old_label, new_label, old_type: tuple, new_type: tuple) -> None:
        old_kind, new_kind = _kind(old_type), _kind(new_type)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED")
        elif old_kind == "SCALAR":
            old_scalar, new_scalar = _scalar_kind(old_type), _scalar_kind(new_type)
            if old_scalar != new_scalar:
                self.add("FIELD_SCALAR_KIND_CHANGED")
            elif old_label is not None and new_label is not None and old_label != new_label:
                self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if old_scalar == "STRING_OR_BYTES"
                         else "FIELD_NUMERIC_LABEL_CHANGED")
        elif old_kind == "MESSAGE":
            self.message_types(old_type[1], new_type[1])
        else:
            self.labels_and_types(None, None, old_type[1], new_type[1])
            self.labels_and_types(None, None, old_type[2], new_type[2])

    def message_types(self, old_full: str, new_full: str) -> None:
        old, new = self.old_types.get(old_full), self.new_types.get(new_full)
        if old is None or new is None:
            if old_full != new_full:
                self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        old_local, new_local = _local(old_full, old.package), _local(new_full, new.package)
        if old_local != new_local:
            self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        if old.source == new.source:
            return  # the same file on both sides: declared here it is compared as a type of its own
        sub = _Diff(self.old_types, self.new_types, old_local.split("."), [], set(self.comparing))
        sub.message(old.proto, new.proto, (old.proto3, new.proto3))
        self.found += sub.found
        if any(kind not in COMPATIBLE for kind, _ in sub.found):
            self.add("FIELD_NAMED_TYPE_CHANGED")


def _by_number(msg: pb.DescriptorProto):
    """Fields by number, the oneof each member belongs to, and each oneof's member numbers.

    A proto3 `optional` field's synthetic oneof is no oneof here: the field counts as a top-level one.
    """
    by, oneof_of, oneofs = {}, {}, {}
    for f in msg.field:
        by[f.number] = f
        if f.HasField("oneof_index") and not f.proto3_optional:
            name = msg.oneof_decl[f.oneof_index].name
            oneof_of[f.number] = name
            oneofs.setdefault(name, []).append(f.number)
    return by, oneof_of, oneofs


def _label(f: pb.FieldDescriptorProto, oneof: str | None, proto3: bool) -> str | None:
    """The label as Confluent reads it: none for a oneof member or a plain proto3 field."""
    if f.proto3_optional:
        return "OPTIONAL"
    if oneof is not None:
        return None
    if f.label == F.LABEL_REPEATED:
        return "REPEATED"
    if proto3:
        return None
    return "REQUIRED" if f.label == F.LABEL_REQUIRED else "OPTIONAL"


def _kind(type_: tuple) -> str:
    return {"scalar": "SCALAR", "enum": "SCALAR", "map": "MAP"}.get(type_[0], "MESSAGE")


def _scalar_kind(type_: tuple) -> str:
    return "GENERAL_NUMBER" if type_[0] == "enum" else SCALAR_KIND[type_[1]]


def _local(full: str, package: str) -> str:
    return full[len(package) + 1:] if package and full.startswith(package + ".") else full

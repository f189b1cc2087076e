"""A resolved FileDescriptorProto back to `.proto` text: the canonical text the registry serves and compares.

One layout whatever the input looked like (two-space indents, no comments, fields in declaration order with
a oneof's members at its first member's place, options after the declarations they belong to), so two
schemas that differ only in whitespace, comments or how they spelled a type name print the same.
"""

from __future__ import annotations

import math

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import text_format

from mmlog.schemas.protobuf_text import FIELD_MAX, SCALARS

F = pb.FieldDescriptorProto
SCALAR_NAMES = {number: name for name, number in SCALARS.items()}
LABEL_NAMES = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required", F.LABEL_REPEATED: "repeated"}
# Options that the .proto syntax spells another way, or that protoc sets itself.
IMPLIED = {"map_entry"}


def print_file(file: pb.FileDescriptorProto) -> str:
    syntax = file.syntax or "proto2"
    out = [f'syntax = "{syntax}";']
    if file.package:
        out.append(f"package {file.package};")
    imports = []
    for i, dep in enumerate(file.dependency):
        kind = "public " if i in file.public_dependency else "weak " if i in file.weak_dependency else ""
        imports.append(f'import {kind}"{dep}";')
    if imports:
        out += ["", *imports]
    opts = option_lines(file.options)
    if opts:
        out += ["", *opts]
    printer = _Printer(file.package, syntax == "proto3")
    for msg in file.message_type:
        out += ["", *printer.message(msg, ())]
    for en in file.enum_type:
        out += ["", *enum(en)]
    out += [line for block in printer.extends(file.extension, ()) for line in ("", *block)]
    for svc in file.service:
        out += ["", *printer.service(svc)]
    return "\n".join(out) + "\n"


def indent(lines: list[str]) -> list[str]:
    return ["  " + line if line else line for line in lines]


class _Printer:
    def __init__(self, package: str, proto3: bool):
        self.package = package
        self.proto3 = proto3

    def type_name(self, full: str) -> str:
        """A resolved `.pkg.Outer.Inner` as the file would write it: relative to its own package."""
        name = full.lstrip(".")
        if self.package and name.startswith(self.package + "."):
            return name[len(self.package) + 1:]
        return name

    def message(self, msg: pb.DescriptorProto, scope: tuple) -> list[str]:
        """A message; nested messages go between the fields where that keeps the descriptor's order of
        nested types, as map entries and groups take their place at their field (message indexes count them)."""
        body = option_lines(msg.options)
        entries = {n.name: n for n in msg.nested_type if n.options.map_entry}
        made = {f.number: generated(f, entries) for f in msg.field}
        queue = [n for n in msg.nested_type]
        inner = (*scope, msg.name)

        def nested_until(name: str | None, rest: bool = False) -> list[str]:
            """The nested messages declared before the one a map or group field makes (`rest`: all left)."""
            if not rest and (name is None or all(n.name != name for n in queue)):
                return []
            out = []
            while queue:
                n = queue.pop(0)
                if n.name == name:
                    break
                if n.name not in entries and n.name not in made.values():
                    out += self.message(n, inner)
            return out

        printed_oneofs = set()
        for f in msg.field:
            if f.HasField("oneof_index") and not f.proto3_optional:
                if f.oneof_index not in printed_oneofs:
                    printed_oneofs.add(f.oneof_index)
                    for member in msg.field:
                        if member.HasField("oneof_index") and member.oneof_index == f.oneof_index:
                            body += nested_until(made[member.number])
                    body += self.oneof(msg, f.oneof_index, scope)
                continue
            body += nested_until(made[f.number])
            body += self.field(msg, f, entries, scope, in_oneof=False)
        body += nested_until(None, rest=True)
        body += reserved(msg.reserved_range, msg.reserved_name, FIELD_MAX + 1, exclusive=True)
        for r in msg.extension_range:
            body.append(f"extensions {span(r.start, r.end - 1, FIELD_MAX)}{compact(r.options)};")
        for en in msg.enum_type:
            body += enum(en)
        for block in self.extends(msg.extension, inner):
            body += block
        return [f"message {msg.name} {{", *indent(body), "}"] if body else [f"message {msg.name} {{}}"]

    def oneof(self, msg: pb.DescriptorProto, index: int, scope: tuple) -> list[str]:
        decl = msg.oneof_decl[index]
        body = option_lines(decl.options)
        for f in msg.field:
            if f.HasField("oneof_index") and f.oneof_index == index:
                body += self.field(msg, f, {}, scope, in_oneof=True)
        return [f"oneof {decl.name} {{", *indent(body), "}"]

    def field(self, msg, f: pb.FieldDescriptorProto, entries: dict, scope: tuple, in_oneof: bool) -> list[str]:
        local = f.type_name.rsplit(".", 1)[-1]
        if f.label == F.LABEL_REPEATED and local in entries and f.type == F.TYPE_MESSAGE:
            key, value = entries[local].field[0], entries[local].field[1]
            head = f"map<{self.field_type(key)}, {self.field_type(value)}> {f.name} = {f.number}"
            return [head + compact(f.options) + ";"]
        label = self.label(f, in_oneof)
        if f.type == F.TYPE_GROUP:
            group = next(n for n in msg.nested_type if n.name == local)
            inner = self.message(group, scope)[1:-1]
            return [f"{label}group {local} = {f.number}{compact(f.options)} {{", *inner, "}"]
        return [f"{label}{self.field_type(f)} {f.name} = {f.number}{field_options(f)};"]

    def label(self, f: pb.FieldDescriptorProto, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if self.proto3 and f.label == F.LABEL_OPTIONAL:
            return "optional " if f.proto3_optional else ""
        return LABEL_NAMES[f.label] + " "

    def field_type(self, f: pb.FieldDescriptorProto) -> str:
        if f.type in SCALAR_NAMES:
            return SCALAR_NAMES[f.type]
        return self.type_name(f.type_name)

    def extends(self, fields, scope: tuple) -> list[list[str]]:
        blocks: dict[str, list[str]] = {}
        for f in fields:
            blocks.setdefault(f.extendee, []).extend(self.field(None, f, {}, scope, in_oneof=False))
        return [[f"extend {self.type_name(extendee)} {{", *indent(body), "}"] for extendee, body in blocks.items()]

    def service(self, svc: pb.ServiceDescriptorProto) -> list[str]:
        body = option_lines(svc.options)
        for m in svc.method:
            head = (f"rpc {m.name}({'stream ' if m.client_streaming else ''}{self.type_name(m.input_type)}) "
                    f"returns ({'stream ' if m.server_streaming else ''}{self.type_name(m.output_type)})")
            opts = option_lines(m.options)
            body += [head + ";"] if not opts else [head + " {", *indent(opts), "}"]
        return [f"service {svc.name} {{", *indent(body), "}"]


def generated(f: pb.FieldDescriptorProto, entries: dict) -> str | None:
    """The nested message a field makes by being declared (a map's entry, a group), or None."""
    local = f.type_name.rsplit(".", 1)[-1]
    if f.type == F.TYPE_GROUP or (f.label == F.LABEL_REPEATED and local in entries):
        return local
    return None


def enum(en: pb.EnumDescriptorProto) -> list[str]:
    body = option_lines(en.options)
    body += [f"{v.name} = {v.number}{compact(v.options)};" for v in en.value]
    body += reserved(en.reserved_range, en.reserved_name, 2147483647, exclusive=False)
    return [f"enum {en.name} {{", *indent(body), "}"]


def reserved(ranges, names, top: int, exclusive: bool) -> list[str]:
    out = []
    if len(ranges):
        spans = [span(r.start, r.end - 1 if exclusive else r.end, top - 1 if exclusive else top) for r in ranges]
        out.append(f"reserved {', '.join(spans)};")
    if len(names):
        out.append(f"reserved {', '.join(quote(n) for n in names)};")
    return out


def span(start: int, end: int, top: int) -> str:
    if end == start:
        return str(start)
    return f"{start} to {'max' if end >= top else end}"


def option_pairs(options) -> list[tuple[str, str]]:
    """(name, value text) of each option set: the standard ones by field, then the uninterpreted ones."""
    pairs = []
    for desc, value in options.ListFields():
        if desc.name == "uninterpreted_option" or desc.name in IMPLIED:
            continue
        if desc.is_repeated:
            pairs += [(desc.name, value_text(desc, v)) for v in value]
        else:
            pairs.append((desc.name, value_text(desc, value)))
    for u in options.uninterpreted_option:
        name = ".".join(f"({p.name_part})" if p.is_extension else p.name_part for p in u.name)
        pairs.append((name, uninterpreted_text(u)))
    return pairs


def option_lines(options) -> list[str]:
    return [f"option {name} = {value};" for name, value in option_pairs(options)]


def compact(options) -> str:
    pairs = option_pairs(options)
    return f" [{', '.join(f'{n} = {v}' for n, v in pairs)}]" if pairs else ""


def field_options(f: pb.FieldDescriptorProto) -> str:
    pairs = []
    if f.HasField("default_value"):
        pairs.append(("default", default_text(f)))
    if f.HasField("json_name") and f.json_name != json_name(f.name):
        pairs.append(("json_name", quote(f.json_name)))
    pairs += option_pairs(f.options)
    return f" [{', '.join(f'{n} = {v}' for n, v in pairs)}]" if pairs else ""


def default_text(f: pb.FieldDescriptorProto) -> str:
    if f.type == F.TYPE_STRING:
        return quote(f.default_value)
    if f.type == F.TYPE_BYTES:
        return '"' + f.default_value + '"'  # kept C-escaped in the descriptor
    return f.default_value


def json_name(name: str) -> str:
    """The JSON name protoc gives a field when none is written: `foo_bar` -> `fooBar`."""
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        else:
            out.append(ch.upper() if upper else ch)
            upper = False
    return "".join(out)


def value_text(desc, value) -> str:
    if desc.enum_type is not None:
        found = desc.enum_type.values_by_number.get(value)
        return found.name if found else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bytes):
        return quote(value.decode("latin-1"))
    if isinstance(value, float):
        return float_text(value)
    if hasattr(value, "ListFields"):
        return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
    return str(value)


def uninterpreted_text(u: pb.UninterpretedOption) -> str:
    if u.HasField("identifier_value"):
        return u.identifier_value
    if u.HasField("positive_int_value"):
        return str(u.positive_int_value)
    if u.HasField("negative_int_value"):
        return str(u.negative_int_value)
    if u.HasField("double_value"):
        return float_text(u.double_value)
    if u.HasField("string_value"):
        return quote(u.string_value.decode("utf-8", "replace"))
    return u.aggregate_value


def float_text(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def quote(text: str) -> str:
    """A string literal: quotes and backslashes escaped, control characters as octal escapes."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'

"""`.proto` text (proto2 or proto3) to a FileDescriptorProto, the form the registry keeps a Protobuf schema in.

proto-schema-parser reads the text into a syntax tree; this module lays the tree out as a
FileDescriptorProto the way protoc does (map fields as nested `...Entry` messages, proto3 `optional` as a
synthetic oneof, groups as nested messages). Type names stay as written: the descriptor pool the caller
adds the file to resolves them against the file's scopes and imports, and reports what does not resolve.
"""

from __future__ import annotations

import re

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2 as pb
from google.protobuf import text_format
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from mmlog.schemas.errors import InvalidSchema

F = pb.FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}
LABELS = {ast.FieldCardinality.OPTIONAL: F.LABEL_OPTIONAL, ast.FieldCardinality.REQUIRED: F.LABEL_REQUIRED,
          ast.FieldCardinality.REPEATED: F.LABEL_REPEATED, None: F.LABEL_OPTIONAL}
FIELD_MAX = 536870911  # "max" in a message's reserved and extension ranges (those ends are exclusive)
ENUM_MAX = 2147483647  # "max" in an enum's reserved ranges (inclusive)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
           "'": "'", '"': '"', "?": "?"}
ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)


class _Refuse(ErrorListener):
    """Turns the first syntax error into InvalidSchema instead of a line on stderr and a guess."""

    def syntaxError(self, recognizer, offending_symbol, line, column, msg, e):
        raise InvalidSchema(f"line {line}:{column}: {msg}")


def _refusing(recognizer) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Refuse())


def compile_text(text: str, name: str) -> pb.FileDescriptorProto:
    """The FileDescriptorProto of `.proto` text, type names unresolved; InvalidSchema on bad syntax."""
    try:
        tree = Parser(setup_lexer=_refusing, setup_parser=_refusing).parse(text)
    except InvalidSchema:
        raise
    except Exception as e:  # the tree builder trips on what the grammar let through
        raise InvalidSchema(f"not a .proto file: {e}") from e
    if tree.edition is not None:
        raise InvalidSchema(f"edition {tree.edition!r}: only proto2 and proto3 syntax are supported")
    if tree.syntax not in (None, "proto2", "proto3"):
        raise InvalidSchema(f"unknown syntax {tree.syntax!r}: proto2 or proto3")
    out = pb.FileDescriptorProto(name=name)
    if tree.syntax == "proto3":
        out.syntax = "proto3"
    _File(out).add(tree.file_elements)
    return out


class _File:
    def __init__(self, out: pb.FileDescriptorProto):
        self.out = out
        self.proto3 = out.syntax == "proto3"

    def add(self, elements) -> None:
        for el in elements:
            if isinstance(el, ast.Package):
                if self.out.HasField("package"):
                    raise InvalidSchema("more than one package statement")
                self.out.package = el.name
            elif isinstance(el, ast.Import):
                if el.public:
                    self.out.public_dependency.append(len(self.out.dependency))
                if el.weak:
                    self.out.weak_dependency.append(len(self.out.dependency))
                self.out.dependency.append(unescape(el.name))
            elif isinstance(el, ast.Option):
                set_option(self.out.options, el)
            elif isinstance(el, ast.Message):
                self.message(self.out.message_type.add(name=el.name), el.elements)
            elif isinstance(el, ast.Enum):
                enum(self.out.enum_type.add(name=el.name), el.elements)
            elif isinstance(el, ast.Extension):
                self.extend(self.out.extension, el)
            elif isinstance(el, ast.Service):
                service(self.out.service.add(name=el.name), el.elements)

    def message(self, msg: pb.DescriptorProto, elements) -> None:
        synthetic = []  # proto3 `optional` fields: their oneofs follow the declared ones, as protoc puts them
        for el in elements:
            if isinstance(el, ast.Field):
                f = self.field(msg.field.add(), el)
                if self.proto3 and el.cardinality == ast.FieldCardinality.OPTIONAL:
                    f.proto3_optional = True
                    synthetic.append(f)
            elif isinstance(el, ast.MapField):
                self.map_field(msg, el)
            elif isinstance(el, ast.Group):
                self.group(msg, msg.field.add(), el)
            elif isinstance(el, ast.OneOf):
                self.oneof(msg, el)
            elif isinstance(el, ast.Option):
                set_option(msg.options, el)
            elif isinstance(el, ast.ExtensionRange):
                for start, end in ranges(el.ranges, FIELD_MAX):
                    r = msg.extension_range.add(start=start, end=end + 1)
                    for opt in el.options:
                        set_option(r.options, opt)
            elif isinstance(el, ast.Reserved):
                for start, end in ranges(el.ranges, FIELD_MAX):
                    msg.reserved_range.add(start=start, end=end + 1)
                msg.reserved_name.extend(unescape(n) for n in el.names)
            elif isinstance(el, ast.Message):
                self.message(msg.nested_type.add(name=el.name), el.elements)
            elif isinstance(el, ast.Enum):
                enum(msg.enum_type.add(name=el.name), el.elements)
            elif isinstance(el, ast.Extension):
                self.extend(msg.extension, el)
        taken = {o.name for o in msg.oneof_decl}
        for f in synthetic:
            oneof_name = "_" + f.name
            while oneof_name in taken:
                oneof_name = "X" + oneof_name
            taken.add(oneof_name)
            f.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=oneof_name)

    def field(self, f: pb.FieldDescriptorProto, el: ast.Field) -> pb.FieldDescriptorProto:
        f.name, f.number, f.label = el.name, el.number, LABELS[el.cardinality]
        if el.type in SCALARS:
            f.type = SCALARS[el.type]
        else:
            f.type_name = el.type
        for opt in el.options:
            if opt.name == "default":
                f.default_value = default_value(el.type, opt.value)
            elif opt.name == "json_name":
                f.json_name = unescape(opt.value) if isinstance(opt.value, str) else str(opt.value)
            else:
                set_option(f.options, opt)
        return f

    def map_field(self, msg: pb.DescriptorProto, el: ast.MapField) -> None:
        entry = msg.nested_type.add(name=entry_name(el.name))
        entry.options.map_entry = True
        for number, (name, type_) in enumerate((("key", el.key_type), ("value", el.value_type)), 1):
            self.field(entry.field.add(), ast.Field(name=name, number=number, type=type_,
                                                    cardinality=ast.FieldCardinality.OPTIONAL))
        f = msg.field.add(name=el.name, number=el.number, label=F.LABEL_REPEATED, type_name=entry.name)
        for opt in el.options:
            set_option(f.options, opt)

    def group(self, msg: pb.DescriptorProto, f: pb.FieldDescriptorProto, el: ast.Group) -> None:
        self.message(msg.nested_type.add(name=el.name), el.elements)
        f.name, f.number, f.label = el.name.lower(), el.number, LABELS[el.cardinality]
        f.type, f.type_name = F.TYPE_GROUP, el.name

    def oneof(self, msg: pb.DescriptorProto, el: ast.OneOf) -> None:
        index = len(msg.oneof_decl)
        decl = msg.oneof_decl.add(name=el.name)
        for member in el.elements:
            if isinstance(member, ast.Option):
                set_option(decl.options, member)
            elif isinstance(member, ast.Field):
                self.field(msg.field.add(), member).oneof_index = index
            elif isinstance(member, ast.Group):
                f = msg.field.add()
                self.group(msg, f, member)
                f.oneof_index = index

    def extend(self, into, el: ast.Extension) -> None:
        for member in el.elements:
            if isinstance(member, ast.Field):
                self.field(into.add(), member).extendee = el.typeName


def enum(out: pb.EnumDescriptorProto, elements) -> None:
    for el in elements:
        if isinstance(el, ast.EnumValue):
            value = out.value.add(name=el.name, number=el.number)
            for opt in el.options:
                set_option(value.options, opt)
        elif isinstance(el, ast.Option):
            set_option(out.options, el)
        elif isinstance(el, ast.EnumReserved):
            for start, end in ranges(el.ranges, ENUM_MAX):
                out.reserved_range.add(start=start, end=end)
            out.reserved_name.extend(unescape(n) for n in el.names)


def service(out: pb.ServiceDescriptorProto, elements) -> None:
    for el in elements:
        if isinstance(el, ast.Method):
            m = out.method.add(name=el.name, input_type=el.input_type.type, output_type=el.output_type.type)
            if el.input_type.stream:
                m.client_streaming = True
            if el.output_type.stream:
                m.server_streaming = True
            for opt in el.elements:
                if isinstance(opt, ast.Option):
                    set_option(m.options, opt)
        elif isinstance(el, ast.Option):
            set_option(out.options, el)


def entry_name(field_name: str) -> str:
    """The nested message protoc makes for a map field: `my_map` -> `MyMapEntry`."""
    parts = field_name.split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Entry"


def ranges(texts: list[str], top: int) -> list[tuple[int, int]]:
    """`["4", "9 to 11", "20 to max"]` -> inclusive (start, end) pairs."""
    out = []
    for text in texts:
        start, _, end = (part.strip() for part in text.partition("to"))
        try:
            low = int(start, 0)
            out.append((low, top if end == "max" else int(end, 0) if end else low))
        except ValueError:
            raise InvalidSchema(f"bad range {text!r}") from None
    return out


def unescape(text: str) -> str:
    """A string literal's contents as the parser leaves them (quotes gone, escapes kept) -> the string."""
    if "\\" not in text:
        return text

    def one(m: re.Match) -> str:
        s = m.group(1)
        if s[0] in "xX":
            return chr(int(s[1:], 16))
        if s[0] in "01234567":
            return chr(int(s, 8))
        if s[0] in "uU":
            return chr(int(s[1:], 16))
        return ESCAPES.get(s, "\\" + s)
    # octal and hex escapes name bytes: gather them as latin-1 and read the result as UTF-8 when it is
    raw = ESCAPE.sub(one, text)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def scalar_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, float):
        return repr(value)
    return str(value)


def default_value(type_: str, value) -> str:
    """A proto2 `[default = ...]` as FileDescriptorProto.default_value holds it."""
    if type_ == "string" and isinstance(value, str):
        return unescape(value)
    if type_ == "bytes" and isinstance(value, str):
        return value  # bytes defaults stay C-escaped in the descriptor
    return scalar_text(value)


def set_option(options, opt: ast.Option) -> None:
    """A standard option onto its field of `options`; a custom `(name)` one as an uninterpreted option."""
    desc = options.DESCRIPTOR.fields_by_name.get(opt.name)
    if desc is not None and desc.message_type is not None and isinstance(opt.value, ast.MessageLiteral):
        into = getattr(options, opt.name)
        value = into.add() if desc.is_repeated else into
        try:
            text_format.Parse(aggregate(opt.value)[1:-1], value)
            return
        except text_format.ParseError:  # kept as written, uninterpreted, like a custom option
            if desc.is_repeated:
                del into[-1]
            else:
                options.ClearField(opt.name)
    if desc is None or desc.message_type is not None:
        uninterpreted(options.uninterpreted_option.add(), opt)
        return
    value = opt.value
    try:
        if desc.enum_type is not None:
            value = desc.enum_type.values_by_name[scalar_text(value)].number
        elif desc.type == desc.TYPE_BOOL:
            if not isinstance(value, bool):
                raise ValueError(value)
        elif desc.type == desc.TYPE_STRING:
            value = unescape(value) if isinstance(value, str) else scalar_text(value)
        elif desc.type in (desc.TYPE_DOUBLE, desc.TYPE_FLOAT):
            value = float(scalar_text(value))
        elif isinstance(value, str):
            value = int(value, 0)
        if desc.is_repeated:
            getattr(options, opt.name).append(value)
        else:
            setattr(options, opt.name, value)
    except (KeyError, ValueError, TypeError):
        raise InvalidSchema(f"option {opt.name}: bad value {scalar_text(opt.value)!r}") from None


def uninterpreted(out: pb.UninterpretedOption, opt: ast.Option) -> None:
    for part, is_ext in name_parts(opt.name):
        out.name.add(name_part=part, is_extension=is_ext)
    value = opt.value
    if isinstance(value, (bool, ast.Identifier)):
        out.identifier_value = scalar_text(value)
    elif isinstance(value, int):
        if value >= 0:
            out.positive_int_value = value
        else:
            out.negative_int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = unescape(value).encode()
    else:
        out.aggregate_value = aggregate(value)


def name_parts(name: str) -> list[tuple[str, bool]]:
    """`(foo.bar).baz.qux` -> [("foo.bar", True), ("baz", False), ("qux", False)]."""
    parts = []
    for m in re.finditer(r"\(([^)]*)\)|([^.()]+)", name):
        parts.append((m.group(1), True) if m.group(1) is not None else (m.group(2), False))
    return parts


def aggregate(value) -> str:
    """A message literal back as text format, the way an uninterpreted option keeps it."""
    if isinstance(value, ast.MessageLiteral):
        fields = [f"{el.name}: {aggregate(el.value)}" for el in value.elements
                  if isinstance(el, ast.MessageLiteralField)]
        return "{ " + " ".join(fields) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(aggregate(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value + '"'
    return scalar_text(value)

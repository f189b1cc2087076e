"""Avro's schema resolution, asked as Confluent Schema Registry asks it: can a reader read a writer's data?

The rules are Avro's: same types match (records by name, reader aliases honoured; enums must hold every
writer symbol unless the reader has a default symbol; fixed sizes must agree); int, long and float widen
to the wider numbers and string and bytes read each other; every branch of a writer union must be readable,
and a reader union reads a value if one of its branches does; a reader field missing from the writer needs
a default. Each problem is reported with Avro's incompatibility type, its location as a JSON pointer and
"the reader schema"/"the writer schema", which `compatibility.check` names new and old. Recursive types
are walked once per reader/writer pair: a pair met again while it is being checked is assumed to match.
"""

from __future__ import annotations

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
# What a reader of each primitive type also reads, besides its own type.
PROMOTIONS = {"long": {"int"}, "float": {"int", "long"}, "double": {"int", "long", "float"},
              "bytes": {"string"}, "string": {"bytes"}}


def reader_problems(reader, writer) -> list[str]:
    """Confluent's verbose reasons why `reader` (an AvroSchema) cannot read data written with `writer`."""
    checker = _Checker(reader.named, writer.named)
    return [_describe(kind, "/" + "/".join(where), info)
            for kind, where, info in checker.compare(reader.parsed, writer.parsed)]


def _describe(kind: str, path: str, info: str) -> str:
    text = {
        "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{path}' in the reader schema does "
                               "not match with the writer schema",
        "TYPE_MISMATCH": f"The type (path '{path}') of a field in the reader schema does not match with "
                         "the writer schema",
        "NAME_MISMATCH": f"The name of the schema has changed (path '{path}')",
        "MISSING_ENUM_SYMBOLS": f"The reader schema is missing enum symbols '{info}' at path '{path}' in "
                                "the writer schema",
        "MISSING_UNION_BRANCH": f"The reader schema is missing a type inside a union field at path "
                                f"'{path}' in the writer schema",
        "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{info}' at path '{path}' in the reader schema "
                                              "has no default value and is missing in the writer schema",
    }[kind]
    return f"{{errorType:'{kind}', description:'{text}', additionalInfo:'{info}'}}"


def _kind(schema) -> str:
    """Avro's type of a (resolved) schema: a primitive, record, enum, fixed, array, map or union."""
    if isinstance(schema, list):
        return "union"
    kind = schema if isinstance(schema, str) else schema["type"]
    return "record" if kind == "error" else kind


class _Checker:
    """One comparison; problems are (type, location below the pair compared, additional info)."""

    def __init__(self, reader_named: dict, writer_named: dict):
        self.named = (reader_named, writer_named)
        self.done: dict = {}  # (id(reader), id(writer)) -> problems, relative to that pair
        self.in_progress: set = set()

    def resolve(self, schema, side: int):
        """A named type's definition for a name; anything else as it is."""
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return self.named[side][schema]
        if isinstance(schema, dict):
            if schema.get("name") in self.named[side]:
                return self.named[side][schema["name"]]  # one object per named type, so recursion is seen
            if schema["type"] in self.named[side]:
                return self.named[side][schema["type"]]  # {"type": "a.Named"}
        return schema

    def compare(self, reader, writer) -> list:
        reader, writer = self.resolve(reader, 0), self.resolve(writer, 1)
        key = (id(reader), id(writer))
        if key in self.done:
            return self.done[key]
        if key in self.in_progress:
            return []  # a recursive type met again: compatible unless shown otherwise elsewhere
        self.in_progress.add(key)
        try:
            problems = self.calculate(reader, writer)
        finally:
            self.in_progress.discard(key)
        self.done[key] = problems
        return problems

    def calculate(self, reader, writer) -> list:
        r, w = _kind(reader), _kind(writer)
        if r == w:
            return self.same_kind(r, reader, writer)
        if w == "union":
            return [p for branch in writer for p in self.compare(reader, branch)]
        if r == "union":
            if any(not self.compare(branch, writer) for branch in reader):
                return []
            return [("MISSING_UNION_BRANCH", [], f"reader union lacking writer type: {w.upper()}")]
        if w in PROMOTIONS.get(r, ()):
            return []
        return [_mismatch(r, w)]

    def same_kind(self, kind: str, reader, writer) -> list:
        if kind in PRIMITIVES:
            return []
        if kind == "array":
            return _under(["items"], self.compare(reader["items"], writer["items"]))
        if kind == "map":
            return _under(["values"], self.compare(reader["values"], writer["values"]))
        if kind == "union":
            problems = []
            for i, branch in enumerate(writer):
                if self.compare(reader, branch):
                    problems.append(("MISSING_UNION_BRANCH", [str(i)],
                                     f"reader union lacking writer type: {_kind(self.resolve(branch, 1)).upper()}"))
            return problems
        problems = _names(reader, writer)
        if kind == "fixed" and reader["size"] != writer["size"]:
            problems.append(("FIXED_SIZE_MISMATCH", ["size"],
                             f"expected: {writer['size']}, found: {reader['size']}"))
        if kind == "enum":
            problems += _symbols(reader, writer)
        if kind == "record":
            problems += self.fields(reader, writer)
        return problems

    def fields(self, reader: dict, writer: dict) -> list:
        problems = []
        for pos, field in enumerate(reader["fields"]):
            where = ["fields", str(pos)]
            source = _writer_field(writer, field)
            if source is not None:
                problems += _under(where + ["type"], self.compare(field["type"], source["type"]))
            elif "default" not in field:
                problems.append(("READER_FIELD_MISSING_DEFAULT_VALUE", where, field["name"]))
        return problems


def _under(prefix: list, problems: list) -> list:
    return [(kind, prefix + where, info) for kind, where, info in problems]


def _mismatch(reader_kind: str, writer_kind: str) -> tuple:
    return ("TYPE_MISMATCH", [], f"reader type: {reader_kind.upper()} not compatible with writer type: "
                                 f"{writer_kind.upper()}")


def _aliases(schema: dict) -> set:
    space = schema["name"].rpartition(".")[0]
    return {a if "." in a or not space else f"{space}.{a}" for a in schema.get("aliases", ())}


def _names(reader: dict, writer: dict) -> list:
    """Named types match by their short names, or by a reader alias naming the writer's full name."""
    if reader["name"].rpartition(".")[2] == writer["name"].rpartition(".")[2] or \
            writer["name"] in _aliases(reader):
        return []
    return [("NAME_MISMATCH", ["name"], f"expected: {writer['name']}")]


def _symbols(reader: dict, writer: dict) -> list:
    missing = sorted(set(writer["symbols"]) - set(reader["symbols"]))
    if not missing or reader.get("default") in reader["symbols"]:
        return []
    return [("MISSING_ENUM_SYMBOLS", ["symbols"], "[" + ", ".join(missing) + "]")]


def _writer_field(writer: dict, field: dict):
    """The writer's field a reader field reads: the one of its name, or of one of its aliases."""
    by_name = {f["name"]: f for f in writer["fields"]}
    found = [by_name[n] for n in (field["name"], *field.get("aliases", ())) if n in by_name]
    return found[0] if found else None

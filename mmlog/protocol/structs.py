"""The parts schema tables are written with: version ranges, `Field`s, the `StructType` each struct of fields
makes and the `Struct` class its values are instances of; `Placeholder` and `Encoded`, which stand in a value
for bytes the codec does not encode itself. schema.py tells how they fit together; codegen.py compiles them.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable

from . import primitives as p

OPEN = 0x7FFF  # the upper bound of an open-ended range such as "3+"

VersionRange = tuple[int, int] | None


def parse_versions(spec: str | tuple | None) -> VersionRange:
    """Parse a Kafka version range: "3+", "1-4", "2", "none" (or a tuple, None = open)."""
    if spec is None or spec == "none":
        return None
    if isinstance(spec, tuple):
        low, high = spec
        return (low, OPEN if high is None else high)
    if spec.endswith("+"):
        return (int(spec[:-1]), OPEN)
    low, _, high = spec.partition("-")
    return (int(low), int(high or low))


def in_range(versions: VersionRange, version: int) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


# --- field types ------------------------------------------------------------------

SCALARS = {
    "bool": (p.read_bool, p.write_bool, False),
    "int8": (p.read_int8, p.write_int8, 0),
    "int16": (p.read_int16, p.write_int16, 0),
    "uint16": (p.read_uint16, p.write_uint16, 0),
    "int32": (p.read_int32, p.write_int32, 0),
    "uint32": (p.read_uint32, p.write_uint32, 0),
    "int64": (p.read_int64, p.write_int64, 0),
    "float64": (p.read_float64, p.write_float64, 0.0),
    "uuid": (p.read_uuid, p.write_uuid, uuid.UUID(int=0)),
}

_VARIABLE_DEFAULTS = {"string": "", "bytes": b"", "records": None}

PRIMITIVE_TYPES = frozenset(SCALARS) | frozenset(_VARIABLE_DEFAULTS)

_MISSING = object()


class Placeholder:
    """Stands for ``size`` bytes of a bytes field that the caller sends itself.

    ``payload`` is the caller's (e.g. a file range for ``os.sendfile``).
    """

    __slots__ = ("size", "payload")

    def __init__(self, size: int, payload: Any = None) -> None:
        self.size = size
        self.payload = payload

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Placeholder(size={self.size}, payload={self.payload!r})"


class Encoded:
    """A struct value already encoded for one version (`Message.encode_item`): written as its bytes.

    ``errors`` are the value's non-zero error codes (`error_codes`), for the metrics that count a
    response's errors without the value."""

    __slots__ = ("stype", "version", "data", "errors")

    def __init__(self, stype: StructType, version: int, data: bytes, errors: tuple = ()) -> None:
        self.stype = stype
        self.version = version
        self.data = data
        self.errors = errors

    def __repr__(self) -> str:
        return f"Encoded({self.stype.name} v{self.version}, {len(self.data)} bytes)"


class Field:
    """One field of a struct: Kafka's name/type/versions/nullableVersions/default/tag."""

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "is_array",
                 "item", "struct", "default", "factory")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str = "none",
                 default: Any = _MISSING, tag: int | None = None, tagged: str | None = None,
                 fields: Iterable[Field] | None = None) -> None:
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tag = tag
        self.tagged = parse_versions(tagged or versions) if tag is not None else None
        self.is_array = type.startswith("[]")
        self.item = type[2:] if self.is_array else type
        self.struct = None if self.item in PRIMITIVE_TYPES else StructType(self.item, fields or ())
        if self.struct is None and fields:
            raise ValueError(f"{name}: primitive type {type} cannot have fields")
        if self.nullable and not (self.is_array or self.item in _VARIABLE_DEFAULTS):
            raise ValueError(f"{name}: type {type} cannot be nullable")
        self.default, self.factory = self._resolve_default(default)

    def _resolve_default(self, default):
        """Return (default value, factory or None): lists and structs need fresh copies."""
        if default is not _MISSING:
            return default, None
        if self.is_array:
            return [], list
        if self.struct is not None:
            return self.struct.cls(), self.struct.cls
        if self.item in SCALARS:
            return SCALARS[self.item][2], None
        return _VARIABLE_DEFAULTS[self.item], None

    def present(self, version: int) -> bool:
        return in_range(self.versions, version)

    def is_tagged(self, version: int) -> bool:
        return self.tag is not None and in_range(self.tagged, version)

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions})"


# --- values -------------------------------------------------------------------------

class Struct:
    """Base of the generated struct classes: slots, keyword construction, repr, eq."""

    __slots__ = ()
    _defaults: tuple = ()  # (name, default, factory or None) for every field

    def __init__(self, **values: Any) -> None:
        for name, default, factory in self._defaults:
            if name in values:
                setattr(self, name, values.pop(name))
            else:
                setattr(self, name, default if factory is None else factory())
        if values:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(values)}")

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({body})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # mutable

    def __reduce__(self):
        values = tuple(bytes(v) if isinstance(v, memoryview) else v
                       for v in map(self.__getattribute__, self.__slots__))
        return _restore, (type(self).__qualname__, values)


_CLASSES: dict[str, type] = {}  # qualified name -> generated class, for unpickling


def _restore(qualname: str, values: tuple) -> Struct:
    # Every message class is registered by then: importing this module imports the
    # `mmlog.protocol` package first, and its __init__ imports every message module
    # (tests/protocol/test_messages.py unpickles each in a fresh process).
    cls = _CLASSES[qualname]
    obj = cls.__new__(cls)
    for name, value in zip(cls.__slots__, values):
        setattr(obj, name, value)
    return obj


def register(stype: StructType, qualname: str) -> None:
    """Name a message's classes by their path (``FetchResponse.PartitionData``...)."""
    stype.cls.__qualname__ = qualname
    _CLASSES[qualname] = stype.cls
    for f in stype.fields:
        if f.struct is not None:
            register(f.struct, f"{qualname}.{f.struct.name}")


class StructType:
    """A named list of fields and the class its values are instances of."""

    def __init__(self, name: str, fields: Iterable[Field]) -> None:
        self.name = name
        self.fields = tuple(fields)
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{name}: duplicate field names")
        namespace = {
            "__slots__": tuple(names),
            "__module__": __name__,
            "_defaults": tuple((f.name, f.default, f.factory) for f in self.fields),
        }
        for f in self.fields:
            if f.struct is not None:
                namespace[f.struct.name] = f.struct.cls
        self.cls = type(name, (Struct,), namespace)
        self.cls._type = self  # the struct's schema, for walks that need its shape (request_metrics.py)

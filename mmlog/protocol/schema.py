"""Declarative message schemas and the one generic codec that serves them all.

Theory of operation
-------------------

Kafka describes every request and response body as a tree of fields in JSON
(``clients/src/main/resources/common/message/*.json``). Each field has a name, a
type, the versions it is present in, the versions in which it may be null, and,
in *flexible* versions, possibly a tag. mmlog writes the same tree as Python
tables in ``messages/<api>.py``, field for field in the JSON's order, with names
in snake_case (``ThrottleTimeMs`` -> ``throttle_time_ms``) and type strings as in
the JSON (``"int32"``, ``"string"``, ``"[]int32"``, ``"[]MetadataResponseBroker"``
with its ``fields``). A table is data; nothing in it runs per message.

The codec never interprets a table while a message is on the wire. The first
time an (api, version) is used, `Message.codec` *compiles* the table for that
version into two closures, a reader and a writer, and caches them:

* every field absent from the version is dropped; the rest are bound, in order,
  to the primitive reader/writer their type, nullability and the message's
  flexibility select (``string`` becomes ``compact_nullable_string`` in a
  flexible version where the field is nullable, and so on);
* consecutive fixed-width fields share one precompiled ``struct.Struct`` (a
  Fetch partition header is one unpack, not five);
* arrays of structs compile their item struct the same way, recursively;
  arrays of fixed-width numbers decode with one ``struct.unpack_from`` call;
* in flexible versions every struct ends with a tag section; known tags decode
  into their fields, unknown tags are skipped (Kafka keeps them opaque; no
  handler here needs them).

The reader and writer are generated Python source, exec'd once per (struct,
version) as dataclasses does it, and kept in their ``source`` attribute:
decoding is straight-line assignments filling a generated ``__slots__`` class
(one ``unpack_from`` per run of fixed-width fields), encoding straight-line
appends to one bytearray, with a twin writer that reads a plain ``dict``'s keys
directly. ``precompile()`` compiles every version up front, so a forked
processor inherits warm codecs. Versions whose text is the same share one code
object, and the code is kept on disk between processes (``code_cache``).

Values
~~~~~~

Each struct in a table gets one small class (a `Struct` subclass), shared by
all versions. Its keyword constructor fills every field the struct has in any
version with Kafka's default (0, "", [], None where the JSON says null, or the
field's explicit default) and rejects unknown names. Decoding sets the fields of
the decoded version and defaults the others. Encoding takes instances of the
class; a ``dict`` (or any other object with some of the fields as attributes)
stands for one: missing fields get defaults and misspelt keys fail loudly (a
dict whose keys are all field names is written from its keys without building
an instance, unless the version has tagged fields; anything else goes through
the class constructor first). Fields that the version lacks are
ignored. Byte fields (``bytes``, ``records``) decode to memoryview slices of
the input, not copies. Values pickle (byte fields as bytes), so a processor can
hand a decoded request to the control plane.

Parts
~~~~~

A broker answers Fetch with file ranges it sends by ``os.sendfile``, so it must
encode everything around the record bytes while knowing only their size. A
bytes-like field value is copied into the output; any other object with a
``__len__`` (a `Placeholder`, or the storage layer's own slice type) stands for
that many bytes that the caller will send itself. `Message.encode_parts`
writes the length prefix as usual and then cuts the output there, returning a
list of bytearray chunks interleaved with those objects, in wire order. The
frame size is ``sum(len(part) for part in parts)``. Nothing here is specific to
Fetch.

Encoded items
~~~~~~~~~~~~~

A handler that answers the same struct again and again (Metadata's entry of a topic
whose partitions did not change) may encode it once: `Message.encode_item` returns
an `Encoded` value, the bytes one array item of that struct has in that version, and
any writer of that struct copies those bytes in place of encoding fields. The bytes
are the codec's own (the same generated writer), so a response holding `Encoded`
items is byte for byte the response holding the values they were made from. An
`Encoded` value of another struct or version is refused (`EncodeError`), never
spliced silently.

Modules
~~~~~~~

structs.py holds what a table is made of (version ranges, `Field`, `StructType`) and the values
(`Struct`, `Placeholder`, `Encoded`); codegen.py the compiler (`compile_struct`, `_Generated`);
this module `Message`, a request or response body, and `error_codes`, the walk over a value.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from . import primitives as p
from .codegen import compile_struct
from .errors import UnsupportedVersionError
from .structs import Encoded, Field, Struct, StructType, in_range, parse_versions, register

def as_memoryview(data) -> memoryview:
    """View ``data`` as unsigned bytes, without copying."""
    view = data if type(data) is memoryview else memoryview(data)
    return view if view.format == "B" else view.cast("B")


class Message(StructType):
    """A request or response body: a struct plus its API key and version ranges.

    ``versions`` is the range mmlog speaks (Kafka's may be wider); ``flexible``
    is Kafka's flexibleVersions, open-ended even beyond ``versions`` so that
    headers of newer versions can still be classified.
    """

    def __init__(self, name: str, api_key: int, versions: str, flexible: str,
                 fields: Iterable[Field]) -> None:
        super().__init__(name, fields)
        register(self, name)
        self.api_key = api_key
        self.versions = parse_versions(versions)
        self.flexible = parse_versions(flexible)
        self.min_version, self.max_version = self.versions
        self._codecs: dict[int, tuple[Callable, Callable]] = {}
        self._item_writers: dict[tuple[str, int], tuple[StructType, Callable]] = {}

    def __call__(self, **values: Any) -> Struct:
        """Build a message value: ``RESPONSE(throttle_time_ms=0, ...)``."""
        return self.cls(**values)

    def __repr__(self) -> str:
        return f"<Message {self.name} v{self.min_version}-{self.max_version}>"

    def is_flexible(self, version: int) -> bool:
        return in_range(self.flexible, version)

    def supports(self, version: int) -> bool:
        return in_range(self.versions, version)

    def codec(self, version: int) -> tuple[Callable, Callable]:
        """Return the compiled (read, write) of one version, compiling it once."""
        try:
            return self._codecs[version]
        except KeyError:
            pass
        if not self.supports(version):
            raise UnsupportedVersionError(self.api_key, version)
        codec = compile_struct(self, version, self.is_flexible(version))
        self._codecs[version] = codec
        return codec

    def precompile(self) -> None:
        for version in range(self.min_version, self.max_version + 1):
            self.codec(version)

    def decode(self, data, version: int, pos: int = 0):
        """Decode one body starting at ``pos``; trailing bytes are ignored."""
        return self.codec(version)[0](as_memoryview(data), pos)[0]

    def decode_from(self, buf: memoryview, pos: int, version: int):
        """Decode one body at ``pos`` of a memoryview; return (value, end position)."""
        return self.codec(version)[0](buf, pos)

    def encode(self, value, version: int, out: bytearray | None = None) -> bytearray:
        """Append the encoding of ``value`` to ``out`` (a new bytearray by default)."""
        if out is None:
            out = bytearray()
        self.codec(version)[1](out, value)
        return out

    def encode_parts(self, value, version: int, out: p.PartsWriter | None = None) -> list:
        """Encode into parts: bytearray chunks interleaved with sized placeholders."""
        if out is None:
            out = p.PartsWriter()
        self.codec(version)[1](out, value)
        return out.finish()

    def encode_item(self, path: str, value, version: int) -> Encoded:
        """Encode one item of the struct array at `path` (field names joined by dots, e.g.
        ``"topics"`` or ``"topics.partitions"``) for `version`: an `Encoded` value that the
        message's writer of that version copies as it is."""
        try:
            stype, write = self._item_writers[path, version]
        except KeyError:
            stype, write = self._item_writer(path, version)
        out = bytearray()
        write(out, value)
        return Encoded(stype, version, bytes(out), tuple(error_codes(value, stype)))

    def _item_writer(self, path: str, version: int):
        if not self.supports(version):
            raise UnsupportedVersionError(self.api_key, version)
        stype: StructType = self
        for name in path.split("."):
            field = next((f for f in stype.fields if f.name == name), None)
            if field is None or field.struct is None or not field.present(version):
                raise ValueError(f"{self.name} v{version} has no struct field {path!r}")
            stype = field.struct
        writer = stype, compile_struct(stype, version, self.is_flexible(version))[1]
        self._item_writers[path, version] = writer
        return writer


_PLANS: dict[StructType, tuple[bool, tuple]] = {}


def _plan(stype: StructType) -> tuple[bool, tuple]:
    """(has an error_code, its fields holding structs or arrays of them) of a struct's schema."""
    plan = _PLANS.get(stype)
    if plan is None:
        plan = _PLANS[stype] = (any(f.name == "error_code" for f in stype.fields),
                                tuple((f.name, f.struct) for f in stype.fields if f.struct is not None))
    return plan


def error_codes(value, stype: StructType | None = None) -> Iterable[int]:
    """Every non-zero ``error_code`` in a value (codec structs, dicts in their place, `Encoded` items:
    their ``errors``), walking only the fields its schema says hold structs (Kafka's
    AbstractResponse.errorCounts); `stype` for a dict, which does not name its struct."""
    stack = [(value, stype or type(value)._type)]
    while stack:
        item, struct = stack.pop()
        if item.__class__ is Encoded:
            yield from item.errors
            continue
        get = item.get if isinstance(item, dict) else item.__getattribute__
        has_error, children = _plan(struct)
        if has_error and (code := get("error_code")):
            yield code
        for name, child in children:
            nested = get(name)
            if isinstance(nested, list):
                stack.extend((x, child) for x in nested)
            elif nested is not None:
                stack.append((nested, child))


def parts_size(parts: Iterable) -> int:
    """Total number of bytes the parts stand for."""
    return sum(len(part) for part in parts)


# What schema tables and the codec's callers import from here; `Field` with `Message` is the language a table
# is written in (messages/<api>.py), whichever module defines it.
__all__ = ["Field", "Message", "as_memoryview", "error_codes", "parts_size"]

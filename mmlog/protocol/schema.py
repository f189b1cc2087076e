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
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Callable, Iterable

from . import primitives as p
from .code_cache import CodeCache, cache_file, default_directory
from .errors import EncodeError, ProtocolError, UnsupportedVersionError

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

_SCALARS = {
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

PRIMITIVE_TYPES = frozenset(_SCALARS) | frozenset(_VARIABLE_DEFAULTS)

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


def _splicer(stype: StructType, version: int):
    """The writer of `Encoded` values of one struct version: their bytes, or EncodeError for another's."""

    def splice(out, value: Encoded) -> None:
        if value.stype is not stype or value.version != version:
            raise EncodeError(f"{value!r} written as {stype.name} v{version}")
        out += value.data
    return splice


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
        if self.item in _SCALARS:
            return _SCALARS[self.item][2], None
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


def _register(stype: StructType, qualname: str) -> None:
    """Name a message's classes by their path (``FetchResponse.PartitionData``...)."""
    stype.cls.__qualname__ = qualname
    _CLASSES[qualname] = stype.cls
    for f in stype.fields:
        if f.struct is not None:
            _register(f.struct, f"{qualname}.{f.struct.name}")


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


# --- compilation -----------------------------------------------------------------------

def _scalar_codec(type_name: str, compact: bool, nullable: bool):
    """Pick e.g. read/write_compact_nullable_string; records are bytes on the wire."""
    if type_name in _SCALARS:
        return _SCALARS[type_name][:2]
    base = "bytes" if type_name == "records" else type_name
    name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + base
    return getattr(p, "read_" + name), getattr(p, "write_" + name)


def _field_codec(field: Field, version: int, flexible: bool):
    """Return (read, write, item) for one field in one version.

    ``item`` is the (read, write) of an array's struct items, which generated code
    calls directly when it inlines the array (see `_inline_kind`); None otherwise.
    """
    nullable = in_range(field.nullable, version)
    if field.is_array:
        if field.struct is not None:
            read_item, write_item = compile_struct(field.struct, version, flexible)
            read = p.array_reader(read_item, compact=flexible, nullable=nullable)
            return read, p.array_writer(write_item, compact=flexible, nullable=nullable), (read_item, write_item)
        read_item, write_item = _scalar_codec(field.item, flexible, False)
        if field.item in p.FIXED_CODES:
            read = p.fixed_array_reader(field.item, compact=flexible, nullable=nullable)
        else:
            read = p.array_reader(read_item, compact=flexible, nullable=nullable)
        return read, p.array_writer(write_item, compact=flexible, nullable=nullable), None
    if field.struct is not None:
        if nullable:
            raise NotImplementedError(f"{field.name}: nullable structs")
        return (*compile_struct(field.struct, version, flexible), None)
    return (*_scalar_codec(field.type, flexible, nullable), None)


def _inline_kind(field: Field, flexible: bool) -> str | None:
    """What generated code writes out in place of a call: "string", "bytes", "structs" or None.

    Only the int16/int32-length forms of non-flexible versions are inlined (the hot
    Produce and Fetch versions are not flexible); compact forms keep calling primitives.
    """
    if flexible:
        return None
    if field.is_array:
        return "structs" if field.struct is not None else None
    if field.type == "string":
        return "string"
    if field.type in ("bytes", "records"):
        return "bytes"
    return None


def compile_struct(stype: StructType, version: int, flexible: bool):
    """Compile a struct for one version into (read(buf, pos), write(out, value)).

    Both are generated straight-line Python (see `_Generated`), exec'd once per
    (struct, version); each keeps its text in a ``source`` attribute.
    """
    regular, tagged, absent = [], [], []
    for f in stype.fields:
        if flexible and f.is_tagged(version):
            tagged.append(f)
            absent.append(f)  # defaulted first, then set if its tag is present
        elif f.present(version):
            regular.append(f)
        else:
            absent.append(f)
    steps = _steps(regular, version, flexible)
    read_tags = write_tags = None
    if flexible:
        codecs = {f.name: _field_codec(f, version, flexible) for f in tagged}
        read_tags = _tag_reader({f.tag: (f.name, codecs[f.name][0]) for f in tagged})
        write_tags = _tag_writer([(f.tag, f.name, f.default, codecs[f.name][1])
                                  for f in sorted(tagged, key=lambda f: f.tag)])
    gen = _Generated(stype, version)
    read = gen.reader(steps, absent, read_tags)
    write = gen.writer(steps, flexible, bool(tagged), write_tags)
    return read, write


def _steps(fields: list[Field], version: int, flexible: bool) -> list:
    """Return (names, read, write, packer, inline) per field, merging runs of fixed-width scalars.

    ``names`` is a tuple. A run of fixed-width scalars (bool, ints, float64) —
    even a run of one — has a ``struct.Struct`` packer and reads and writes a
    tuple of values; its read/write are the primitive codec, kept to raise the
    same errors as before when the packer fails. Any other field has packer None
    and ``inline`` = (kind, nullable, item codec) when the generated code writes
    it out in place (`_inline_kind`), else None.
    """
    steps, run = [], []
    for f in fields + [None]:
        if f is not None and not f.is_array and f.item in p.RUN_CODES:
            run.append(f)
            continue
        if len(run) > 1:
            codes = [r.item for r in run]
            steps.append((tuple(r.name for r in run), *p.fixed_run_codec(codes), p.run_packer(codes), None))
        elif run:
            read, write, _ = _field_codec(run[0], version, flexible)
            steps.append(((run[0].name,), read, write, p.run_packer([run[0].item]), None))
        run = []
        if f is not None:
            read, write, item = _field_codec(f, version, flexible)
            kind = _inline_kind(f, flexible)
            inline = (kind, in_range(f.nullable, version), item) if kind else None
            steps.append(((f.name,), read, write, None, inline))
    return steps


class _Generated:
    """Writes the source of one struct version's reader and writer, and execs it.

    Like `dataclasses`, the codec writes its per-(struct, version) code once as
    Python text: the reader is one assignment per field (one ``unpack_from`` per
    run of fixed-width fields), the writer one append per field. Compared with a
    loop over (name, closure) pairs this drops a Python call, a tuple and a
    ``setattr`` per field; a Produce request/response pair has about 20 fields.

    Every object the code uses is bound in its namespace under a short name
    (``r3`` the reader of step 3, ``u0`` the unpack_from of run 0...). When an
    ``unpack_from``/``pack`` fails, the code calls the primitive codec of that step
    instead, which raises the usual TruncatedError/EncodeError with its message.
    """

    def __init__(self, stype: StructType, version: int) -> None:
        self.stype = stype
        self.version = version
        self.ns: dict[str, Any] = {"cls": stype.cls, "new": stype.cls.__new__,
                                   "struct_error": struct.error, "coerce": _coerce}

    def _exec(self, name: str, lines: list[str]):
        source = "\n".join(lines) + "\n"
        exec(CODE.code(source), self.ns)  # one code object per distinct text (code_cache.py)
        func = self.ns[name]
        # A code object of its own for each function, named for this codec in tracebacks (the shared one's
        # filename is the first compile's); own also for 3.11's specializing interpreter, whose inline caches
        # (LOAD_GLOBAL's, keyed by the globals dict) live in the code object and would flip between namespaces.
        func.__code__ = func.__code__.replace(co_filename=f"<mmlog codec {self.stype.name} v{self.version} {name}>")
        func.source = source
        func.__qualname__ = f"{self.stype.name}_v{self.version}.{name}"
        return func

    def reader(self, steps, absent, read_tags):
        ns = self.ns
        lines = ["def read(buf, pos):", "    obj = new(cls)"]
        for i, (names, read, _, packer, inline) in enumerate(steps):
            targets = "".join(f"obj.{n}, " for n in names)
            ns[f"r{i}"] = read
            if inline is not None:
                lines += self._read_inline(i, names[0], *inline)
                continue
            if packer is None:
                lines.append(f"    {targets}pos = r{i}(buf, pos)")
                continue
            ns[f"u{i}"] = packer.unpack_from
            lines += [
                "    try:",
                f"        {targets}= u{i}(buf, pos)",
                "    except struct_error:",
                f"        r{i}(buf, pos)  # raises TruncatedError",
                f"    pos += {packer.size}",
            ]
        for i, f in enumerate(absent):
            if f.factory is None:
                ns[f"d{i}"] = f.default
                lines.append(f"    obj.{f.name} = d{i}")
            else:
                ns[f"f{i}"] = f.factory
                lines.append(f"    obj.{f.name} = f{i}()")
        if read_tags is not None:
            ns["read_tags"] = read_tags
            lines.append("    pos = read_tags(buf, pos, obj)")
        lines.append("    return obj, pos")
        return self._exec("read", lines)

    def writer(self, steps, flexible, has_tags, write_tags):
        """The writer of instances, with a twin for plain dicts (what handlers build).

        A dict whose keys are all field names is written straight from its items,
        a missing key standing for the field's default, with no instance built;
        any other value goes through the class constructor first (`_coerce`),
        which rejects misspelt names. Dicts in versions with tagged fields take
        that road too, as the tag writer reads attributes.
        """
        ns = self.ns
        ns["names"] = frozenset(name for name, _, _ in self.stype.cls._defaults)
        ns.update(encoded=Encoded, splice=_splicer(self.stype, self.version))
        defaults = {f.name: f.default for f in self.stype.fields}
        use_dict = not has_tags
        lines = ["def write(out, obj):", "    if obj.__class__ is not cls:"]
        if use_dict:
            lines += ["        if obj.__class__ is dict and names.issuperset(obj):",
                      "            return write_dict(out, obj)"]
        lines += ["        if obj.__class__ is encoded:",
                  "            return splice(out, obj)",
                  "        obj = coerce(cls, obj)"]
        dict_lines = ["def write_dict(out, obj):", "    get = obj.get"]
        for i, (names, _, write, packer, inline) in enumerate(steps):
            ns[f"w{i}"] = write
            attrs = ", ".join(f"obj.{n}" for n in names)
            items = ", ".join(f"get({n!r}, d_{n})" for n in names)
            ns.update({f"d_{n}": defaults[n] for n in names})
            if inline is not None:
                lines += self._write_inline(i, attrs, *inline)
                dict_lines += self._write_inline(i, items, *inline)
                continue
            if packer is None:
                lines.append(f"    w{i}(out, {attrs})")
                dict_lines.append(f"    w{i}(out, {items})")
                continue
            ns[f"p{i}"] = packer.pack
            for body, values in ((lines, attrs), (dict_lines, items)):
                value = values if len(names) == 1 else f"({values},)"
                body += ["    try:",
                         f"        out += p{i}({values})",
                         "    except struct_error:",
                         f"        w{i}(out, {value})  # raises EncodeError"]
        if has_tags:
            ns["write_tags"] = write_tags
            lines.append("    write_tags(out, obj)")
        elif flexible:
            lines.append("    out.append(0)  # the empty tag section")
            dict_lines.append("    out.append(0)  # the empty tag section")
        if not use_dict:
            return self._exec("write", lines)
        write_dict = self._exec("write_dict", dict_lines)
        write = self._exec("write", lines)
        write.source += "\n" + write_dict.source
        return write

    # Inlined fields. A length prefix, its bytes and (for arrays) a loop over the item
    # codec, written out in place of a call to the primitive. On anything unexpected
    # the code calls the primitive instead (``fail``), which raises the usual error.

    def _read_inline(self, i: int, name: str, kind: str, nullable: bool, item) -> list[str]:
        ns = self.ns
        ns.update(i16=_I16.unpack_from, i32=_I32.unpack_from, fail=_fail, unicode_error=UnicodeDecodeError)
        width = 2 if kind == "string" else 4
        lines = ["    try:",
                 f"        n, = i{width * 8}(buf, pos)",
                 "    except struct_error:",
                 f"        fail(r{i}, buf, pos)"]
        if kind == "structs":
            ns[f"ri{i}"] = item[0]
            lines += ["    if 0 <= n <= len(buf) - pos - 4:",
                      "        pos += 4",
                      "        items = []",
                      "        append = items.append",
                      "        for _ in range(n):",
                      f"            item, pos = ri{i}(buf, pos)",
                      "            append(item)",
                      f"        obj.{name} = items"]
        else:
            lines += ["    if n >= 0:",
                      f"        end = pos + {width} + n",
                      "        if end > len(buf):",
                      f"            fail(r{i}, buf, pos)"]
            if kind == "string":
                lines += ["        try:",
                          f"            obj.{name} = str(buf[pos + 2:end], 'utf-8')",
                          "        except unicode_error:",
                          f"            fail(r{i}, buf, pos)"]
            else:
                lines.append(f"        obj.{name} = buf[pos + 4:end]")
            lines.append("        pos = end")
        if nullable:
            lines += ["    elif n == -1:",
                      f"        obj.{name} = None",
                      f"        pos += {width}"]
        lines += ["    else:",
                  f"        fail(r{i}, buf, pos)"]
        return lines

    def _write_inline(self, i: int, value: str, kind: str, nullable: bool, item) -> list[str]:
        ns = self.ns
        ns.update(p16=_I16.pack, p32=_I32.pack, fail=_fail, append_blob=p.append_blob)
        null = (b"\xff\xff" if kind == "string" else b"\xff\xff\xff\xff")
        lines = [f"    v = {value}",
                 "    if v is None:",
                 f"        out += {null!r}" if nullable else f"        fail(w{i}, out, v)",
                 "    else:"]
        if kind == "string":
            lines += ["        try:",
                      "            data = v.encode('utf-8')",
                      "        except AttributeError:",
                      f"            fail(w{i}, out, v)",
                      "        if len(data) > 0x7FFF:",
                      f"            fail(w{i}, out, v)",
                      "        out += p16(len(data))",
                      "        out += data"]
        elif kind == "bytes":
            lines += ["        out += p32(len(v))",
                      "        append_blob(out, v)"]
        else:
            ns[f"wi{i}"] = item[1]
            lines += ["        out += p32(len(v))",
                      "        for item in v:",
                      f"            wi{i}(out, item)"]
        return lines


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

CODE = CodeCache(cache_file(default_directory()))  # the generated sources' code, shared and kept on disk


def _fail(codec, buf_or_out, value_or_pos):
    """Run the primitive codec on input the inlined code found wrong: it raises the usual error."""
    codec(buf_or_out, value_or_pos)
    raise ProtocolError(f"{getattr(codec, '__name__', 'codec')} accepted what the inlined codec refused")


def _coerce(cls, value):
    """Make an instance of ``cls`` from a dict or any object with (some of) its fields."""
    if isinstance(value, dict):
        return cls(**value)
    names = (name for name, _, _ in cls._defaults)
    return cls(**{name: getattr(value, name) for name in names if hasattr(value, name)})


def _tag_reader(known: dict):
    """Read a tag section, decoding known tags into their fields, skipping the rest."""
    if not known:
        return lambda buf, pos, obj: p.skip_tag_section(buf, pos)

    def read_tags(buf, pos, obj):
        fields, pos = p.read_tag_section(buf, pos)
        for tag, view in fields.items():
            if tag in known:
                name, read_field = known[tag]
                value, end = read_field(view, 0)
                if end != len(view):
                    raise ProtocolError(f"tagged field {name} left {len(view) - end} bytes")
                setattr(obj, name, value)
        return pos
    return read_tags


def _tag_writer(tagged: list):
    """Write a tag section holding the tagged fields whose values differ from default."""
    if not tagged:
        return lambda out, obj: out.append(0)

    def write_tags(out, obj):
        fields = {}
        for tag, name, default, write_field in tagged:
            value = getattr(obj, name, default)
            if value != default:
                data = bytearray()
                write_field(data, value)
                fields[tag] = data
        p.write_tag_section(out, fields)
    return write_tags


# --- messages ----------------------------------------------------------------------------

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
        _register(self, name)
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


__all__ = [
    "EncodeError", "Encoded", "Field", "Message", "OPEN", "Placeholder", "ProtocolError", "Struct",
    "StructType", "as_memoryview", "compile_struct", "error_codes", "in_range", "parse_versions", "parts_size",
]

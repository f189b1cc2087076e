"""The codec's compiler: a struct's fields, for one version, become a generated reader and writer.

`compile_struct` binds each field present in the version to the primitive codec its type, nullability
and the message's flexibility select, merges runs of fixed-width fields into one ``struct.Struct``,
and has `_Generated` write and exec straight-line Python for the pair (schema.py's "Theory of
operation" tells why); the code objects are shared and kept on disk (`CODE`, code_cache.py).
"""

from __future__ import annotations

import struct
from typing import Any

from . import primitives as p
from .code_cache import CodeCache, cache_file, default_directory
from .errors import EncodeError, ProtocolError
from .structs import SCALARS, Encoded, Field, StructType, in_range


def _splicer(stype: StructType, version: int):
    """The writer of `Encoded` values of one struct version: their bytes, or EncodeError for another's."""

    def splice(out, value: Encoded) -> None:
        if value.stype is not stype or value.version != version:
            raise EncodeError(f"{value!r} written as {stype.name} v{version}")
        out += value.data
    return splice


def _scalar_codec(type_name: str, compact: bool, nullable: bool):
    """Pick e.g. read/write_compact_nullable_string; records are bytes on the wire."""
    if type_name in SCALARS:
        return SCALARS[type_name][:2]
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

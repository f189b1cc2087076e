"""Kafka protocol primitive types: readers and writers.

Two conventions hold for every function here:

* ``read_<type>(buf, pos) -> (value, next_pos)`` reads from a ``memoryview`` (or
  any object supporting ``buf[i]``, slicing and the buffer protocol) at ``pos``.
  Byte fields come back as memoryview slices of ``buf``: no copy, so a 1 MiB
  ``records`` field costs nothing to decode. Input that ends early raises
  `TruncatedError`; malformed input raises `ProtocolError`; never IndexError or
  struct.error.
* ``write_<type>(out, value) -> None`` appends to a ``bytearray``.

Names follow Kafka's type names (`Type.java` / the message JSON): ``string`` has
an int16 length, ``bytes`` an int32 length, arrays an int32 count, with -1
meaning null in the nullable forms. The *compact* forms used by flexible
versions carry an unsigned varint of N+1 instead, where 0 means null. Tag
sections (flexible versions only) are an unsigned varint count, then per field
its tag, its size and its bytes. The zigzag varints of record batches live in
`records.py`, not here.
"""

from __future__ import annotations

import struct
import uuid
from typing import Callable

from .errors import EncodeError, ProtocolError, TruncatedError

Reader = Callable[[memoryview, int], tuple]
Writer = Callable[[bytearray, object], None]

MAX_UVARINT = 0xFFFFFFFF  # unsigned varints carry 32-bit values (ByteUtils.java)


def _truncated(what: str, pos: int) -> TruncatedError:
    return TruncatedError(f"input ended inside {what} at byte {pos}")


def _fixed(fmt: str, what: str) -> tuple[Reader, Writer]:
    """Build the reader and writer of one fixed-width type from a struct format."""
    packer = struct.Struct(fmt)
    unpack_from, pack, size = packer.unpack_from, packer.pack, packer.size

    def read(buf, pos):
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error:
            raise _truncated(what, pos) from None

    def write(out, value):
        try:
            out += pack(value)
        except struct.error as exc:
            raise EncodeError(f"{what} cannot hold {value!r}: {exc}") from None

    read.__name__, write.__name__ = f"read_{what}", f"write_{what}"
    return read, write


read_int8, write_int8 = _fixed(">b", "int8")
read_int16, write_int16 = _fixed(">h", "int16")
read_uint16, write_uint16 = _fixed(">H", "uint16")
read_int32, write_int32 = _fixed(">i", "int32")
read_uint32, write_uint32 = _fixed(">I", "uint32")
read_int64, write_int64 = _fixed(">q", "int64")
read_float64, write_float64 = _fixed(">d", "float64")

# struct codes of the fixed-width numeric types, for one-call array decoding
FIXED_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i",
               "uint32": "I", "int64": "q", "float64": "d"}
RUN_CODES = {**FIXED_CODES, "bool": "?"}  # '?' reads any non-zero byte as True, like Kafka


def run_packer(type_names) -> struct.Struct:
    """The ``struct.Struct`` of consecutive fixed-width fields (what generated codecs inline)."""
    return struct.Struct(">" + "".join(RUN_CODES[t] for t in type_names))


def fixed_run_codec(type_names) -> tuple[Reader, Writer]:
    """Build a reader/writer of consecutive fixed-width fields as one struct: a tuple of values.

    A Fetch partition header (int32, int16, 3 x int64) costs one unpack instead of five.
    """
    packer = run_packer(type_names)
    unpack_from, pack, size = packer.unpack_from, packer.pack, packer.size

    def read(buf, pos):
        try:
            return unpack_from(buf, pos), pos + size
        except struct.error:
            raise _truncated(f"fields {packer.format}", pos) from None

    def write(out, values):
        try:
            out += pack(*values)
        except struct.error as exc:
            raise EncodeError(f"fields {packer.format} cannot hold {values!r}: {exc}") from None
    return read, write


def read_bool(buf, pos):
    """Read a bool: one byte, anything but 0 is true (as Kafka reads it)."""
    try:
        return buf[pos] != 0, pos + 1
    except IndexError:
        raise _truncated("bool", pos) from None


def write_bool(out, value):
    out.append(1 if value else 0)


def read_uuid(buf, pos):
    """Read a 16-byte UUID."""
    end = pos + 16
    if end > len(buf):
        raise _truncated("uuid", pos)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out, value):
    try:
        out += value.bytes
    except AttributeError:
        raise EncodeError(f"uuid field got {type(value).__name__}") from None


# --- unsigned varints (compact lengths and tag sections) -----------------------

def read_uvarint(buf, pos):
    """Read an unsigned LEB128 varint of at most 5 bytes (a 32-bit value)."""
    try:
        byte = buf[pos]
        if byte < 0x80:  # one byte: every compact length under 127, every empty tag section
            return byte, pos + 1
        value, shift = byte & 0x7F, 7
        while True:
            pos += 1
            byte = buf[pos]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 28:
                raise ProtocolError(f"unsigned varint longer than 5 bytes at byte {pos}")
    except IndexError:
        raise _truncated("unsigned varint", pos) from None
    if value > MAX_UVARINT:
        raise ProtocolError(f"unsigned varint {value} above 2**32-1")
    return value, pos + 1


def write_uvarint(out, value):
    if 0 <= value < 0x80:
        out.append(value)
        return
    if not 0 <= value <= MAX_UVARINT:
        raise EncodeError(f"unsigned varint out of range: {value!r}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# --- lengths ---------------------------------------------------------------------

def _read_compact_length(buf, pos):
    """Read a compact length: uvarint N+1, so 0 (null) comes back as -1."""
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def _write_compact_length(out, n):
    write_uvarint(out, n + 1)


def _checked_end(buf, pos, n, what):
    end = pos + n
    if end > len(buf):
        raise _truncated(what, pos)
    return end


# --- strings ---------------------------------------------------------------------

def _text(buf, pos, n, what):
    end = _checked_end(buf, pos, n, what)
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} at byte {pos} is not UTF-8: {exc}") from None


def _string_reader(read_length, nullable: bool, what: str) -> Reader:
    def read(buf, pos):
        n, pos = read_length(buf, pos)
        if n >= 0:
            return _text(buf, pos, n, what)
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"{what} has length {n} at byte {pos}")
    read.__name__ = f"read_{what}"
    return read


def _string_writer(write_length, nullable: bool, limit: int, what: str) -> Writer:
    def write(out, value):
        if value is None:
            if not nullable:
                raise EncodeError(f"{what} cannot be null")
            write_length(out, -1)
            return
        try:
            data = value.encode("utf-8")
        except AttributeError:
            raise EncodeError(f"{what} got {type(value).__name__}") from None
        if len(data) > limit:
            raise EncodeError(f"{what} of {len(data)} bytes exceeds {limit}")
        write_length(out, len(data))
        out += data
    write.__name__ = f"write_{what}"
    return write


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _write_int16_length(out, n):
    out += _INT16.pack(n)


def _write_int32_length(out, n):
    out += _INT32.pack(n)

read_string = _string_reader(read_int16, False, "string")
read_nullable_string = _string_reader(read_int16, True, "nullable_string")
read_compact_string = _string_reader(_read_compact_length, False, "compact_string")
read_compact_nullable_string = _string_reader(_read_compact_length, True, "compact_nullable_string")
write_string = _string_writer(_write_int16_length, False, 0x7FFF, "string")
write_nullable_string = _string_writer(_write_int16_length, True, 0x7FFF, "nullable_string")
write_compact_string = _string_writer(_write_compact_length, False, 0x7FFF, "compact_string")
write_compact_nullable_string = _string_writer(_write_compact_length, True, 0x7FFF,
                                               "compact_nullable_string")


# --- bytes -----------------------------------------------------------------------

def _bytes_reader(read_length, nullable: bool, what: str) -> Reader:
    def read(buf, pos):
        n, pos = read_length(buf, pos)
        if n >= 0:
            end = _checked_end(buf, pos, n, what)
            return buf[pos:end], end
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"{what} has length {n} at byte {pos}")
    read.__name__ = f"read_{what}"
    return read


_BUFFER_TYPES: dict[type, bool] = {bytes: True, bytearray: True, memoryview: True}


def is_buffer(value) -> bool:
    """True if ``value`` supports the buffer protocol (answer cached per type)."""
    kind = value.__class__
    try:
        return _BUFFER_TYPES[kind]
    except KeyError:
        pass
    try:
        memoryview(value).release()
        _BUFFER_TYPES[kind] = True
    except TypeError:
        _BUFFER_TYPES[kind] = False
    return _BUFFER_TYPES[kind]


def append_blob(out, value):
    """Append a bytes-like value; any other sized object becomes a separate part.

    A value without the buffer protocol (e.g. a `structs.Placeholder` for a file
    range) can only be written into a `PartsWriter`, which cuts its byte chunk
    there and records the object, so the caller splices the real bytes in. A
    `PartsWriter` made with ``zero_copy=n`` does the same with buffers of n bytes
    or more: the part is then the caller's buffer itself, not a copy.
    """
    if is_buffer(value):
        if out.__class__ is bytearray or len(value) < out.zero_copy:
            out += value
        else:
            out.splice(value)
        return
    splice = getattr(out, "splice", None)
    if splice is None or isinstance(value, str):
        raise EncodeError(f"bytes field got {type(value).__name__}; "
                          "sized placeholders need encode_parts")
    splice(value)


def _bytes_writer(write_length, nullable: bool, what: str) -> Writer:
    def write(out, value):
        if value is None:
            if not nullable:
                raise EncodeError(f"{what} cannot be null")
            write_length(out, -1)
            return
        write_length(out, len(value))
        append_blob(out, value)
    write.__name__ = f"write_{what}"
    return write


read_bytes = _bytes_reader(read_int32, False, "bytes")
read_nullable_bytes = _bytes_reader(read_int32, True, "nullable_bytes")
read_compact_bytes = _bytes_reader(_read_compact_length, False, "compact_bytes")
read_compact_nullable_bytes = _bytes_reader(_read_compact_length, True, "compact_nullable_bytes")
write_bytes = _bytes_writer(_write_int32_length, False, "bytes")
write_nullable_bytes = _bytes_writer(_write_int32_length, True, "nullable_bytes")
write_compact_bytes = _bytes_writer(_write_compact_length, False, "compact_bytes")
write_compact_nullable_bytes = _bytes_writer(_write_compact_length, True, "compact_nullable_bytes")


class PartsWriter(bytearray):
    """A bytearray output that also collects parts: byte chunks and placeholders.

    `finish()` returns the list: bytearray chunks interleaved with the sized
    objects that `append_blob` could not copy (and, with ``zero_copy=n``, the byte
    fields of n bytes or more, left where they are), in wire order.
    """

    __slots__ = ("parts", "zero_copy")

    def __init__(self, zero_copy: float = float("inf")) -> None:
        super().__init__()
        self.parts: list = []
        self.zero_copy = zero_copy

    def splice(self, value) -> None:
        self.parts.append(bytearray(self))
        self.parts.append(value)
        del self[:]

    def finish(self) -> list:
        if self or not self.parts:
            self.parts.append(bytearray(self))
            del self[:]
        return self.parts


# --- arrays ----------------------------------------------------------------------

def _read_array_count(buf, pos, compact, nullable):
    """Read an array count; None for null, TruncatedError if it cannot fit."""
    n, start = _read_compact_length(buf, pos) if compact else read_int32(buf, pos)
    if n < 0:
        if n == -1 and nullable:
            return None, start
        raise ProtocolError(f"array count {n} at byte {pos}")
    if n > len(buf) - start:  # every item takes at least one byte
        raise _truncated(f"array of {n} items", pos)
    return n, start


def array_reader(read_item: Reader, *, compact: bool, nullable: bool) -> Reader:
    """Build the reader of an array (or compact array) of items."""
    def read(buf, pos):
        n, pos = _read_array_count(buf, pos, compact, nullable)
        if n is None:
            return None, pos
        items = []
        append = items.append
        for _ in range(n):
            item, pos = read_item(buf, pos)
            append(item)
        return items, pos
    return read


def fixed_array_reader(type_name: str, *, compact: bool, nullable: bool) -> Reader:
    """Build the reader of an array of fixed-width numbers: one unpack per array."""
    code = FIXED_CODES[type_name]
    size = struct.calcsize(code)

    def read(buf, pos):
        n, pos = _read_array_count(buf, pos, compact, nullable)
        if n is None:
            return None, pos
        end = _checked_end(buf, pos, n * size, f"array of {n} {type_name}")
        return list(struct.unpack_from(f">{n}{code}", buf, pos)), end
    return read


def array_writer(write_item: Writer, *, compact: bool, nullable: bool) -> Writer:
    """Build the writer of an array (or compact array) of items."""
    write_length = _write_compact_length if compact else _write_int32_length

    def write(out, items):
        if items is None:
            if not nullable:
                raise EncodeError("array cannot be null")
            write_length(out, -1)
            return
        write_length(out, len(items))
        for item in items:
            write_item(out, item)
    return write


# --- tag sections ----------------------------------------------------------------

def read_tag_section(buf, pos):
    """Read a tag section into {tag: memoryview of the field's bytes}."""
    count, pos = read_uvarint(buf, pos)
    fields = {}
    last = -1
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        if tag <= last:
            raise ProtocolError(f"tag {tag} after tag {last}: tags must ascend")
        size, pos = read_uvarint(buf, pos)
        end = _checked_end(buf, pos, size, f"tagged field {tag}")
        fields[tag] = buf[pos:end]
        pos, last = end, tag
    return fields, pos


def skip_tag_section(buf, pos):
    """Skip a tag section; return where it ends."""
    try:
        if buf[pos] == 0:  # the empty section, by far the commonest
            return pos + 1
    except IndexError:
        raise _truncated("tag section", pos) from None
    return read_tag_section(buf, pos)[1]


def write_tag_section(out, fields=None):
    """Write a tag section from {tag: bytes}, tags ascending."""
    if not fields:
        out.append(0)
        return
    write_uvarint(out, len(fields))
    for tag in sorted(fields):
        data = fields[tag]
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data

"""The schema registry's wire format, as Confluent's serializers write it: what precedes each value.

    byte 0       magic, 0
    bytes 1-4    the schema's global id, big-endian
    (PROTOBUF)   the message's path in its .proto file: a zigzag varint count and that many zigzag
                 varint indexes, or the single byte 0 for the file's first message
    the rest     the value serialized with that schema

`schema_ids` reads the ids of a whole fetched chunk at once (numpy gathers over the bulk decoder's
value columns), so a consumer groups records by schema before decoding any of them."""

from __future__ import annotations

import numpy as np

MAGIC = 0
HEADER = 5
NULL_ID = -1  # a null value: no schema
BAD_ID = -2  # a value too short for the header, or with another magic byte


class SerializationError(ValueError):
    """A value that does not carry the registry's wire format, or an object its schema rejects."""


def frame(schema_id: int, payload: bytes, indexes: bytes = b"") -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + indexes + payload


def split(data) -> tuple[int, memoryview]:
    """(schema id, the bytes after the header) of one value."""
    view = memoryview(data)
    if len(view) < HEADER or view[0] != MAGIC:
        raise SerializationError("value is not in the schema registry's wire format "
                                 f"(magic byte {view[0] if len(view) else 'missing'}, {len(view)} bytes)")
    return int.from_bytes(view[1:HEADER], "big"), view[HEADER:]


def schema_ids(buffer, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each value's schema id (NULL_ID for a null value, BAD_ID for one without the header), vectorised."""
    buf = np.frombuffer(buffer, np.uint8)
    out = np.full(len(starts), BAD_ID, np.int64)
    out[lengths < 0] = NULL_ID
    ok = lengths >= HEADER
    at = starts[ok]
    if len(at):
        ids = np.zeros(len(at), np.int64)
        for k in range(1, HEADER):
            ids = (ids << 8) | buf[at + k]
        out[ok] = np.where(buf[at] == MAGIC, ids, BAD_ID)
    return out


def zigzag_varints(values: list[int]) -> bytes:
    """A Protobuf message path as Confluent writes it ([0] is the single byte 0)."""
    if values == [0]:
        return b"\0"
    out = bytearray()
    for v in [len(values), *values]:
        v = (v << 1) ^ (v >> 63)
        while v & ~0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out)


def read_zigzag_varints(view: memoryview) -> tuple[list[int], memoryview]:
    """The message path at the front of a Protobuf payload, and the bytes after it."""
    pos = 0

    def one() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(view):
                raise SerializationError("truncated Protobuf message indexes")
            b = view[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = one()
    if count < 0 or count > 64:
        raise SerializationError(f"bad Protobuf message index count {count}")
    indexes = [one() for _ in range(count)] or [0]
    return indexes, view[pos:]

"""Avro values of one flat record schema decoded into columns by one numba kernel, no Python per record.

A flat record has fields of the primitive types (boolean, int, long, float, double, string, bytes),
enums, and unions of one of those with null: the schemas most topics carry, and the ones a column
store (Spark, Arrow) wants as columns. `plan(schema)` answers the field kinds of such a schema (None
for any other: nested records, arrays, maps, fixed, unions of two non-null types, which decode with
fastavro per value). `decode(buf, starts, lengths, plan)` walks every value once:

    int, long, enum index, boolean   zigzag varints (a boolean is one byte) -> `ints[:, field]`
    float, double                     4 or 8 little-endian bytes -> their position in `starts[:, field]`
    string, bytes                     a zigzag varint length, then the bytes -> position and length
    [null, T] / [T, null]             a zigzag varint branch index first; the null branch clears `valid`

and stops at the first value that runs past its end or holds a bad branch or varint (answered as its
row; -1 when all are good). Floats are then read by one numpy gather; strings stay where they lie in
the fetched chunk as (start, length) spans, which an Arrow column gathers with one memcpy each.
`field_values` turns a column back into the Python values fastavro would give, so tests hold the kernel
against fastavro value by value.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

NULL, BOOLEAN, INT, LONG, FLOAT, DOUBLE, STRING, BYTES, ENUM = range(9)
_PRIMITIVES = {"null": NULL, "boolean": BOOLEAN, "int": INT, "long": LONG, "float": FLOAT, "double": DOUBLE,
               "string": STRING, "bytes": BYTES}


class Plan(NamedTuple):
    """A flat record's fields: names, kinds, the branch index that is null (-1: not a union), enum symbols."""

    names: tuple[str, ...]
    kinds: np.ndarray
    null_branch: np.ndarray
    symbols: dict[int, tuple[str, ...]]
    types: tuple  # each field's non-null type as fastavro parsed it (logical types kept)


def plan(schema, logical: bool = True) -> Plan | None:
    """The plan of a parsed record schema (fastavro's form), or None when it is not flat. A field with a
    logical type decodes as its primitive; `logical=False` answers None for such a schema instead (for a
    caller that wants the logical values fastavro gives)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    names, kinds, nulls, symbols, types = [], [], [], {}, []
    for i, field in enumerate(schema["fields"]):
        t, null_branch = field["type"], -1
        if isinstance(t, list):
            if len(t) != 2 or "null" not in t:
                return None
            null_branch = t.index("null")
            t = t[1 - null_branch]
        kind = _kind(t)
        if not logical and isinstance(t, dict) and "logicalType" in t:
            return None
        if kind is None or kind == NULL:
            return None
        if kind == ENUM:
            symbols[i] = tuple(t["symbols"])
        names.append(field["name"])
        kinds.append(kind)
        nulls.append(null_branch)
        types.append(t)
    return Plan(tuple(names), np.array(kinds, np.int8), np.array(nulls, np.int8), symbols, tuple(types))


def _kind(t) -> int | None:
    if isinstance(t, str):
        return _PRIMITIVES.get(t)
    if isinstance(t, dict):
        if t.get("type") == "enum":
            return ENUM
        if isinstance(t.get("type"), str) and t["type"] in _PRIMITIVES:
            return _PRIMITIVES[t["type"]]  # a primitive with a logical type: the bytes are the primitive's
    return None


class Columns(NamedTuple):
    """Per field: `ints` (integers, booleans, enum indexes), `starts`/`lengths` (floats, strings, bytes),
    `valid` (False where a union held null)."""

    ints: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    valid: np.ndarray


@njit(cache=True, nogil=True)
def _varint(buf, p, end):
    """(zigzag-decoded value, next position); next position -1 when the varint runs past end or 10 bytes."""
    result = np.uint64(0)
    shift = 0
    while p < end and shift < 70:
        b = buf[p]
        p += 1
        result |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            return np.int64(result >> np.uint64(1)) ^ -np.int64(result & np.uint64(1)), p
        shift += 7
    return np.int64(0), -1


@njit(cache=True, nogil=True)
def _decode(buf, starts, lengths, kinds, null_branch, ints, out_starts, out_lengths, valid):
    n, fields = ints.shape
    for row in range(n):
        p = starts[row]
        end = p + lengths[row]
        for f in range(fields):
            if null_branch[f] >= 0:
                branch, p = _varint(buf, p, end)
                if p < 0 or (branch != 0 and branch != 1):
                    return row
                if branch == null_branch[f]:
                    valid[row, f] = False
                    continue
            valid[row, f] = True
            kind = kinds[f]
            if kind == 1:  # boolean: one byte, 0 or 1
                if p >= end or buf[p] > 1:
                    return row
                ints[row, f] = buf[p]
                p += 1
            elif kind == 2 or kind == 3 or kind == 8:
                value, p = _varint(buf, p, end)
                if p < 0 or (kind != 3 and (value < -2147483648 or value > 2147483647)):
                    return row
                ints[row, f] = value
            elif kind == 4 or kind == 5:
                size = 4 if kind == 4 else 8
                if p + size > end:
                    return row
                out_starts[row, f] = p
                out_lengths[row, f] = size
                p += size
            else:  # string, bytes
                size, p = _varint(buf, p, end)
                if p < 0 or size < 0 or p + size > end:
                    return row
                out_starts[row, f] = p
                out_lengths[row, f] = size
                p += size
        if p != end:
            return row  # bytes left over: not a value of this schema
    return -1


def decode(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, p: Plan) -> tuple[Columns, int]:
    """The columns of the values at starts/lengths in buf (every one written with the plan's schema), and
    the first row that is not such a value (-1: none)."""
    n, fields = len(starts), len(p.names)
    cols = Columns(np.zeros((n, fields), np.int64), np.zeros((n, fields), np.int64),
                   np.full((n, fields), -1, np.int64), np.zeros((n, fields), np.bool_))
    bad = _decode(buf, np.asarray(starts, np.int64), np.asarray(lengths, np.int64), p.kinds, p.null_branch,
                  *cols)
    return cols, int(bad)


def floats(buf: np.ndarray, starts: np.ndarray, kind: int) -> np.ndarray:
    """The float (4-byte) or double (8-byte) values at `starts` (0 where a union held null), by one gather."""
    size, dtype = (4, "<f4") if kind == FLOAT else (8, "<f8")
    index = starts[:, None] + np.arange(size)
    return np.ascontiguousarray(buf[index]).view(dtype).reshape(len(starts))


def field_values(buf: np.ndarray, cols: Columns, p: Plan, f: int) -> list:
    """Field f of every row as the Python values fastavro gives (None where null): for reading, not speed."""
    kind = int(p.kinds[f])
    valid = cols.valid[:, f]
    if kind in (FLOAT, DOUBLE):
        raw = floats(buf, np.where(valid, cols.starts[:, f], 0), kind).tolist()
    elif kind in (STRING, BYTES):
        raw = [bytes(buf[s:s + max(n, 0)]) for s, n in zip(cols.starts[:, f].tolist(), cols.lengths[:, f].tolist())]
        if kind == STRING:
            raw = [b.decode() for b in raw]
    elif kind == ENUM:
        raw = [p.symbols[f][i] for i in cols.ints[:, f].tolist()]
    elif kind == BOOLEAN:
        raw = [bool(i) for i in cols.ints[:, f].tolist()]
    else:
        raw = cols.ints[:, f].tolist()
    return [v if ok else None for v, ok in zip(raw, valid.tolist())]

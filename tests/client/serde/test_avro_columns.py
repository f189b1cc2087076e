"""The Avro column kernel reads flat records exactly as fastavro does, and stops at the first bad value."""

from __future__ import annotations

import io
import random

import fastavro
import numpy as np
import pytest

from mmlog.client.serde import avro_columns as ac

SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "Reading", "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "count", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "celsius", "type": "float"},
        {"name": "kelvin", "type": "double"},
        {"name": "raw", "type": "bytes"},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "MID", "HIGH"]}},
        {"name": "note", "type": ["null", "string"]},
        {"name": "weight", "type": ["double", "null"]},
        {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]})
PLAN = ac.plan(SCHEMA)


def reading(rng: random.Random) -> dict:
    return {
        "id": rng.randint(-2**63, 2**63 - 1), "sensor": "".join(rng.choices("abcé€😀", k=rng.randint(0, 12))),
        "count": rng.randint(-2**31, 2**31 - 1), "ok": rng.random() < 0.5,
        "celsius": float(np.float32(rng.uniform(-1e6, 1e6))), "kelvin": rng.uniform(-1e300, 1e300),
        "raw": rng.randbytes(rng.randint(0, 40)), "level": rng.choice(["LOW", "MID", "HIGH"]),
        "note": None if rng.random() < 0.3 else "n" * rng.randint(0, 300),
        "weight": None if rng.random() < 0.3 else rng.random(), "seen": rng.randint(0, 2**41),
    }


def encoded(records: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The values back to back with a junk byte between them, as a fetched chunk holds them."""
    out, starts, lengths = bytearray(), [], []
    for r in records:
        b = io.BytesIO()
        fastavro.schemaless_writer(b, SCHEMA, r)
        out += b"\xff"
        starts.append(len(out))
        lengths.append(len(b.getvalue()))
        out += b.getvalue()
    return np.frombuffer(bytes(out), np.uint8), np.array(starts, np.int64), np.array(lengths, np.int64)



def test_a_flat_schema_has_a_plan_and_a_nested_one_has_none():
    assert PLAN.names[0] == "id" and len(PLAN.names) == 11
    assert ac.plan(fastavro.parse_schema({"type": "record", "name": "N", "fields": [
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [{"name": "x", "type": "int"}]}}]})) is None
    assert ac.plan(fastavro.parse_schema({"type": "record", "name": "U", "fields": [
        {"name": "either", "type": ["int", "string"]}]})) is None
    assert ac.plan(fastavro.parse_schema({"type": "array", "items": "int"})) is None


def test_every_field_of_every_row_is_what_fastavro_reads():
    rng = random.Random(7)
    records = [reading(rng) for _ in range(500)]
    buf, starts, lengths = encoded(records)
    cols, bad = ac.decode(buf, starts, lengths, PLAN)
    assert bad == -1
    for f, name in enumerate(PLAN.names):
        assert ac.field_values(buf, cols, PLAN, f) == [r[name] for r in records], name


def test_a_value_cut_short_or_with_bytes_left_over_is_the_row_answered():
    rng = random.Random(8)
    buf, starts, lengths = encoded([reading(rng) for _ in range(10)])
    short = lengths.copy()
    short[6] -= 1
    assert ac.decode(buf, starts, short, PLAN)[1] == 6
    longer = lengths.copy()
    longer[3] += 1  # the next value's junk byte read as part of this one
    assert ac.decode(buf, starts, longer, PLAN)[1] == 3


def test_a_union_branch_that_does_not_exist_is_a_bad_value():
    schema = fastavro.parse_schema({"type": "record", "name": "B", "fields": [{"name": "x", "type": ["null", "int"]}]})
    p = ac.plan(schema)
    buf = np.frombuffer(bytes([4, 2]), np.uint8)  # branch 2 of a two-branch union
    assert ac.decode(buf, np.array([0]), np.array([2]), p)[1] == 0


@pytest.mark.parametrize("value", [b"\x02", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"])
def test_a_boolean_other_than_0_or_1_and_an_endless_varint_are_bad_values(value):
    for kind in ("boolean", "long"):
        p = ac.plan(fastavro.parse_schema({"type": "record", "name": "V", "fields": [{"name": "x", "type": kind}]}))
        buf = np.frombuffer(value, np.uint8)
        bad = ac.decode(buf, np.array([0]), np.array([len(value)]), p)[1]
        assert bad == (0 if kind == "boolean" or len(value) > 10 else -1)

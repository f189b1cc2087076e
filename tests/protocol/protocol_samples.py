"""Populated sample messages for every (api, version), built from the schema tables.

Every field present in the version gets a distinct, non-default value, so a
field read from the wrong position cannot compare equal by accident. The
``nulls`` variant puts None in every field that is nullable in that version.
"""

from __future__ import annotations

import itertools
import uuid

from mmlog.protocol.messages import APIS
from mmlog.protocol.schema import Field, Message
from mmlog.protocol.structs import StructType, in_range

_INT_LIMITS = {"int8": 120, "int16": 30000, "uint16": 60000, "int32": 2**31 - 1,
               "uint32": 2**32 - 1, "int64": 2**63 - 1}


def every_api_version():
    """(api, version) for every version of every API in the registry."""
    return [(api, v) for api in APIS.values() for v in range(api.min_version, api.max_version + 1)]


def sample(message: Message, version: int, *, nulls: bool = False):
    """A value of ``message`` with every field of ``version`` set."""
    counter = itertools.count(7)
    return _struct(message, version, message.is_flexible(version), nulls, counter)


def _in_version(f: Field, version: int, flexible: bool) -> bool:
    return f.present(version) or (flexible and f.is_tagged(version))


def _struct(stype: StructType, version, flexible, nulls, counter):
    values = {f.name: _value(f, version, flexible, nulls, counter)
              for f in stype.fields if _in_version(f, version, flexible)}
    return stype.cls(**values)


def _value(f: Field, version, flexible, nulls, counter):
    if nulls and in_range(f.nullable, version):
        return None
    if f.is_array:
        return [_item(f, version, flexible, nulls, counter) for _ in range(2)]
    if f.struct is not None:
        return _struct(f.struct, version, flexible, nulls, counter)
    return _scalar(f.item, f.name, f.default, counter)


def _item(f: Field, version, flexible, nulls, counter):
    if f.struct is not None:
        return _struct(f.struct, version, flexible, nulls, counter)
    return _scalar(f.item, f.name, None, counter)


def _scalar(type_name: str, name: str, default, counter):
    n = next(counter)
    if type_name == "bool":
        return not default
    if type_name in _INT_LIMITS:
        value = n % _INT_LIMITS[type_name]
        return value + 1 if value == default else value
    if type_name == "float64":
        return n + 0.5
    if type_name == "string":
        return f"{name}-{n}-é"  # one non-ASCII character: lengths are in bytes
    if type_name in ("bytes", "records"):
        return f"<{name} {n}>".encode() * 3
    if type_name == "uuid":
        return uuid.UUID(int=(n << 64) | 0x5EED)
    raise AssertionError(f"no sample for {type_name}")

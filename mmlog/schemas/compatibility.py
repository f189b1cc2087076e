"""Compatibility levels: whether a new schema may follow a subject's existing ones, as Confluent decides.

BACKWARD: the new schema reads data written with the existing one; FORWARD: the existing one reads the
new one's data; FULL: both. The plain levels compare with the latest version only, the transitive ones with
every version, newest first, stopping at the first that fails. Each schema type answers one question,
`reader_problems(writer)`; reasons that speak of "the reader schema" and "the writer schema" are given
back naming them "the new schema" and "the old schema", followed by the old schema (and its version when
known), as Confluent Schema Registry's verbose answers are.
"""

from __future__ import annotations

import re

BACKWARD, BACKWARD_TRANSITIVE = "BACKWARD", "BACKWARD_TRANSITIVE"
FORWARD, FORWARD_TRANSITIVE = "FORWARD", "FORWARD_TRANSITIVE"
FULL, FULL_TRANSITIVE = "FULL", "FULL_TRANSITIVE"
NONE = "NONE"
LEVELS = (BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE)
DEFAULT = BACKWARD
DIFFERENT_TYPE = "Incompatible because of different schema type"
MAX_SCHEMA_IN_REASON = 10 * 1024  # a longer old schema is cut in the reasons

_ROLE = re.compile(r"\b(reader|writer) schema\b")


class UnknownLevel(ValueError):
    """A compatibility level that is not one of LEVELS (the registry answers 42203)."""

    def __init__(self, level):
        super().__init__(f"Invalid compatibility level {level!r}: one of {', '.join(LEVELS)}")
        self.level = level


def check(level: str, new, existing: list, versions: list[int] | None = None) -> list[str]:
    """The reasons `new` may not follow `existing` (oldest first) under `level`; empty when it may.

    `versions`, when given, are the existing schemas' version numbers, named in the reasons."""
    if level not in LEVELS:
        raise UnknownLevel(level)
    if level == NONE or not existing:
        return []
    pairs = list(zip(existing, versions if versions is not None else [None] * len(existing)))
    compared = reversed(pairs) if level.endswith("_TRANSITIVE") else pairs[-1:]
    direction = level.removesuffix("_TRANSITIVE")
    for old, version in compared:
        reasons = _against(direction, new, old, version)
        if reasons:
            return reasons
    return []


def _against(direction: str, new, old, version) -> list[str]:
    if new.schema_type != old.schema_type:
        return [DIFFERENT_TYPE]
    if direction == BACKWARD:
        return _named(new.reader_problems(old), "new", "old", old, version)
    if direction == FORWARD:
        return _named(old.reader_problems(new), "old", "new", old, version)
    return (_named(old.reader_problems(new), "old", "new", None, None)
            + _named(new.reader_problems(old), "new", "old", old, version))


def _named(reasons: list[str], reader: str, writer: str, old, version) -> list[str]:
    """Reasons with the reader and writer named; the old schema after them when `old` is given."""
    if not reasons:
        return []
    roles = {"reader": reader, "writer": writer}
    out = [_ROLE.sub(lambda m: f"{roles[m.group(1)]} schema", reason) for reason in reasons]
    if old is not None:
        if version is not None:
            out.append(f"{{oldSchemaVersion: {version}}}")
        text = old.text
        out.append(f"{{oldSchema: '{text}'}}" if len(text) <= MAX_SCHEMA_IN_REASON
                   else f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_IN_REASON]}...'}}")
    return out

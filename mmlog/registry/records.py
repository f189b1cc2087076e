"""The records of `_schemas` in Confluent Schema Registry's JSON, so the topic reads like one of Confluent's.

Keys (the compaction key: the last record of each wins):

    {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}
    {"keytype": "CONFIG", "subject": "s" | null, "magic": 0}      null subject: the global setting
    {"keytype": "MODE", "subject": "s" | null, "magic": 0}
    {"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}
    {"keytype": "NOOP", "magic": 0}

Values: a SCHEMA's `{"subject", "version", "id", "schema", "schemaType", "references", "deleted"}`
(schemaType left out for AVRO, as Confluent writes it); a CONFIG's `{"compatibilityLevel", "normalize"}`;
a MODE's `{"mode"}`; a DELETE_SUBJECT's `{"subject", "version"}` (every version up to it soft-deleted).
A null value is a tombstone: a SCHEMA version deleted permanently, a CONFIG or MODE unset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, NOOP = "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "NOOP"


@dataclass(frozen=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        doc: dict = {"keytype": self.keytype}
        if self.keytype != NOOP:
            doc["subject"] = self.subject
        if self.keytype == SCHEMA:
            doc["version"] = self.version
        doc["magic"] = 1 if self.keytype == SCHEMA else 0
        return _dump(doc)


@dataclass(frozen=True)
class SchemaValue:
    """One version of a subject as `_schemas` holds it."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple = field(default_factory=tuple)  # ({"name", "subject", "version"}, ...)
    deleted: bool = False

    def encode(self) -> bytes:
        doc: dict = {"subject": self.subject, "version": self.version, "id": self.id, "schema": self.schema}
        if self.schema_type != "AVRO":
            doc["schemaType"] = self.schema_type
        if self.references:
            doc["references"] = [dict(r) for r in self.references]
        doc["deleted"] = self.deleted
        return _dump(doc)

    @classmethod
    def decode(cls, doc: dict) -> SchemaValue:
        refs = tuple({"name": r["name"], "subject": r["subject"], "version": int(r["version"])}
                     for r in doc.get("references") or ())
        return cls(doc["subject"], int(doc["version"]), int(doc["id"]), doc["schema"],
                   doc.get("schemaType") or "AVRO", refs, bool(doc.get("deleted", False)))


def decode_key(raw: bytes | None) -> Key | None:
    """A record's key, or None when it is not one of the registry's (ignored, as Confluent ignores it)."""
    try:
        doc = json.loads(raw)
        keytype = doc["keytype"]
        version = doc.get("version")
        return Key(keytype, doc.get("subject"), None if version is None else int(version))
    except (TypeError, ValueError, KeyError):
        return None


def decode_value(raw: bytes | None) -> dict | None:
    """A record's value as a JSON object; None for a tombstone."""
    if raw is None:
        return None
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError("a value that is not a JSON object")  # noqa: TRY004 - bad data, as json.loads says
    return doc


def encode(doc: dict | None) -> bytes | None:
    return None if doc is None else _dump(doc)


def _dump(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()

"""A broker's view of the registry: subjects and their versions, schemas by id, configs and modes.

Built by the reader thread (reader.py) applying `_schemas` in order, and read by the HTTP handlers; one lock
guards it (the registry's own, never the control plane's), and `wait_applied(offset)` lets a write answer
only once this broker's view holds it. Ids: a schema keeps one id wherever it is registered (the same
`identity` under another subject), and `max_id` is the highest id this view has ever seen, so the writer
never hands one out twice.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from mmlog.registry import records
from mmlog.registry.records import Key, SchemaValue

log = logging.getLogger("mmlog.registry")

DEFAULT_LEVEL = "BACKWARD"
DEFAULT_MODE = "READWRITE"


class RegistryView:
    def __init__(self, identify=None) -> None:
        """identify(schema_type, text, resolved references) -> the schema's identity (None: its text)."""
        self.identify = identify
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        self.ids: dict[int, SchemaValue] = {}  # id -> one version holding it (the schema, its type, references)
        self.identities: dict[tuple, int] = {}  # (type, identity, references) -> id
        self.id_keys: dict[int, tuple] = {}  # id -> its (type, identity, references)
        self.configs: dict[str | None, dict] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.applied = 0  # the offset of the next record to apply
        self.changed = threading.Condition()
        self.ready = threading.Event()  # the reader caught up with the topic as it was at start (reader.py)

    # ------------------------------------------------------------ applying the topic

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self.changed:
            try:
                self._apply(records.decode_key(key), records.decode_value(value))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("_schemas offset %d: a record the registry cannot read, skipped: %s", offset, exc)
            self.applied = offset + 1
            self.changed.notify_all()

    def advance(self, offset: int) -> None:
        """Nothing to apply before `offset` (compacted away, or control records)."""
        with self.changed:
            if offset > self.applied:
                self.applied = offset
                self.changed.notify_all()

    def _apply(self, key: Key | None, doc: dict | None) -> None:
        if key is None or key.keytype == records.NOOP:
            return
        if key.keytype == records.SCHEMA:
            self._apply_schema(key, doc)
        elif key.keytype == records.CONFIG:
            self._set(self.configs, key.subject, doc)
        elif key.keytype == records.MODE:
            self._set(self.modes, key.subject, None if doc is None else str(doc["mode"]))
        elif key.keytype == records.DELETE_SUBJECT and doc is not None:
            versions = self.subjects.get(key.subject, {})
            for number, v in list(versions.items()):
                if number <= int(doc["version"]):
                    versions[number] = _deleted(v)

    @staticmethod
    def _set(table: dict, subject, value) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _apply_schema(self, key: Key, doc: dict | None) -> None:
        versions = self.subjects.setdefault(key.subject, {})
        if doc is None:
            gone = versions.pop(key.version, None)
            if not versions:
                del self.subjects[key.subject]
            if gone is not None:
                self._forget_id(gone.id)
            return
        value = SchemaValue.decode(doc)
        self.max_id = max(self.max_id, value.id)
        identity = self.identity_key(value.schema_type, value.schema, value.references)
        held = self.id_keys.get(value.id)
        if held is not None and held != identity:
            # Two writers at once (a leader change) gave one id to two schemas: the first in the topic keeps
            # it, every broker alike; the other was never acknowledged (operations._check_id).
            log.warning("_schemas: %s version %d names id %d, which holds another schema: not applied",
                        value.subject, value.version, value.id)
            if not versions:
                del self.subjects[key.subject]
            return
        versions[value.version] = value
        if held is None:
            self.ids[value.id] = value
            self.id_keys[value.id] = identity
            self.identities.setdefault(identity, value.id)

    def _forget_id(self, schema_id: int) -> None:
        """A permanent delete: the id stays served while another version still holds it."""
        if any(v.id == schema_id for vs in self.subjects.values() for v in vs.values()):
            return
        gone = self.ids.pop(schema_id, None)
        self.id_keys.pop(schema_id, None)
        if gone is not None:
            self.identities = {k: i for k, i in self.identities.items() if i != schema_id}

    def identity_key(self, schema_type: str, text: str, references, identity: str | None = None) -> tuple:
        if identity is None and self.identify is not None:
            try:
                identity = self.identify(schema_type, text, self.resolve(references))
            except Exception:  # noqa: BLE001 - a schema its type cannot parse is compared by its text
                identity = None
        refs = json.dumps([[r["name"], r["subject"], r["version"]] for r in references])
        return schema_type, text if identity is None else identity, refs

    # ------------------------------------------------------------ waiting

    def wait_applied(self, offset: int, timeout: float) -> bool:
        """Until every record before `offset` is applied; False if that took longer than `timeout`."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.applied < offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    # ------------------------------------------------------------ questions (callers hold `changed`)

    def versions(self, subject: str, deleted: bool = False) -> dict[int, SchemaValue]:
        return {n: v for n, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted}

    def live_subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, vs in self.subjects.items() if vs and (deleted or any(not v.deleted for v in vs.values())))

    def resolve(self, references, seen=None) -> list[tuple[str, str, str]]:
        """The referenced schemas, transitive ones included, dependencies first: [(name, type, text)].
        KeyError names a reference this view does not hold."""
        out: list[tuple[str, str, str]] = []
        seen = set() if seen is None else seen
        for ref in references:
            target = self.subjects.get(ref["subject"], {}).get(int(ref["version"]))
            if target is None:
                raise KeyError(f"reference {ref['name']!r}: subject {ref['subject']!r} version {ref['version']}")
            if (ref["subject"], target.version) in seen:
                continue
            seen.add((ref["subject"], target.version))
            out += self.resolve(target.references, seen)
            out.append((ref["name"], target.schema_type, target.schema))
        return out

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that name subject/version as a reference."""
        return sorted({v.id for vs in self.subjects.values() for v in vs.values() if not v.deleted and any(
            r["subject"] == subject and int(r["version"]) == version for r in v.references)})

    def level(self, subject: str | None) -> str:
        found = self.configs.get(subject) or self.configs.get(None) or {}
        return found.get("compatibilityLevel") or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    def normalize(self, subject: str | None) -> bool:
        found = self.configs.get(subject) or self.configs.get(None) or {}
        return bool(found.get("normalize", False))


def _deleted(v: SchemaValue) -> SchemaValue:
    return SchemaValue(v.subject, v.version, v.id, v.schema, v.schema_type, v.references, True)

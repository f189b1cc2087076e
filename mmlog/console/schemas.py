"""The schema registry as the Schemas page shows it: subjects, a subject's versions, two versions side by side
with a line diff of their pretty-printed texts, its compatibility level (editable), the schema types.

Read from this broker's registry view (mmlog/registry/view.py, under the view's own lock); each subject
is shown only to a user the registry's ACL mapping lets read it (registry/access.py: a `<topic>-key` or
`<topic>-value` subject is the topic's, any other the cluster's), and a level is changed only by one it
lets configure the subject, through the registry's own change path (service.py).
"""

from __future__ import annotations

import difflib
import json

from mmlog.registry import access, errors, operations
from mmlog.registry.reads import TYPES_ANSWER
from mmlog.web.responses import HttpError

SCHEMA_TYPES = TYPES_ANSWER


class SchemaAccessDenied(PermissionError):
    """The registry's ACL mapping refuses the user this subject (HTTP 403)."""


def _check(may, subject: str, action: str) -> None:
    operation, kind, name = access.for_subject(subject, action)
    if not may(operation, kind, name):
        raise SchemaAccessDenied(f"not allowed to {action} subject {subject!r}")


def readable_subjects(view, may) -> list[str]:
    """The live subjects the user may read, sorted."""
    with view.changed:
        names = view.live_subjects()
    return [s for s in names if may(*access.for_subject(s, access.READ))]


def subject_rows(view, names: list[str]) -> list[dict]:
    """A page of subjects: each one's latest version, its id and type, the subject's level."""
    rows = []
    with view.changed:
        for subject in names:
            versions = view.versions(subject)
            if not versions:
                continue  # deleted since it was listed
            latest = versions[max(versions)]
            rows.append({"subject": subject, "versions": len(versions), "latest": latest.version,
                         "id": latest.id, "type": latest.schema_type, "compatibility": view.level(subject)})
    return rows


def subject_detail(view, may, subject: str) -> dict:
    """A subject's versions (id, type, references) and its compatibility level and mode."""
    _check(may, subject, access.READ)
    with view.changed:
        versions = view.versions(subject)
        if not versions:
            raise errors.subject_not_found(subject)
        own = (view.configs.get(subject) or {}).get("compatibilityLevel")
        return {"subject": subject, "compatibility": view.level(subject), "compatibility_set": own is not None,
                "mode": view.mode(subject), "levels": list(operations.levels()),
                "versions": [{"version": v.version, "id": v.id, "type": v.schema_type,
                              "references": [dict(r) for r in v.references]} for v in versions.values()]}


def pretty(schema_type: str, text: str) -> str:
    """Avro and JSON schemas indented two spaces, keys in their order; Protobuf as written."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            pass
    return text


def side_by_side(left: str, right: str) -> list[dict]:
    """Rows of a line diff: {op: equal|delete|insert|replace, left: [n, text] | None, right: ...}."""
    a, b = left.splitlines(), right.splitlines()
    rows = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            rows.append({"op": op, "left": [i + 1, a[i]] if i < i2 else None,
                         "right": [j + 1, b[j]] if j < j2 else None})
    return rows


def compare(view, may, subject: str, left: str, right: str) -> dict:
    """Two versions of a subject ("latest" allowed) pretty-printed, and their line diff."""
    _check(may, subject, access.READ)
    with view.changed:
        a = operations.pick_version(view, subject, left)
        b = operations.pick_version(view, subject, right)
    texts = [pretty(v.schema_type, v.schema) for v in (a, b)]
    return {"subject": subject, "left": {"version": a.version, "id": a.id, "type": a.schema_type, "text": texts[0]},
            "right": {"version": b.version, "id": b.id, "type": b.schema_type, "text": texts[1]},
            "diff": side_by_side(*texts), "same": texts[0] == texts[1]}


def set_compatibility(service, may, subject: str, level: str, as_user=None) -> dict:
    """Change a subject's compatibility level, as PUT /config/{subject} does: made here when this broker
    writes the registry's changes; else sent as the user to the registry's REST API (`as_user()`: a
    SchemaRegistry client with the session's credentials), which forwards it to the writer and answers
    once this broker's view holds it."""
    _check(may, subject, access.CONFIGURE)
    if service.leader_url() is not None:
        from mmlog.client.serde import RegistryError

        client = as_user() if as_user is not None else None
        if client is None:
            raise errors.forwarding("no schema registry URL to send the change to")
        try:
            return {"subject": subject, "compatibility": client.set_compatibility(level, subject)}
        except RegistryError as exc:
            raise HttpError(exc.status, exc.error_code, exc.message) from None
    answer, _ = service.change(lambda view, _writer: operations.set_config(view, subject, {"compatibility": level}))
    return {"subject": subject, "compatibility": answer["compatibility"]}

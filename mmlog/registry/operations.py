"""What each change does, decided against the view: the records to append and the answer to give.

Every check is made before anything is written (a refused change writes nothing). Callers hold the
writer's lock and have caught the view up, so the view is the topic. Each function returns a `Change`;
its `check` (if any) runs once the records are applied, to confirm what was answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mmlog import schemas
from mmlog.registry import errors
from mmlog.registry.records import CONFIG, DELETE_SUBJECT, MODE, SCHEMA, Key, SchemaValue, encode
from mmlog.registry.view import RegistryView

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


@dataclass
class Change:
    answer: object
    records: list = field(default_factory=list)  # [(key bytes, value bytes | None)]
    check: object = None  # callable(view) -> None, raising when the applied change is not what was answered


def levels() -> tuple:
    from mmlog.schemas.compatibility import LEVELS

    return tuple(LEVELS)


def parse_version(text, allow_latest: bool = True) -> int | None:
    """A version path segment: 1..2^31-1, or `latest` / -1 (None)."""
    if allow_latest and str(text) in ("latest", "-1"):
        return None
    try:
        number = int(text)
    except (TypeError, ValueError):
        raise errors.invalid_version(text) from None
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(text)
    return number


def pick_version(view: RegistryView, subject: str, text, deleted: bool = False) -> SchemaValue:
    """One version of a subject (40401 / 40402 / 42202 as Confluent answers)."""
    number = parse_version(text)
    if subject not in view.subjects or not view.versions(subject, deleted=True):
        raise errors.subject_not_found(subject)
    versions = view.versions(subject, deleted=deleted)
    if number is None:
        if not versions:
            raise errors.subject_not_found(subject)
        return versions[max(versions)]
    if number not in versions:
        raise errors.version_not_found(subject, number)
    return versions[number]


def parsed_from(view: RegistryView, schema_type: str, text: str, references):
    try:
        resolved = view.resolve(references)
    except KeyError as exc:
        raise errors.invalid_schema(f"{exc.args[0]} not found") from None
    try:
        return schemas.parse(schema_type, text, resolved)
    except schemas.InvalidSchema as exc:
        raise errors.invalid_schema(str(exc)) from None


def check_references(refs) -> tuple:
    if refs is None:
        return ()
    if not isinstance(refs, list) or not all(isinstance(r, dict) and {"name", "subject", "version"} <= set(r)
                                             for r in refs):
        raise errors.invalid_schema("references must be a list of {name, subject, version}")
    return tuple({"name": str(r["name"]), "subject": str(r["subject"]), "version": int(r["version"])} for r in refs)


def schema_request(body: dict) -> tuple[str, str, tuple]:
    schema_type = body.get("schemaType") or "AVRO"
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise errors.invalid_schema("the request has no schema")
    if schema_type not in schemas.TYPES:
        raise errors.invalid_schema(f"unknown schema type {schema_type!r}")
    return schema_type, text, check_references(body.get("references"))


def stored_text(parsed, normalize: bool) -> str:
    """What is kept for a schema: its text, or its normalised form when asked to normalise."""
    return getattr(parsed, "normalized", None) or parsed.text if normalize else parsed.text


def find_in_subject(view: RegistryView, subject: str, key: tuple, deleted: bool = False) -> SchemaValue | None:
    """The version of a subject that holds the schema with this identity key."""
    schema_id = view.identities.get(key)
    if schema_id is None:
        return None
    found = [v for v in view.versions(subject, deleted=deleted).values() if v.id == schema_id]
    return found[-1] if found else None


def register(view: RegistryView, writer, subject: str, body: dict, normalize: bool) -> Change:
    schema_type, text, refs = schema_request(body)
    mode = view.mode(subject)
    given_id, given_version = body.get("id"), body.get("version")
    if mode == "READONLY":
        raise errors.not_permitted(f"Subject {subject} is in read-only mode")
    if given_id not in (None, -1, 0) and mode != "IMPORT":
        raise errors.not_permitted(f"Subject {subject} is not in import mode")
    parsed = parsed_from(view, schema_type, text, refs)
    normalize = normalize or view.normalize(subject)
    text = stored_text(parsed, normalize)
    key = view.identity_key(schema_type, text, refs, getattr(parsed, "identity", None))
    existing = find_in_subject(view, subject, key)
    if existing is not None and given_id in (None, -1, 0, existing.id):
        return Change({"id": existing.id})
    if mode == "IMPORT" and given_id not in (None, -1, 0):
        return _imported(view, subject, schema_type, text, refs, key, int(given_id), given_version)
    if mode != "IMPORT":  # an import takes what it is given, as Confluent's does
        _check_compatible(view, subject, parsed)
    schema_id = view.identities.get(key) or writer.next_id()
    versions = view.subjects.get(subject, {})
    number = max(versions, default=0) + 1
    value = SchemaValue(subject, number, schema_id, text, schema_type, refs)
    return Change({"id": schema_id}, [(Key(SCHEMA, subject, number).encode(), value.encode())],
                  check=lambda v: _check_id(v, schema_id, key))


def _imported(view, subject, schema_type, text, refs, key, schema_id, given_version) -> Change:
    if view.id_keys.get(schema_id, key) != key:
        raise errors.id_in_use(schema_id)
    number = parse_version(given_version, allow_latest=False) if given_version not in (None, -1) \
        else max(view.subjects.get(subject, {}), default=0) + 1
    if number in view.subjects.get(subject, {}):
        raise errors.not_permitted(f"Subject {subject} already has version {number}")
    value = SchemaValue(subject, number, schema_id, text, schema_type, refs)
    return Change({"id": schema_id}, [(Key(SCHEMA, subject, number).encode(), value.encode())])


def _check_compatible(view: RegistryView, subject: str, parsed) -> None:
    level = view.level(subject)
    if level == "NONE":
        return
    existing, numbers = [], []
    for v in view.versions(subject).values():
        try:
            existing.append(parsed_from(view, v.schema_type, v.schema, v.references))
            numbers.append(v.version)
        except Exception:  # noqa: BLE001, S112 - a stored schema this broker cannot parse is not compared
            continue
    problems = compatibility_problems(level, parsed, existing, numbers)
    if problems:
        raise errors.incompatible(subject, problems)


def compatibility_problems(level: str, parsed, existing: list, versions: list[int] | None = None) -> list[str]:
    from mmlog.schemas import compatibility

    return list(compatibility.check(level, parsed, existing, versions)) if existing else []


def _check_id(view: RegistryView, schema_id: int, key: tuple) -> None:
    """The id answered holds this schema in the applied topic (not a write of a former leader's)."""
    if view.id_keys.get(schema_id) != key:
        raise errors.store_error(f"id {schema_id} was taken meanwhile; register again")


# ------------------------------------------------------------ deletes


def delete_subject(view: RegistryView, subject: str, permanent: bool) -> Change:
    _writable(view, subject)
    every = view.versions(subject, deleted=True)
    if not every:
        raise errors.subject_not_found(subject)
    live = view.versions(subject)
    if not permanent:
        if not live:
            raise errors.subject_soft_deleted(subject)
        _not_referenced(view, subject, live)
        mark = {"subject": subject, "version": max(live)}  # every version up to it deleted, as Confluent writes it
        return Change(sorted(live), [(Key(DELETE_SUBJECT, subject).encode(), encode(mark))])
    if live:
        raise errors.subject_not_soft_deleted(subject)
    out = [(Key(SCHEMA, subject, n).encode(), None) for n in sorted(every, reverse=True)]
    return Change(sorted(every), out + _subject_settings_removed(view, subject))


def _subject_settings_removed(view: RegistryView, subject: str) -> list:
    return [(Key(kind, subject).encode(), None) for kind, table in ((CONFIG, view.configs), (MODE, view.modes))
            if subject in table]


def delete_version(view: RegistryView, subject: str, text, permanent: bool) -> Change:
    _writable(view, subject)
    number = parse_version(text)
    every = view.versions(subject, deleted=True)
    if not every:
        raise errors.subject_not_found(subject)
    live = view.versions(subject)
    if number is None:
        if not live and not permanent:
            raise errors.subject_not_found(subject)
        number = max(live or every)
    v = every.get(number)
    if v is None:
        raise errors.version_not_found(subject, number)
    if not permanent:
        if v.deleted:
            raise errors.version_soft_deleted(subject, number)
        _not_referenced(view, subject, {number: v})
        return Change(number, [_soft(v)])
    if not v.deleted:
        raise errors.version_not_soft_deleted(subject, number)
    out = [(Key(SCHEMA, subject, number).encode(), None)]
    if len(every) == 1:  # the subject's last version: its config and mode go with it, as Confluent does
        out += _subject_settings_removed(view, subject)
    return Change(number, out)


def _soft(v: SchemaValue) -> tuple[bytes, bytes]:
    gone = SchemaValue(v.subject, v.version, v.id, v.schema, v.schema_type, v.references, True)
    return Key(SCHEMA, v.subject, v.version).encode(), gone.encode()


def _not_referenced(view: RegistryView, subject: str, versions: dict) -> None:
    for number in versions:
        if view.referenced_by(subject, number):
            raise errors.reference_exists(subject, number)


def _writable(view: RegistryView, subject: str | None) -> None:
    if view.mode(subject) == "READONLY":
        raise errors.not_permitted(f"Subject {subject} is in read-only mode" if subject else
                                   "The registry is in read-only mode")


# ------------------------------------------------------------ configs and modes


def set_config(view: RegistryView, subject: str | None, body: dict) -> Change:
    """A level and/or the normalize flag; what the body leaves out stays as it was."""
    doc = dict(view.configs.get(subject) or {})
    level = body.get("compatibility", body.get("compatibilityLevel"))
    if level is not None or "normalize" not in body:
        if not isinstance(level, str) or level.upper() not in levels():
            raise errors.invalid_level(level)
        doc["compatibilityLevel"] = level.upper()
    if "normalize" in body:
        doc["normalize"] = bool(body["normalize"])
    doc.setdefault("compatibilityLevel", view.level(subject))
    answer = {"compatibility": doc["compatibilityLevel"], **({"normalize": doc["normalize"]} if "normalize" in doc
                                                           else {})}
    return Change(answer, [(Key(CONFIG, subject).encode(), encode(doc))])


def delete_config(view: RegistryView, subject: str | None) -> Change:
    if subject is not None and subject not in view.subjects and subject not in view.configs:
        raise errors.subject_not_found(subject)
    old = view.configs.get(subject)
    answer = {"compatibilityLevel": (old or {}).get("compatibilityLevel") or view.level(None if old else subject)}
    return Change(answer, [(Key(CONFIG, subject).encode(), None)] if old is not None else [])


def set_mode(view: RegistryView, subject: str | None, body: dict, force: bool) -> Change:
    mode = body.get("mode")
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise errors.invalid_mode(mode)
    mode = mode.upper()
    if mode == "IMPORT" and not force:
        held = view.live_subjects(deleted=True) if subject is None else \
            ([subject] if view.versions(subject, deleted=True) else [])
        if held:
            raise errors.not_permitted("Cannot import since found existing subjects")
    return Change({"mode": mode}, [(Key(MODE, subject).encode(), encode({"mode": mode}))])


def delete_mode(view: RegistryView, subject: str) -> Change:
    if subject not in view.modes and subject not in view.subjects:
        raise errors.subject_not_found(subject)
    old = view.mode(subject)
    return Change({"mode": old}, [(Key(MODE, subject).encode(), None)] if subject in view.modes else [])

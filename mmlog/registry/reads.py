"""The registry's read requests, answered from this broker's view (no I/O, no lock but the view's)."""

from __future__ import annotations

from aiohttp import web

from mmlog import schemas
from mmlog.registry import access, errors
from mmlog.registry.operations import (compatibility_problems, find_in_subject, parse_version, parsed_from,
                                       pick_version, schema_request, stored_text)
from mmlog.registry.records import SchemaValue
from mmlog.web.responses import answer, json_body

TYPES_ANSWER = ["JSON", "PROTOBUF", "AVRO"]  # the order Confluent answers /schemas/types with


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def version_doc(v: SchemaValue) -> dict:
    doc = {"subject": v.subject, "version": v.version, "id": v.id, "schema": v.schema}
    if v.schema_type != "AVRO":
        doc["schemaType"] = v.schema_type
    if v.references:
        doc["references"] = [dict(r) for r in v.references]
    return doc


class Reads:
    """Mixed into RegistryApi (api.py): `self.view`, `self.guard`, `self.allowed` come from there."""

    async def root(self, request: web.Request) -> web.Response:
        self.caller(request)
        return answer({})

    async def schema_types(self, request: web.Request) -> web.Response:
        self.caller(request)
        return answer(TYPES_ANSWER)

    def _by_id(self, request: web.Request) -> SchemaValue:
        self.caller(request)
        raw = request.match_info["id"]
        try:
            schema_id = int(raw)
        except ValueError:
            raise errors.schema_not_found(raw) from None
        with self.view.changed:
            found = self.view.ids.get(schema_id)
        if found is None:
            raise errors.schema_not_found(schema_id)
        return found

    async def schema_by_id(self, request: web.Request) -> web.Response:
        v = self._by_id(request)
        doc = {"schema": self._formatted(v, request.query.get("format", ""))}
        if v.schema_type != "AVRO":
            doc["schemaType"] = v.schema_type
        if v.references:
            doc["references"] = [dict(r) for r in v.references]
        return answer(doc)

    def _formatted(self, v: SchemaValue, fmt: str) -> str:
        if not fmt:
            return v.schema
        with self.view.changed:
            resolved = self.view.resolve(v.references)
        parsed = schemas.parse(v.schema_type, v.schema, resolved)
        formatted = getattr(parsed, "formatted", None)
        return formatted(fmt) if formatted is not None else v.schema

    async def schema_text_by_id(self, request: web.Request) -> web.Response:
        v = self._by_id(request)
        return web.Response(text=v.schema, content_type="application/vnd.schemaregistry.v1+json")

    async def subjects_by_id(self, request: web.Request) -> web.Response:
        return answer(sorted({s for s, _ in self._holders(request)}))

    async def versions_by_id(self, request: web.Request) -> web.Response:
        return answer([{"subject": s, "version": n} for s, n in self._holders(request)])

    def _holders(self, request: web.Request) -> list[tuple[str, int]]:
        v = self._by_id(request)
        deleted = flag(request, "deleted")
        caller = self.caller(request)
        with self.view.changed:
            found = [(s, n) for s, vs in sorted(self.view.subjects.items()) for n, x in sorted(vs.items())
                     if x.id == v.id and (deleted or not x.deleted)]
        return [(s, n) for s, n in found if self.allowed(caller, s, access.READ)]

    async def subjects(self, request: web.Request) -> web.Response:
        caller = self.caller(request)
        prefix = request.query.get("subjectPrefix", "")
        with self.view.changed:
            names = self.view.live_subjects(deleted=flag(request, "deleted"))
        return answer([s for s in names if s.startswith(prefix) and self.allowed(caller, s, access.READ)])

    async def versions(self, request: web.Request) -> web.Response:
        subject = self.subject(request, access.READ)
        with self.view.changed:
            numbers = list(self.view.versions(subject, deleted=flag(request, "deleted")))
        if not numbers:
            raise errors.subject_not_found(subject)
        return answer(numbers)

    async def version(self, request: web.Request) -> web.Response:
        return answer(version_doc(self._version(request)))

    async def version_schema(self, request: web.Request) -> web.Response:
        return web.Response(text=self._version(request).schema, content_type="application/vnd.schemaregistry.v1+json")

    def _version(self, request: web.Request) -> SchemaValue:
        subject = self.subject(request, access.READ)
        with self.view.changed:
            return pick_version(self.view, subject, request.match_info["version"], deleted=flag(request, "deleted"))

    async def referenced_by(self, request: web.Request) -> web.Response:
        v = self._version(request)
        with self.view.changed:
            return answer(self.view.referenced_by(v.subject, v.version))

    async def lookup(self, request: web.Request) -> web.Response:
        subject = self.subject(request, access.READ)
        schema_type, text, refs = schema_request(await json_body(request))
        deleted = flag(request, "deleted")
        with self.view.changed:
            if not self.view.versions(subject, deleted=deleted):
                raise errors.subject_not_found(subject)
            parsed = parsed_from(self.view, schema_type, text, refs)
            normalize = flag(request, "normalize") or self.view.normalize(subject)
            key = self.view.identity_key(schema_type, stored_text(parsed, normalize), refs, parsed.identity)
            found = find_in_subject(self.view, subject, key, deleted=deleted)
        if found is None:
            raise errors.schema_not_found()
        return answer(version_doc(found))

    async def compatibility(self, request: web.Request) -> web.Response:
        subject = self.subject(request, access.READ)
        schema_type, text, refs = schema_request(await json_body(request))
        which = request.match_info.get("version")
        with self.view.changed:
            parsed = parsed_from(self.view, schema_type, text, refs)
            level = self.view.level(subject)
            if which is None:
                against = list(self.view.versions(subject).values())
            elif parse_version(which) is None and not self.view.versions(subject):
                against = []  # nothing registered yet: anything is compatible
            else:
                against = [pick_version(self.view, subject, which)]
            existing = [parsed_from(self.view, v.schema_type, v.schema, v.references) for v in against]
        problems = [] if level == "NONE" else compatibility_problems(
            level if which is None else level.replace("_TRANSITIVE", ""), parsed, existing,
            [v.version for v in against])
        doc = {"is_compatible": not problems}
        if flag(request, "verbose"):
            doc["messages"] = problems
        return answer(doc)

    def _reading(self, request: web.Request) -> str | None:
        """The subject a config or mode read names (None: the global one), once the caller may read it."""
        subject = request.match_info.get("subject")
        if subject is None:
            self.caller(request)
        else:
            self.subject(request, access.READ)
        return subject

    async def get_config(self, request: web.Request) -> web.Response:
        subject = self._reading(request)
        with self.view.changed:
            found = self.view.configs.get(subject)
            if found is None and subject is not None:
                if not flag(request, "defaultToGlobal"):
                    raise errors.config_not_set(subject)
                found = self.view.configs.get(None)
            level = (found or {}).get("compatibilityLevel") or self.view.level(None)
        doc = {"compatibilityLevel": level}
        if found and "normalize" in found:
            doc["normalize"] = found["normalize"]
        return answer(doc)

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = self._reading(request)
        with self.view.changed:
            mode = self.view.modes.get(subject)
            if mode is None and subject is not None and not flag(request, "defaultToGlobal"):
                raise errors.mode_not_set(subject)
            return answer({"mode": mode or self.view.mode(None)})

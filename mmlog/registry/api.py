"""The registry's REST API as Confluent Schema Registry spells it: the routes, who may call them, and
the service mounted on the broker's web server (mmlog/web/)."""

from __future__ import annotations

from aiohttp import web

from mmlog.registry import access, errors
from mmlog.registry.reads import Reads
from mmlog.registry.service import RegistryService
from mmlog.registry.writes import Writes
from mmlog.security import tls
from mmlog.web.auth import Caller, Guard
from mmlog.web.server import blocking

CALLER = "mmlog.caller"


class RegistryApi(Reads, Writes):
    def __init__(self, service: RegistryService, guard: Guard, client_tls=None) -> None:
        self.service = service
        self.view = service.view
        self.guard = guard
        self.client_tls = client_tls  # how a forwarded request reaches an https registry (None: defaults)

    def caller(self, request: web.Request) -> Caller:
        """The authenticated caller (401 if not), once per request."""
        found = request.get(CALLER)
        if found is None:
            found = request[CALLER] = self.guard.caller(request)
        return found

    def subject(self, request: web.Request, action: str) -> str:
        """The request's subject, the caller authorised for `action` on it (403 if not)."""
        subject = request.match_info["subject"]
        if not subject or "\0" in subject:
            raise errors.invalid_subject(subject)
        caller = self.caller(request)
        self.guard.check(caller, *access.for_subject(subject, action))
        return subject

    def allowed(self, caller: Caller, subject: str, action: str) -> bool:
        operation, kind, name = access.for_subject(subject, action)
        self.guard.authorizer.refresh()
        return self.guard.authorizer.allowed(caller, operation, kind, name)

    def gated(self, handler):
        """The handler, held until this broker's view has caught up at start (50002 if it does not within
        the registry's timeout)."""
        ready, timeout = self.view.ready, self.service.timeout

        async def gate(request: web.Request) -> web.StreamResponse:
            if not ready.is_set() and not await blocking(ready.wait, timeout):
                raise errors.timeout("the registry is still reading _schemas")
            return await handler(request)

        return gate

    def routes(self) -> list:
        s, v = "/subjects/{subject}", "/subjects/{subject}/versions/{version}"
        return [
            web.get("/", self.root),
            web.get("/schemas/types", self.schema_types),
            web.get("/schemas/ids/{id}", self.schema_by_id),
            web.get("/schemas/ids/{id}/schema", self.schema_text_by_id),
            web.get("/schemas/ids/{id}/subjects", self.subjects_by_id),
            web.get("/schemas/ids/{id}/versions", self.versions_by_id),
            web.get("/subjects", self.subjects),
            web.post(s, self.lookup),
            web.delete(s, self.delete_subject),
            web.get(s + "/versions", self.versions),
            web.post(s + "/versions", self.register),
            web.get(v, self.version),
            web.delete(v, self.delete_version),
            web.get(v + "/schema", self.version_schema),
            web.get(v + "/referencedby", self.referenced_by),
            web.post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility),
            web.post("/compatibility/subjects/{subject}/versions", self.compatibility),
            web.get("/config", self.get_config),
            web.put("/config", self.put_config),
            web.delete("/config", self.delete_config),
            web.get("/config/{subject}", self.get_config),
            web.put("/config/{subject}", self.put_config),
            web.delete("/config/{subject}", self.delete_config),
            web.get("/mode", self.get_mode),
            web.put("/mode", self.put_mode),
            web.get("/mode/{subject}", self.get_mode),
            web.put("/mode/{subject}", self.put_mode),
            web.delete("/mode/{subject}", self.delete_mode),
        ]


def mount(server, config, listeners=None) -> RegistryService:
    """Start the registry of this broker and mount its API on the web server (stopped with it)."""
    service = RegistryService(config)
    client_tls = tls.peer_context(config) if any(scheme == "https" for scheme, _, _ in config.registry_listeners) \
        else None
    api = RegistryApi(service, Guard(config), client_tls)
    server.mount(api.routes(), wrap=api.gated, on_stop=service.stop, listeners=listeners)
    service.start()
    return service

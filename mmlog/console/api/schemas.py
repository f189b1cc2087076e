"""The Schemas page's API: subjects (paged), a subject's versions, two versions compared, its compatibility
level (changed by users the registry's ACL mapping allows), the schema types."""

from __future__ import annotations

from mmlog.console import schemas
from mmlog.console.errors import ConsoleError
from mmlog.console.paging import page
from mmlog.console.router import Routes
from mmlog.web.auth import Caller
from mmlog.web.responses import HttpError

routes = Routes()


def _registry(call):
    service = call.console.registry
    if service is None:
        raise ConsoleError(404, "NO_SCHEMA_REGISTRY", "this broker runs no schema registry "
                                                      "(schema.registry.listeners is not set)")
    return service


def _may(call):
    guard = call.console.guard
    transport = call.request.transport
    caller = Caller(call.session.principal, transport.get_extra_info("peername") if transport else None)
    guard.authorizer.refresh()
    return lambda operation, kind, name: guard.authorizer.allowed(caller, operation, kind, name)


def _answered(action):
    try:
        return action()
    except schemas.SchemaAccessDenied as exc:
        raise ConsoleError(403, "SCHEMA_AUTHORIZATION_FAILED", str(exc)) from None
    except HttpError as exc:  # the registry's own errors: subject or version not found, invalid level
        raise ConsoleError(exc.status, f"REGISTRY_{exc.code}", exc.message) from None


@routes.get("/schemas/types")
def types(call) -> list:
    return list(schemas.SCHEMA_TYPES)


@routes.get("/schemas/subjects")
def subjects(call) -> dict:
    view = _registry(call).view
    found = page(schemas.readable_subjects(view, _may(call)), call)
    found["items"] = schemas.subject_rows(view, found["items"])
    return found


@routes.get("/schemas/subjects/{subject}")
def subject(call) -> dict:
    return _answered(lambda: schemas.subject_detail(_registry(call).view, _may(call), call.params["subject"]))


@routes.get("/schemas/subjects/{subject}/compare")
def compare(call) -> dict:
    left, right = call.query.get("left", "latest"), call.query.get("right", "latest")
    return _answered(lambda: schemas.compare(_registry(call).view, _may(call), call.params["subject"], left, right))


@routes.put("/schemas/subjects/{subject}/compatibility")
def set_compatibility(call) -> dict:
    level = call.body.get("compatibility")
    return _answered(lambda: schemas.set_compatibility(_registry(call), _may(call), call.params["subject"],
                                                       str(level or ""), call.session.clients.registry_client))

"""The Security page's API, for super users only: users (names, mechanisms, iterations) and ACL bindings."""

from __future__ import annotations

from mmlog.console import security
from mmlog.console.errors import ConsoleError
from mmlog.console.paging import page
from mmlog.console.router import Routes

routes = Routes()


def _super_user(call) -> None:
    try:
        security.require_super_user(call.session.principal, call.console.guard.authorizer)
    except security.NotSuperUser as exc:
        raise ConsoleError(403, "NOT_SUPER_USER", str(exc)) from None


@routes.get("/security/users")
def users(call) -> dict:
    _super_user(call)
    return page(security.users(call.session.admin()), call, text=lambda u: u["name"])


@routes.get("/security/acls")
def acls(call) -> dict:
    _super_user(call)
    return page(security.bindings(call.session.admin()), call,
                text=lambda b: f"{b['principal']} {b['resource_type']}:{b['name']} {b['operation']}")

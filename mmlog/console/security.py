"""Users and ACLs as the Security page lists them, for super users only.

Users are names with their SCRAM mechanisms and iterations (DescribeUserScramCredentials answers no more:
never a salt, a key or a password); ACLs are DescribeAcls' bindings with their names spelled out. Both are
asked with the session's client, so the broker decides too; the console refuses anyone who is not a super
user before asking (`NotSuperUser`, HTTP 403), as the page shows every user and binding of the cluster.
"""

from __future__ import annotations

from mmlog.errors import SecurityDisabled
from mmlog.security import acls


class NotSuperUser(PermissionError):
    """The Security page is for the broker's super users (HTTP 403)."""


def require_super_user(principal: str, authorizer) -> None:
    """Refuse anyone but a super user; with no authoriser configured everyone is allowed everything."""
    if authorizer is not None and authorizer.enabled and principal not in authorizer.super_users:
        raise NotSuperUser(f"{principal} is not a super user: the Security page is for super users only")


def users(admin) -> list[dict]:
    """Every SCRAM user: its name and each mechanism's iterations."""
    return [{"name": name, "mechanisms": [{"mechanism": m, "iterations": i} for m, i in sorted(mechs.items())]}
            for name, mechs in sorted(admin.describe_users().items())]


ANY_BINDING = acls.Filter(acls.ANY, None, acls.ANY, None, None, acls.ANY, acls.ANY)


def binding_row(b: acls.Binding) -> dict:
    return {"resource_type": acls.RESOURCE_NAMES.get(b.resource_type, str(b.resource_type)), "name": b.name,
            "pattern": acls.PATTERN_NAMES.get(b.pattern_type, str(b.pattern_type)), "principal": b.principal,
            "host": b.host, "operation": acls.OPERATION_NAMES.get(b.operation, str(b.operation)),
            "permission": acls.PERMISSION_NAMES.get(b.permission, str(b.permission))}


def bindings(admin) -> list[dict]:
    """Every ACL binding, its codes named, sorted by resource, principal, operation (none without an
    authoriser: the broker answers SECURITY_DISABLED)."""
    try:
        found = admin.describe_acls(ANY_BINDING)
    except SecurityDisabled:
        return []
    rows = [binding_row(b) for b in found]
    return sorted(rows, key=lambda r: (r["resource_type"], r["name"], r["principal"], r["operation"],
                                       r["permission"], r["host"]))

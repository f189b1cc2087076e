"""The admin client's security operations: SCRAM users (salted on the client) and ACL bindings.

A mixin of `Admin` (admin.py)."""

from __future__ import annotations

import os

from mmlog.protocol.messages import (alter_user_scram_credentials, create_acls, delete_acls, describe_acls,
                                     describe_user_scram_credentials)
from mmlog.security import acls, scram

SCRAM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # AlterUserScramCredentials mechanism codes


class SecurityAdmin:
    """Users' SCRAM credentials and ACL bindings."""

    def set_user_password(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                          iterations: int = scram.MIN_ITERATIONS) -> None:
        """Create or replace a user's SCRAM credential: salted here, so the password never leaves the client."""
        salt = os.urandom(32)
        salted = scram.salted_password(mechanism, password, salt, iterations)
        self._alter_users([], [{"name": user, "mechanism": SCRAM_CODES[mechanism], "iterations": iterations,
                                "salt": salt, "salted_password": salted}])

    def delete_user(self, user: str, mechanism: str = "SCRAM-SHA-512") -> None:
        self._alter_users([{"name": user, "mechanism": SCRAM_CODES[mechanism]}], [])

    def describe_users(self, users: list[str] | None = None) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations} (all users when None); ResourceNotFound for a named unknown user."""
        body = self._request(self._controller(), describe_user_scram_credentials.API_KEY, 0,
                             describe_user_scram_credentials.REQUEST(
                                 users=None if users is None else [{"name": u} for u in users]))
        self._raise_first([(body.error_code, body.error_message or "")])
        self._raise_first((r.error_code, f"{r.user}: {r.error_message or ''}") for r in body.results)
        names = {code: name for name, code in SCRAM_CODES.items()}
        return {r.user: {names[i.mechanism]: i.iterations for i in r.credential_infos} for r in body.results}

    def _alter_users(self, deletions: list, upsertions: list) -> None:
        body = self._request(self._controller(), alter_user_scram_credentials.API_KEY, 0,
                             alter_user_scram_credentials.REQUEST(deletions=deletions, upsertions=upsertions))
        self._raise_first((r.error_code, f"{r.user}: {r.error_message or ''}") for r in body.results)

    def create_acls(self, bindings: list[acls.Binding]) -> None:
        """Add ACL bindings (security/acls.py's Binding, wire codes); the first refusal is raised."""
        body = self._request(self._controller(), create_acls.API_KEY, 1, create_acls.REQUEST(creations=[
            {"resource_type": b.resource_type, "resource_name": b.name, "resource_pattern_type": b.pattern_type,
             "principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission}
            for b in bindings]))
        self._raise_first((r.error_code, r.error_message or "") for r in body.results)

    def describe_acls(self, flt: acls.Filter) -> list[acls.Binding]:
        """The bindings that match a filter."""
        body = self._request(self._controller(), describe_acls.API_KEY, 1, describe_acls.REQUEST(
            **_filter_fields(flt)))
        self._raise_first([(body.error_code, body.error_message or "")])
        return [acls.Binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                             a.permission_type) for r in body.resources for a in r.acls]

    def delete_acls(self, filters: list[acls.Filter]) -> list[list[acls.Binding]]:
        """Remove the bindings matching each filter; per filter, the bindings removed."""
        body = self._request(self._controller(), delete_acls.API_KEY, 1, delete_acls.REQUEST(
            filters=[_filter_fields(f) for f in filters]))
        self._raise_first((r.error_code, r.error_message or "") for r in body.filter_results)
        return [[acls.Binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                              m.permission_type) for m in r.matching_acls] for r in body.filter_results]


def _filter_fields(f: acls.Filter) -> dict:
    return {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
            "pattern_type_filter": f.pattern_type, "principal_filter": f.principal, "host_filter": f.host,
            "operation": f.operation, "permission_type": f.permission}

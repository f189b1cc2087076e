"""The ACL authoriser as a processor applies it: Kafka's decision (security/acls.py), cached per connection.

Off (no `authorizer.class.name`), every check is one attribute test and allows.
On, a decision is asked as (connection, operation, resource type, name) and
answered from the connection's cache, a dict keyed by (operation, resource type,
name), when the ACLs have not changed since it was made: the cache carries the
generation of the ACL file it was filled from, and a connection finding an older
one starts a new cache. A producer writing one topic thus pays one dict lookup per
request, never a scan of the ACLs, and nothing per record.

Freshness: the processor loop re-checks the ACL file (one `stat`) every
CATALOGUE_CHECK_S (worker.py), and a CreateAcls/DeleteAcls answered here re-checks
at once, so an ACL change reaches every processor of every broker within about a
second of its write.

Principals: `super.users` (semicolon-separated) are allowed everything. The caller's
host is its peer address; an ACL host of `*` matches any.
"""

from __future__ import annotations

from mmlog.security import acls
from mmlog.security.acls import CLUSTER, CLUSTER_NAME

MAX_CACHED = 4096  # decisions per connection before its cache starts over (a client naming many topics)


class Authorizer:
    """Kafka's ACL decision for this processor's connections (a no-op when no authoriser is configured)."""

    def __init__(self, directory=None, enabled: bool = False, super_users: str = "",
                 allow_if_none: bool = False) -> None:
        """Off by default (what a handler driven without a processor gets: mmlog.testing.LocalHandlerContext)."""
        self.enabled = enabled
        self.super_users = frozenset(p.strip() for p in super_users.split(";") if p.strip())
        self.allow_if_none = allow_if_none
        self._file = acls.reader(directory) if enabled else None
        self.acls = acls.Acls()
        self.generation = 0

    @classmethod
    def from_config(cls, config, directory) -> "Authorizer":
        return cls(directory, bool(config["authorizer.class.name"]), config["super.users"],
                   config["allow.everyone.if.no.acl.found"])

    def refresh(self) -> None:
        """Take the ACL file's newest contents, if it changed (one stat)."""
        if self.enabled:
            self.acls = self._file.check()
            self.generation = self._file.generation

    def allowed(self, conn, operation: int, resource_type: int, name: str) -> bool:
        """May conn's principal do `operation` on the resource? (cached per connection)"""
        if not self.enabled:
            return True
        cache = conn.acl_cache
        if cache is not None and cache[0] == self.generation:
            decision = cache[1].get((operation, resource_type, name))
            if decision is not None:
                return decision
        return self._decide(conn, operation, resource_type, name)

    def _decide(self, conn, operation: int, resource_type: int, name: str) -> bool:
        """Kafka's decision, remembered in the connection's cache (started afresh if stale or full)."""
        cache = conn.acl_cache
        if cache is None or cache[0] != self.generation or len(cache[1]) >= MAX_CACHED:
            cache = conn.acl_cache = (self.generation, {})
        principal = conn.principal
        decision = cache[1][operation, resource_type, name] = principal in self.super_users or self.acls.allows(
            principal, _host(conn), operation, resource_type, name, self.allow_if_none)
        return decision

    def allowed_any(self, conn, operation: int, resource_type: int) -> bool:
        """May conn's principal do `operation` on some resource of the type? (Kafka's authorizeByResourceType)"""
        if not self.enabled or conn.principal in self.super_users:
            return True
        return self.acls.allows_any(conn.principal, _host(conn), operation, resource_type, self.allow_if_none)

    def cluster(self, conn, operation: int) -> bool:
        return self.allowed(conn, operation, CLUSTER, CLUSTER_NAME)

    def denied(self, conn, operation: int, resource_type: int, names) -> set:
        """The names among `names` the principal may not `operation` (empty when the authoriser is off)."""
        if not self.enabled:
            return set()
        return {n for n in names if not self.allowed(conn, operation, resource_type, n)}


def _host(conn) -> str:
    peer = conn.peer
    return peer[0] if isinstance(peer, tuple) and peer else ""

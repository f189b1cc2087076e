"""ACL bindings as Kafka defines them: the model, its wire codes, filters, the decision rule and the store file.

A binding is a resource pattern (resource type, name, pattern type) plus an access
control entry (principal, host, operation, permission), with Kafka's codes
(`ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType` in Kafka's
clients):

    resource type  1 ANY  2 Topic  3 Group  4 Cluster  5 TransactionalId  6 DelegationToken
    pattern type   1 ANY  2 MATCH  3 LITERAL  4 PREFIXED            (ANY/MATCH only in filters)
    operation      1 ANY  2 All  3 Read  4 Write  5 Create  6 Delete  7 Alter  8 Describe
                   9 ClusterAction  10 DescribeConfigs  11 AlterConfigs  12 IdempotentWrite
    permission     1 ANY  2 Deny  3 Allow

The decision (`Acls.allows`, Kafka's AclAuthorizer.authorize):

1. The ACLs that apply to a resource are the LITERAL ones on its name, the LITERAL
   ones on `*`, and the PREFIXED ones whose prefix starts its name.
2. None at all: allowed only with `allow.everyone.if.no.acl.found` (checked by the caller).
3. A DENY entry whose principal is the caller's (or `User:*`), whose host is the
   caller's address (or `*`) and whose operation is the one asked (or All) refuses.
4. Else an ALLOW entry matching the same way allows, where asking for Describe is
   also allowed by Read, Write, Delete or Alter, and DescribeConfigs by AlterConfigs.
5. Else refused. Deny beats allow, whatever the order or the pattern.

Standalone the store is `acls.json` in the first data directory (written through
store_file.py: processors re-read it when it changes); in cluster mode ZooKeeper
holds Kafka's nodes and every broker mirrors them into that file (cluster/
acls.py). The file is the list of bindings in Kafka's JSON names:

    {"version": 1, "acls": [{"resourceType": "Topic", "patternType": "LITERAL", "name": "a",
      "principal": "User:alice", "host": "*", "operation": "Write", "permissionType": "Allow"}]}
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from mmlog.security.store_file import WatchedFile, load_json, save_json

FILE_NAME = "acls.json"

# resource types
ANY = 1  # in every enum: the filter that matches all
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN = 2, 3, 4, 5, 6
RESOURCE_NAMES = {TOPIC: "Topic", GROUP: "Group", CLUSTER: "Cluster", TRANSACTIONAL_ID: "TransactionalId",
                  DELEGATION_TOKEN: "DelegationToken"}
CLUSTER_NAME = "kafka-cluster"  # the one name of the Cluster resource

# pattern types
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_NAMES = {LITERAL: "LITERAL", PREFIXED: "PREFIXED"}

# operations
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
OPERATION_NAMES = {ALL: "All", READ: "Read", WRITE: "Write", CREATE: "Create", DELETE: "Delete", ALTER: "Alter",
                   DESCRIBE: "Describe", CLUSTER_ACTION: "ClusterAction", DESCRIBE_CONFIGS: "DescribeConfigs",
                   ALTER_CONFIGS: "AlterConfigs", IDEMPOTENT_WRITE: "IdempotentWrite"}
# what else allows an operation (Kafka's implied operations)
IMPLIED_BY = {DESCRIBE: frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER, ALL}),
              DESCRIBE_CONFIGS: frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL})}

# permissions
DENY, ALLOW = 2, 3
PERMISSION_NAMES = {DENY: "Deny", ALLOW: "Allow"}

WILDCARD = "*"  # resource name, host; principal `User:*`
WILDCARD_PRINCIPAL = "User:*"


class InvalidAcl(ValueError):
    """A binding or filter Kafka would refuse (INVALID_REQUEST)."""


class Binding(NamedTuple):
    """One ACL: a resource pattern and an access control entry, in wire codes."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def check(self) -> "Binding":
        """The binding, or InvalidAcl with Kafka's reason."""
        if self.resource_type not in RESOURCE_NAMES:
            raise InvalidAcl(f"invalid resource type {self.resource_type}")
        if self.resource_type == DELEGATION_TOKEN:
            raise InvalidAcl("DelegationToken ACLs are not supported: this broker has no delegation tokens")
        if self.pattern_type not in PATTERN_NAMES:
            raise InvalidAcl(f"invalid pattern type {self.pattern_type} (LITERAL or PREFIXED)")
        if not self.name:
            raise InvalidAcl("resource name must not be empty")
        if self.resource_type == CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"the only valid name for the Cluster resource is {CLUSTER_NAME}")
        if self.operation not in OPERATION_NAMES:
            raise InvalidAcl(f"invalid operation {self.operation}")
        if self.permission not in PERMISSION_NAMES:
            raise InvalidAcl(f"invalid permission type {self.permission}")
        check_principal(self.principal)
        if not self.host:
            raise InvalidAcl("host must not be empty ('*' for any)")
        return self

    def to_json(self) -> dict:
        return {"resourceType": RESOURCE_NAMES[self.resource_type], "patternType": PATTERN_NAMES[self.pattern_type],
                "name": self.name, **entry_json(self)}

    @classmethod
    def from_json(cls, d: dict) -> "Binding":
        return entry_from_json(_code(RESOURCE_NAMES, d["resourceType"]), d["name"],
                               _code(PATTERN_NAMES, d["patternType"]), d)


def entry_json(b: Binding) -> dict:
    """The access control entry as Kafka writes it in a ZooKeeper ACL node."""
    return {"principal": b.principal, "permissionType": PERMISSION_NAMES[b.permission],
            "operation": OPERATION_NAMES[b.operation], "host": b.host}


def entry_from_json(resource_type: int, name: str, pattern_type: int, e: dict) -> Binding:
    return Binding(resource_type, name, pattern_type, e["principal"], e["host"],
                   _code(OPERATION_NAMES, e["operation"]), _code(PERMISSION_NAMES, e["permissionType"]))


def _code(names: dict, name: str) -> int:
    for code, n in names.items():
        if n.lower() == str(name).lower():
            return code
    raise InvalidAcl(f"unknown name {name!r}")


def check_principal(principal: str) -> None:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"principal {principal!r} is not of the form Type:name (User:alice)")


class Filter(NamedTuple):
    """A DescribeAcls / DeleteAcls filter: ANY (1) or a code per enum, None for any string."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def check(self) -> "Filter":
        if self.resource_type != ANY and self.resource_type not in RESOURCE_NAMES:
            raise InvalidAcl(f"invalid resource type filter {self.resource_type}")
        if self.pattern_type not in (ANY, MATCH, LITERAL, PREFIXED):
            raise InvalidAcl(f"invalid pattern type filter {self.pattern_type}")
        if self.operation != ANY and self.operation not in OPERATION_NAMES:
            raise InvalidAcl(f"invalid operation filter {self.operation}")
        if self.permission != ANY and self.permission not in PERMISSION_NAMES:
            raise InvalidAcl(f"invalid permission type filter {self.permission}")
        return self

    def matches(self, b: Binding) -> bool:
        """Kafka's AclBindingFilter.matches: MATCH takes the patterns that would apply to the named resource."""
        if self.resource_type != ANY and self.resource_type != b.resource_type:
            return False
        pattern = self.pattern_type
        if pattern not in (ANY, MATCH) and pattern != b.pattern_type:
            return False
        if self.name is not None:
            if pattern == MATCH:
                if b.pattern_type == LITERAL and b.name not in (self.name, WILDCARD):
                    return False
                if b.pattern_type == PREFIXED and not self.name.startswith(b.name):
                    return False
            elif b.name != self.name:
                return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == ANY or self.operation == b.operation)
                and (self.permission == ANY or self.permission == b.permission))


class Acls:
    """Every binding, indexed for decisions: per resource type, literal names to bindings and prefixes."""

    def __init__(self, bindings=()) -> None:
        self.bindings = frozenset(bindings)
        self._literal: dict[tuple[int, str], list[Binding]] = {}
        self._prefixed: dict[int, list[Binding]] = {}
        self.types: set[int] = set()
        for b in self.bindings:
            self.types.add(b.resource_type)
            if b.pattern_type == LITERAL:
                self._literal.setdefault((b.resource_type, b.name), []).append(b)
            else:
                self._prefixed.setdefault(b.resource_type, []).append(b)

    def applying(self, resource_type: int, name: str) -> list[Binding]:
        """The bindings that apply to one resource: literal on its name or `*`, prefixes of its name."""
        found = [*self._literal.get((resource_type, name), ()), *self._literal.get((resource_type, WILDCARD), ())]
        found += [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.name)]
        return found

    def allows(self, principal: str, host: str, operation: int, resource_type: int, name: str,
               allow_if_none: bool) -> bool:
        """Kafka's decision for one (principal, host) asking `operation` on one resource (module docstring)."""
        acls = self.applying(resource_type, name)
        if not acls:
            return allow_if_none
        implied = IMPLIED_BY.get(operation, (operation, ALL))
        allowed = False
        for b in acls:
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD):
                continue
            if b.permission == DENY:
                if b.operation in (operation, ALL):
                    return False
            elif b.operation in implied:
                allowed = True
        return allowed

    def allows_any(self, principal: str, host: str, operation: int, resource_type: int, allow_if_none: bool) -> bool:
        """Kafka's authorizeByResourceType (KIP-679): may the caller `operation` some resource of this type?
        True if an ALLOW binding of the type matches it and no DENY on the same pattern (or on `*`) takes it
        back; with no binding of the type at all, `allow_if_none`."""
        if resource_type not in self.types:
            return allow_if_none

        def mine(b: Binding) -> bool:
            return (b.resource_type == resource_type and b.principal in (principal, WILDCARD_PRINCIPAL)
                    and b.host in (host, WILDCARD) and b.operation in (operation, ALL))

        denied = {(b.pattern_type, b.name) for b in self.bindings if mine(b) and b.permission == DENY}
        if (LITERAL, WILDCARD) in denied:
            return False
        return any(mine(b) and b.permission == ALLOW and (b.pattern_type, b.name) not in denied
                   for b in self.bindings)


def path_in(directory) -> Path:
    return Path(directory) / FILE_NAME


def parse(doc: dict | None) -> Acls:
    return Acls(Binding.from_json(d) for d in (doc or {}).get("acls", ()))


def load(path) -> Acls:
    return parse(load_json(path))


def save(path, bindings) -> None:
    save_json(path, {"version": 1, "acls": sorted((b.to_json() for b in bindings),
                                                   key=lambda d: tuple(sorted(d.items())))})


def reader(directory) -> WatchedFile:
    """A process's view of the data dir's ACL file: `.check()` is the current `Acls`."""
    return WatchedFile(path_in(directory), parse)

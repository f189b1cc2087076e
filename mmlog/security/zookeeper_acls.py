"""ACLs in ZooKeeper, as Kafka's ZooKeeper-mode authoriser keeps them, mirrored into this broker's acls.json.

Nodes: one per resource pattern, holding that pattern's entries,

    /kafka-acl/<ResourceType>/<name>                     LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}

and a change notification per change, a sequential node that every broker watches:
`/kafka-acl-changes/acl_changes_<seq>` holding "Topic:name" for a literal pattern,
`/kafka-acl-extended-changes/acl_changes_<seq>` holding the pattern as JSON.

A change is a read-modify-write of one pattern's node with the version read
(create when absent, delete when emptied), retried when another broker changed it
in between, so concurrent CreateAcls through different brokers never lose an entry.
Then a notification is written; each broker's watch on the two change paths re-reads
every pattern node and replaces its acls.json (security/acls.py), which its
processors notice within CATALOGUE_CHECK_S. Notifications past the newest
KEEP_NOTIFICATIONS are deleted by the broker that writes one (Kafka purges by age).
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError, NotEmptyError
from kazoo.recipe.watchers import ChildrenWatch

from mmlog.security import acl_changes
from mmlog.errors import InvalidRequest
from mmlog.security import acls
from mmlog.security.acls import LITERAL, PREFIXED, RESOURCE_NAMES
from mmlog.system.compact_json import dump, load

log = logging.getLogger("mmlog.security")

KEEP_NOTIFICATIONS = 100

ACLS, ACLS_PREFIXED = "/kafka-acl", "/kafka-acl-extended/prefixed"  # Kafka's ACL nodes
ACL_CHANGES, ACL_EXTENDED_CHANGES = "/kafka-acl-changes", "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (ACLS, ACLS_PREFIXED, ACL_CHANGES, ACL_EXTENDED_CHANGES)



def _node(resource_type: int, name: str, pattern_type: int) -> str:
    base = ACLS if pattern_type == LITERAL else ACLS_PREFIXED
    return f"{base}/{RESOURCE_NAMES[resource_type]}/{name}"


class ZooKeeperAcls:
    """This broker's side of the ACL nodes: change them, and mirror them all when any changes."""

    def __init__(self, zk, directory, soon) -> None:
        self.zk = zk
        self.path = acls.path_in(directory)
        self._soon = soon  # runs a function on the control thread

    def start(self) -> None:
        """Mirror now, then on every change notification (kazoo's thread hands over to the control thread)."""
        self.mirror()
        for changes in (ACL_CHANGES, ACL_EXTENDED_CHANGES):
            ChildrenWatch(self.zk, changes, lambda _: self._soon(self.mirror))

    def read_all(self) -> set[acls.Binding]:
        found = set()
        for base, pattern in ((ACLS, LITERAL), (ACLS_PREFIXED, PREFIXED)):
            for code, type_name in RESOURCE_NAMES.items():
                for name in self._children(f"{base}/{type_name}"):
                    try:
                        doc = load(self.zk.get(f"{base}/{type_name}/{name}")[0])
                    except NoNodeError:
                        continue
                    found.update(acls.entry_from_json(code, name, pattern, e) for e in doc.get("acls", ()))
        return found

    def mirror(self) -> None:
        acls.save(self.path, self.read_all())

    def create(self, bindings) -> list[tuple[int, str | None]]:
        """Per binding (error code, message). A name with '/' would become a deeper node that no reader
        finds (Kafka's layout puts the name in the path): refused, not stored and lost."""
        by_pattern: dict[tuple, list] = {}
        results = []
        for b in bindings:
            if "/" in b.name:
                results.append((InvalidRequest.code, f"a resource name with '/' cannot be an ACL node: {b.name!r}"))
                continue
            by_pattern.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
            results.append((0, None))
        for pattern, new in by_pattern.items():
            self._update(pattern, lambda current, new=new: acl_changes.created(current, new))
        self.mirror()
        return results

    def delete(self, filters) -> list[list[acls.Binding]]:
        current = self.read_all()
        planned = acl_changes.deleted(set(current), filters, quiet=True)  # what each filter takes: the answer
        for pattern in {(b.resource_type, b.name, b.pattern_type) for gone in planned for b in gone}:
            self._update(pattern, lambda bindings: acl_changes.deleted(bindings, filters))
        self.mirror()
        return planned

    def _update(self, pattern: tuple, change) -> None:
        """Read one pattern's node, change its bindings, write it back with the version read (again if raced)."""
        resource_type, name, pattern_type = pattern
        path = _node(*pattern)
        while True:
            try:
                data, stat = self.zk.get(path)
                version = stat.version
                entries = load(data).get("acls", ())
            except NoNodeError:
                version, entries = None, ()
            bindings = {acls.entry_from_json(resource_type, name, pattern_type, e) for e in entries}
            change(bindings)
            doc = dump({"version": 1, "acls": sorted((acls.entry_json(b) for b in bindings),
                                                            key=lambda e: tuple(sorted(e.items())))})
            try:
                if version is None:
                    if not bindings:
                        return
                    self.zk.create(path, doc, makepath=True)
                elif bindings:
                    self.zk.set(path, doc, version=version)
                else:
                    self.zk.delete(path, version=version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue
        self._notify(resource_type, name, pattern_type)

    def _notify(self, resource_type: int, name: str, pattern_type: int) -> None:
        type_name = RESOURCE_NAMES[resource_type]
        if pattern_type == LITERAL:
            changes, data = ACL_CHANGES, f"{type_name}:{name}".encode()
        else:
            changes, data = ACL_EXTENDED_CHANGES, dump(
                {"version": 1, "resourceType": type_name, "name": name, "patternType": acls.PATTERN_NAMES[pattern_type]})
        self.zk.create(f"{changes}/{ACL_CHANGE_PREFIX}", data, sequence=True, makepath=True)
        for old in sorted(self._children(changes))[:-KEEP_NOTIFICATIONS]:
            try:
                self.zk.delete(f"{changes}/{old}")
            except NoNodeError:
                pass

    def _children(self, path: str) -> list[str]:
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []

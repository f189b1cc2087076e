"""ACL changes as both stores apply them: the embedded store's file and ZooKeeper's nodes.

`created` adds bindings to a set (creating one that exists changes nothing, as in
Kafka); `deleted` takes, per filter, the bindings it matches out of the set and
answers them, so a binding matched by two filters of one request is answered by
the first only.
"""

from __future__ import annotations

import logging

from mmlog.security.acls import Binding, Filter

log = logging.getLogger("mmlog.security")


def created(bindings: set, new) -> None:
    for b in new:
        if b not in bindings:
            bindings.add(b)
            log.info("ACL added: %s", _show(b))


def deleted(bindings: set, filters, quiet: bool = False) -> list[list[Binding]]:
    """Take what each filter matches out of `bindings`; per filter, what it took (`quiet`: a plan, not logged)."""
    results = []
    for flt in filters:
        gone = sorted(b for b in bindings if flt.matches(b))
        bindings.difference_update(gone)
        for b in gone if not quiet else ():
            log.info("ACL removed: %s", _show(b))
        results.append(gone)
    return results


def bindings_of(rows) -> list[Binding]:
    """Bindings from the control channel's tuples."""
    return [Binding(*r) for r in rows]


def filters_of(rows) -> list[Filter]:
    return [Filter(*r) for r in rows]


def _show(b: Binding) -> str:
    d = b.to_json()
    return (f"{d['permissionType']} {d['principal']} {d['operation']} from {d['host']} on "
            f"{d['resourceType']}:{d['patternType']}:{d['name']}")

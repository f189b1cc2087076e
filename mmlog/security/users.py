"""SCRAM credential changes, as both stores apply them (the embedded store's file, ZooKeeper's nodes).

`apply` takes the users' credentials (user -> {mechanism: credential string}, the form
of security/credentials.py and of ZooKeeper's /config/users/<name> `config`) and the
checked changes of one AlterUserScramCredentials request, and answers per user:
(0, None), or RESOURCE_NOT_FOUND for deleting a credential that does not exist.
"""

from __future__ import annotations

import logging

from mmlog.errors import ResourceNotFound
from mmlog.security import credentials

log = logging.getLogger("mmlog.security")


def apply(users: dict, deletions, upsertions) -> dict[str, tuple[int, str | None]]:
    results: dict[str, tuple[int, str | None]] = {}
    for name, mechanism in deletions:
        if credentials.delete(users, name, mechanism):
            results[name] = (0, None)
            log.info("SCRAM credential deleted: user %s, %s", name, mechanism)
        else:
            results[name] = (ResourceNotFound.code, f"attempt to delete a user credential that does not exist: "
                                                    f"{name} {mechanism}")
    for name, mechanism, text in upsertions:
        users.setdefault(name, {})[mechanism] = text
        results[name] = (0, None)
        log.info("SCRAM credential set: user %s, %s", name, mechanism)
    return results

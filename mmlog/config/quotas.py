"""Client quotas: the stored quota configs, their checks, and which one applies to a client (Kafka's rules).

A quota entity is a user, a client id, or a user and a client id, each either named or
`<default>` (every user / client id without a quota of its own). Quotas are stored per
entity under Kafka's ZooKeeper paths, which also serve as the keys of the standalone
catalogue's copy: `clients/<id>`, `users/<user>`, `users/<user>/clients/<id>` (names
percent-encoded, as Kafka's Sanitizer does), each holding `{key: value}` for the keys of
`KEYS`: producer_byte_rate and consumer_byte_rate (bytes a second, integers) and
request_percentage (percent of one processor's time, a float).

`resolve` finds a client's quota for one key as Kafka's DefaultQuotaCallback does, first
match wins: users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
users/<default>/clients/<c>, users/<default>/clients/<default>, users/<default>,
clients/<c>, clients/<default>. It also returns the sensor's name: clients sharing a
quota entity share one rate (a `<default>` level gives each user or client id its own,
a named level counts all its clients together), as Kafka's metric tags do. Without
authentication every connection's user is ANONYMOUS, as in Kafka; an authenticated
connection's user is its principal's name (processors/quotas.py passes it).
"""

from __future__ import annotations

from typing import Iterable
from urllib.parse import quote, unquote



class QuotaError(ValueError):
    """A request the quota rules refuse; the broker answers it INVALID_REQUEST with this message."""

DEFAULT = "<default>"
ANONYMOUS = "ANONYMOUS"  # the user of a PLAINTEXT connection
USER, CLIENT_ID = "user", "client-id"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
KEYS = {PRODUCE: int, FETCH: int, REQUEST: float}
EXACT, DEFAULT_MATCH, ANY = 0, 1, 2  # DescribeClientQuotas match types


def _name(name: str | None) -> str:
    return DEFAULT if name is None else quote(name, safe="")


def _unname(part: str) -> str | None:
    return None if part == DEFAULT else unquote(part)


def path(user: str | None | bool, client: str | None | bool) -> str:
    """An entity's path; a name, None for `<default>`, False where the entity has no such part."""
    if user is False:
        return f"clients/{_name(client)}"
    if client is False:
        return f"users/{_name(user)}"
    return f"users/{_name(user)}/clients/{_name(client)}"


def entity_of(entity_path: str) -> dict[str, str | None]:
    """{entity type: name or None (default)} of a path: the inverse of `path`."""
    parts = entity_path.split("/")
    if parts[0] == "clients":
        return {CLIENT_ID: _unname(parts[1])}
    out = {USER: _unname(parts[1])}
    if len(parts) == 4:
        out[CLIENT_ID] = _unname(parts[3])
    return out


def entity_path(entity: Iterable[tuple[str, str | None]]) -> str:
    """The path of a request's entity ((type, name or None) pairs), or QuotaError in Kafka's words."""
    found: dict[str, str | None] = {}
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID):
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise QuotaError(f"Empty {kind} not supported")
        if kind in found:
            raise QuotaError(f"Duplicate {kind} entity type")
        found[kind] = name
    if not found:
        raise QuotaError("Invalid empty client quota entity")
    return path(found.get(USER, False), found.get(CLIENT_ID, False))


def altered(current: dict[str, float], ops: Iterable[tuple[str, float, bool]]) -> dict[str, float]:
    """An entity's quotas after (key, value, remove) operations; QuotaError for a bad key or value."""
    out = dict(current)
    for key, value, remove in ops:
        if key not in KEYS:
            raise QuotaError(f"Invalid configuration key {key}")
        if remove:
            out.pop(key, None)
            continue
        if KEYS[key] is int:
            whole = int(value + 1e-6)
            if abs(whole - value) > 1e-6:
                raise QuotaError(f"Configuration {key} must be a LONG value")
            value = whole
        if not value > 0:
            raise QuotaError(f"Configuration {key} must be positive, not {value}")
        out[key] = value
    return out


def matches(entity: dict[str, str | None], filters: list[tuple[str, int, str | None]], strict: bool) -> bool:
    """DescribeClientQuotas: whether an entity passes the filter components (type, match type, name)."""
    for kind, how, name in filters:
        if kind not in entity:
            return False
        if how == EXACT and entity[kind] != name or how == DEFAULT_MATCH and entity[kind] is not None \
                or how == ANY and entity[kind] is None:
            return False
    wanted = {kind for kind, _, _ in filters}
    return not strict or set(entity) <= wanted


def check_filters(filters: list[tuple[str, int, str | None]]) -> None:
    """QuotaError for a filter Kafka refuses (an unknown or repeated entity type, a bad match type)."""
    seen = set()
    for kind, how, _ in filters:
        if kind == "":
            raise QuotaError("Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID):
            raise QuotaError(f"Custom entity type '{kind}' not supported")
        if kind in seen:
            raise QuotaError(f"Duplicate {kind} filter component entity type")
        if how not in (EXACT, DEFAULT_MATCH, ANY):
            raise QuotaError(f"Unknown match type {how}")
        seen.add(kind)


def resolve(quotas: dict[str, dict[str, float]], user: str, client: str, key: str) -> tuple[float, str] | None:
    """(limit, sensor name) of the quota `key` that applies to (user, client id), or None: no quota."""
    u, c = _name(user), _name(client)
    d = DEFAULT
    for where, sensor in ((f"users/{u}/clients/{c}", (u, c)), (f"users/{u}/clients/{d}", (u, c)),
                          (f"users/{u}", (u, "")), (f"users/{d}/clients/{c}", (u, c)),
                          (f"users/{d}/clients/{d}", (u, c)), (f"users/{d}", (u, "")),
                          (f"clients/{c}", ("", c)), (f"clients/{d}", ("", c))):
        limit = quotas.get(where, {}).get(key)
        if limit is not None:
            return float(limit), f"{key}:{sensor[0]}:{sensor[1]}"
    return None

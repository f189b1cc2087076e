"""The Messages page's API: a partition's records from an offset, a timestamp, the start or the end, oldest
or newest first, filtered on key or value, shown as text, JSON, hex or decoded by the schema registry
(decoding.py); and producing a record from a form.

Records are read by the session's own consumer (no group: it assigns the partition and seeks), so Read
on the topic is what the broker asks; producing needs Write. Reading stops at the last stable offset (the
consumer reads committed data). A filter scans at most SCAN_MAX records per request, so a search over a
long partition answers in bounded time and says where it stopped (`next`)."""

from __future__ import annotations

import time

from mmlog.console import lookups
from mmlog.console.decoding import FORMATS, show
from mmlog.console.errors import ConsoleError
from mmlog.console.paging import number
from mmlog.console.router import Routes
from mmlog.errors import LeaderNotAvailable, error_for_code

routes = Routes()
MAX_LIMIT = 500
SCAN_MAX = 10_000  # records a filtered request reads at most
READ_S = 5.0  # how long one request may spend reading


@routes.get("/messages/{topic}")
def browse(call):
    topic, q = call.params["topic"], call.query
    partition = number(q, "partition", 0, 0)
    limit = number(q, "limit", 50, 1, MAX_LIMIT)
    newest = q.get("order", "newest") != "oldest"
    key_fmt, value_fmt = q.get("key_format", "text"), q.get("value_format", "text")
    if key_fmt not in FORMATS or value_fmt not in FORMATS:
        raise ConsoleError(400, "INVALID_REQUEST", f"formats: {', '.join(FORMATS)}")
    needle = q.get("filter", "").lower()
    session = call.session
    start, end = _bounds(session.admin(), topic, partition)
    at = _start(session.admin(), topic, partition, q, start, end, newest)
    records, scanned, resume = _read(session.consumer(), topic, partition, at, start, end, limit, newest, needle)
    registry = session.registry() if "registry" in (key_fmt, value_fmt) else None
    return {"topic": topic, "partition": partition, "log_start": start, "end": end, "scanned": scanned,
            "next": resume, "records": [_record(r, key_fmt, value_fmt, registry) for r in records]}


def _bounds(admin, topic: str, partition: int) -> tuple[int, int]:
    admin.cluster.refresh([topic], allow_auto_create=False)
    info = admin.cluster.topics.get(topic)
    if info is None or info.error:
        raise error_for_code(info.error if info else 3, topic)
    if partition >= info.partitions:
        raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"{topic} has {info.partitions} partitions")
    key = (topic, partition)
    start = lookups.offsets(admin, [key], lookups.EARLIEST).get(key)
    end = lookups.offsets(admin, [key], lookups.LATEST, read_committed=True).get(key)
    if start is None or end is None:
        raise LeaderNotAvailable(f"{topic}-{partition} has no leader that answers")
    return start, end


def _start(admin, topic, partition, q, start: int, end: int, newest: bool) -> int:
    """Where reading starts: oldest first, the first offset read; newest first, one past the last."""
    where = q.get("from", "end" if newest else "start")
    if where == "offset":
        offset = number(q, "offset", start, 0)
        return min(offset + 1, end) if newest else max(offset, start)
    if where == "timestamp":
        key = (topic, partition)
        found = lookups.offsets(admin, [key], number(q, "timestamp", 0, 0)).get(key, -1)
        return end if found < 0 else found
    if where == "start":
        return start
    if where == "end":
        return end
    raise ConsoleError(400, "INVALID_REQUEST", "from: start, end, offset or timestamp")


def _read(consumer, topic, partition, at, start, end, limit, newest, needle):
    """(records in the order shown, records scanned, where a next request would go on: None at the end)."""
    kept, scanned = [], 0
    deadline = time.monotonic() + READ_S
    window = limit if not needle else max(limit, 500)
    lo, hi = (max(start, at - window), at) if newest else (at, min(end, at + window))
    while lo < hi and len(kept) < limit and scanned < SCAN_MAX and time.monotonic() < deadline:
        chunk = _range(consumer, topic, partition, lo, hi, deadline)
        scanned += len(chunk)
        matching = [r for r in chunk if not needle or _matches(r, needle)]
        if newest:
            kept += reversed(matching)
            lo, hi = max(start, lo - window), lo
        else:
            kept += matching
            lo, hi = hi, min(end, hi + window)
        if not chunk:
            break
    kept = kept[:limit]
    if newest:
        resume = kept[-1].offset - 1 if len(kept) == limit else (lo if lo < hi else None)
        return kept, scanned, resume if resume is None or resume >= start else None
    resume = kept[-1].offset + 1 if len(kept) == limit else (lo if lo < hi else None)
    return kept, scanned, resume if resume is None or resume < end else None


def _range(consumer, topic: str, partition: int, lo: int, hi: int, deadline: float) -> list:
    """The records of offsets [lo, hi) (fewer when time runs out; compacted or aborted offsets have none)."""
    tp = (topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, lo)
    got = []
    while time.monotonic() < deadline:
        records = consumer.poll(timeout=min(0.5, max(0.0, deadline - time.monotonic())))
        got += [r for r in records if lo <= r.offset < hi]
        if (records and records[-1].offset >= hi - 1) \
                or consumer.position(tp, timeout=max(0.1, deadline - time.monotonic())) >= hi:
            break
    return got


def _matches(record, needle: str) -> bool:
    return any(needle in bytes(part).decode("utf-8", "replace").lower()
               for part in (record.key, record.value) if part is not None)


def _record(r, key_fmt: str, value_fmt: str, registry) -> dict:
    return {"partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
            "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": show(r.key, key_fmt, registry), "value": show(r.value, value_fmt, registry),
            "headers": [{"key": k, "value": show(v, "text")} for k, v in r.headers]}


@routes.post("/messages/{topic}")
def produce(call):
    """Produce one record: `value`, `key` (strings or null), `headers` ([[key, value], ...]), `partition`."""
    body = call.body
    partition = body.get("partition")
    if partition is not None and (not isinstance(partition, int) or partition < 0):
        raise ConsoleError(400, "INVALID_REQUEST", "partition: an integer >= 0, or none")
    headers = body.get("headers") or []
    if not isinstance(headers, list) or any(not isinstance(h, list) or len(h) != 2 for h in headers):
        raise ConsoleError(400, "INVALID_REQUEST", "headers: [[key, value], ...]")
    key, value = body.get("key"), body.get("value")
    if any(v is not None and not isinstance(v, str) for v in (key, value)):
        raise ConsoleError(400, "INVALID_REQUEST", "key and value: strings or null")
    future = call.session.producer().send(
        call.params["topic"], value=None if value is None else value.encode(),
        key=None if key is None else key.encode(), partition=partition,
        headers=[(str(k), None if v is None else str(v).encode()) for k, v in headers] or None)
    done = future.get(timeout=30)
    return {"topic": done.topic, "partition": done.partition, "offset": done.offset}

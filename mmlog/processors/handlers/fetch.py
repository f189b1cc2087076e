"""Fetch (1): file slices of every requested partition, long-polled until min_bytes.

Every requested partition is answered, in request order, even when empty
(kafka-python rejects a sessionless response whose partitions differ from the
request). Each partition's records are a `FileSlice` that the codec leaves as a
placeholder and the connection sends with os.sendfile. The first batch of the
first partition with data is always whole (KIP-74); after that, partitions stop
at partition_max_bytes and the response at max_bytes, possibly mid-batch, which
clients accept. Preferred read replica -1 (any other value makes librdkafka skip
the records).

Isolation (Kafka's FetchIsolation). isolation_level 0 (read_uncommitted) reads up
to the high watermark; 1 (read_committed) up to the last stable offset (LSO: the
first offset of a transaction not yet decided and replicated, `state.py`), and
gets with its records the aborted transactions that overlap them (producer id,
first offset; from the transaction indexes, `Partition.aborted_transactions`) so
that it drops their records. Either way the bytes are the same file slice, only
its end moves; last_stable_offset is reported truthfully to both. A read_uncommitted
consumer, as in Kafka, gets a null aborted_transactions.

With less than min_bytes available the request parks in the purgatory until an
append anywhere on the broker wakes it or max_wait_ms passes. A transaction marker
is such an append (WriteTxnMarkers wakes the purgatory), so a read_committed fetch
waiting at the LSO sees the transaction's records as soon as it is decided.

Replication: a fetch with replica_id >= 0 is a follower's. It reads up to the log
end (consumers stop at the high watermark), and its fetch offset is the follower's
log end: recorded as its progress (first read of the request only), which may
move the HW, and then parked acks=all produces are woken; so is its log start
offset, which parked DeleteRecords requests wait for (`Partition.follower_fetched`, one look
at the state for all three). A parked follower fetch that the purgatory wakes (each HW move
wakes it) is first checked with a few slot loads (`_follower_waits`): only new records, or a
new role or epoch, make it read again. Only the leader
answers; a follower or a replica without a role answers NOT_LEADER_OR_FOLLOWER
to consumers and followers alike. A current_leader_epoch older than ours is
FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (-1 skips the check).

Authorisation (with an authoriser): a consumer needs READ on each topic, a follower
CLUSTER_ACTION on the cluster; refused partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import time

from mmlog.errors import OffsetOutOfRange, TopicAuthorizationFailed
from mmlog.processors.handlers._common import check_leader, error_code
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import fetch as schema
from mmlog.security.acls import CLUSTER_ACTION, READ, TOPIC
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
READ_COMMITTED = 1
WITH_FILES = True  # responses carry FileSlices: encode as parts, send with sendfile


def handle(ctx: HandlerContext, request):
    body = request.body
    response, available, failed = read(ctx, body, record=True, cap=_cap(ctx, request), denied=_denied(ctx, request))
    if available >= body.min_bytes or body.max_wait_ms <= 0 or failed:
        _respond(ctx, request, response, available)
        return DEFERRED  # answered already
    deadline = time.monotonic() + body.max_wait_ms / 1000
    ctx.purgatory.park(request, deadline, lambda: _retry(ctx, request), lambda: _respond_now(ctx, request))
    return DEFERRED


def _retry(ctx: HandlerContext, request) -> bool:
    """Called when woken: answer if min_bytes are now there (True), else stay parked."""
    if request.body.replica_id >= 0 and _follower_waits(ctx, request.body):
        return False
    response, available, failed = read(ctx, request.body, cap=_cap(ctx, request), denied=_denied(ctx, request))
    if available >= request.body.min_bytes or failed:
        _respond(ctx, request, response, available)
        return True
    return False


def _follower_waits(ctx: HandlerContext, body) -> bool:
    """Whether a parked follower fetch would only park again: every partition still ends at its fetch
    offset and is led here in the epoch it asked for (three slot loads each, no read). A woken follower
    fetch is checked so, since each HW move wakes the purgatory; anything else (new records, a
    truncation, a new role or epoch, a deleted partition, an offline log dir) reads it again."""
    for topic in body.topics:
        for part in topic.partitions:
            try:
                state = ctx.manager.partition(topic.topic, part.partition).state
            except Exception:  # noqa: BLE001 - read() answers it with its error
                return False
            if (state.log_end() != part.fetch_offset or not state.serves_clients() or state.get("deleted")
                    or part.current_leader_epoch >= 0 and state.leader_epoch() != part.current_leader_epoch):
                return False
    return True


def _respond_now(ctx: HandlerContext, request) -> None:
    """max_wait_ms passed: answer with whatever there is."""
    response, available, _ = read(ctx, request.body, cap=_cap(ctx, request), denied=_denied(ctx, request))
    _respond(ctx, request, response, available)


def _denied(ctx: HandlerContext, request) -> set[str]:
    """Topics this fetch may not read (Kafka's handleFetchRequest): a follower's fetch needs CLUSTER_ACTION
    on the cluster, else every topic is refused; a consumer's needs READ on each topic."""
    authorizer = ctx.authorizer
    if not authorizer.enabled:
        return _NOTHING
    names = {t.topic for t in request.body.topics}
    if request.body.replica_id >= 0:
        return set() if authorizer.cluster(request.conn, CLUSTER_ACTION) else names
    return authorizer.denied(request.conn, READ, TOPIC, names)


_NOTHING: set[str] = set()


def _cap(ctx: HandlerContext, request) -> int | None:
    """A consumer quota's bound on the response's bytes (processors/quotas.py), or None."""
    if request.body.replica_id >= 0 or not ctx.quotas.enabled:
        return None
    return ctx.quotas.fetch_cap(request.conn, request.header.client_id)


def _respond(ctx: HandlerContext, request, response, available: int) -> None:
    """Answer, unless a consumer quota throttles the client: then the answer carries no records, only
    the throttle time, and the connection is muted for it (Kafka's handleFetchRequest)."""
    throttle = 0
    if request.body.replica_id < 0 and ctx.quotas.enabled:
        client_id = request.header.client_id
        throttle = max(ctx.quotas.fetched(request.conn, client_id, available),
                       ctx.quotas.request_throttle(request.conn, client_id))
        if throttle:
            response.throttle_time_ms = throttle
            for topic in response.responses:
                for entry in topic["partitions"]:
                    entry.update(records=b"", aborted_transactions=None if entry["aborted_transactions"] is None
                                 else [])
            available = 0
    ctx.metrics.fetched(available, request.body.replica_id >= 0)
    request.respond(response, with_files=True)
    if throttle:
        ctx.throttle(request.conn, throttle)


def read(ctx: HandlerContext, body, record: bool = False, cap: int | None = None,
         denied=_NOTHING) -> tuple[object, int, bool]:
    """Read every requested partition; return (response, bytes available, any error).

    `record`: a follower's fetch offsets are its progress (the first read of a request); `cap`:
    at most this many bytes in all (a consumer quota's); `denied`: topics answered
    TOPIC_AUTHORIZATION_FAILED unread (the authoriser's)."""
    remaining = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
    if cap is not None:
        remaining = min(remaining, cap)
    follower = body.replica_id if body.replica_id >= 0 else None
    throttle = ctx.leader_throttle if follower is not None and ctx.leader_throttle.active else None
    committed = follower is None and body.isolation_level == READ_COMMITTED
    first_with_data = True
    available = 0
    failed = hw_moved = False
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            entry = _empty(part.partition)
            log = None
            try:
                if denied and topic.topic in denied:
                    raise TopicAuthorizationFailed(f"not authorized to read topic {topic.topic!r}")
                log = ctx.manager.partition(topic.topic, part.partition)
                check_leader(log, part.current_leader_epoch)
                if follower is not None and record:
                    # its log end may move the HW (parked acks=all produces wait for it), its log start
                    # the low watermark (parked DeleteRecords wait for every live replica's)
                    hw_moved |= log.follower_fetched(follower, part.fetch_offset, part.log_start_offset)
                limit = min(part.partition_max_bytes, remaining)
                throttled = throttle is not None and throttle.applies(log, part.partition, follower)
                if throttled:  # leader.replication.throttled.replicas (replication/leader_throttle.py)
                    limit = throttle.max_bytes(limit)
                result = log.read(part.fetch_offset, max(limit, 0), upto_log_end=follower is not None,
                                  committed=committed)
                records = result.slice
                if records.size and (records.size > limit and not first_with_data or remaining <= 0):
                    records = None  # only the first partition with data may exceed its limit
                if throttled and records is not None and records.size:
                    if throttle.exceeded():
                        records = None  # over the rate: no records this time
                    else:
                        throttle.record(records.size)
                entry.update(
                    high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
                    log_start_offset=result.log_start_offset,
                )
                if committed:
                    entry["aborted_transactions"] = []
                if records is not None and records.size:
                    if committed and part.fetch_offset <= result.last_abort:
                        entry["aborted_transactions"] = [
                            {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                            for txn in log.aborted_transactions(part.fetch_offset, result.upper_bound)]
                    entry["records"] = records
                    remaining -= records.size
                    available += records.size
                    first_with_data = False
            except Exception as exc:  # noqa: BLE001 - each partition answers for itself
                entry["error_code"] = error_code(exc)
                ctx.metrics.error(API_KEY, entry["error_code"])
                if follower is not None and log is not None and isinstance(exc, OffsetOutOfRange):
                    # a follower ahead of us or behind our log start decides from these where to go
                    entry.update(high_watermark=log.high_watermark, log_start_offset=log.log_start_offset,
                                 last_stable_offset=log.log_end_offset)
                failed = True
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    if hw_moved:
        ctx.appended()  # acks=all produces (and DeleteRecords) parked here and elsewhere check again
    response = schema.RESPONSE(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    return response, available, failed


def _empty(partition: int) -> dict:
    return {
        "partition_index": partition, "error_code": 0, "high_watermark": -1, "last_stable_offset": -1,
        "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b"",
    }

"""WriteTxnMarkers (27): a transaction coordinator ends a transaction on the partitions this broker leads.

For each marker (producer id, epoch, commit or abort, coordinator epoch) and each named
partition, the leader appends a transaction marker, a control batch
(`records.build_end_txn_marker`), through `Partition.append_marker`, which checks it
against the producer state: an epoch older than the producer's is
INVALID_PRODUCER_EPOCH, a coordinator epoch older than the last marker's
TRANSACTION_COORDINATOR_FENCED. A marker for a producer with no open transaction on the
partition is appended all the same (Kafka does: it ends nothing).

Markers are written as Kafka writes them, with acks=all: NOT_ENOUGH_REPLICAS when the
ISR is below min.insync.replicas (nothing appended), and the answer waits until the
high watermark has passed every marker, parked in the purgatory by the Produce path's
`AwaitingReplicas` / `respond_in_order` (NOT_LEADER_OR_FOLLOWER if leadership moves
meanwhile, REQUEST_TIMED_OUT after MARKER_TIMEOUT_MS, Kafka's request.timeout.ms).
Other errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.

A topic entry named `__consumer_offsets/<group>` (mmlog's own: a group here has no
offsets partition, and a `/` cannot be in a topic name) is the marker for the
offsets the transaction committed for that group: it goes to the group coordinator
(control op `txn_offsets_end`), which makes them committed or drops them;
NOT_COORDINATOR if the group is not coordinated here, so the transaction
coordinator looks again. Those are done first, then the partitions'.

The answer lists the markers in request order, each with its topics and partitions in
request order.
"""

from __future__ import annotations

import time

from mmlog.errors import UnknownTopicOrPartition
from mmlog.processors.handlers import produce
from mmlog.ipc.control_channel import DEFAULT_TIMEOUT_S
from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import write_txn_markers as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_OFFSETS_END

API_KEY = schema.API_KEY
MARKER_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms, which bounds its marker appends
GROUP_OFFSETS_TOPIC = "__consumer_offsets"
GROUP_PREFIX = GROUP_OFFSETS_TOPIC + "/"


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.CLUSTER_ACTION):  # an inter-broker API
        return _response(request.header, [(m.producer_id, [(t.name, [(p, ClusterAuthorizationFailed.code)
                                                                     for p in t.partition_indexes])
                                                           for t in m.topics]) for m in request.body.markers])
    """Group entries through the control plane first, then every partition's marker."""
    groups = [(m.producer_id, m.producer_epoch, m.transaction_result, t.name) for m in request.body.markers
              for t in m.topics if t.name.startswith(GROUP_PREFIX)]
    if not groups:
        return _partitions(ctx, request, {})
    codes: dict[tuple[int, str], int] = {}

    def ended(key, ok, value) -> None:
        codes[key] = value["error_code"] if ok else COORDINATOR_NOT_AVAILABLE
        if len(codes) == len(groups):
            _partitions(ctx, request, codes)

    for pid, epoch, commit, name in groups:
        # A failure to handle the answer closes the connection: the coordinator sends the markers again.
        ctx.control.call(TXN_OFFSETS_END, {"group_id": name[len(GROUP_PREFIX):], "producer_id": pid,
                                             "producer_epoch": epoch, "commit": commit},
                         lambda ok, value, key=(pid, name): ended(key, ok, value), DEFAULT_TIMEOUT_S, request.fail)
    return DEFERRED


def _partitions(ctx: HandlerContext, request, group_codes: dict):
    answer, waits = append_markers(ctx, request.body, group_codes)
    awaiting = produce.AwaitingReplicas(ctx.manager, request.header, answer, waits,
                                        time.monotonic() + MARKER_TIMEOUT_MS / 1000, build=_response)
    produce.respond_in_order(ctx, request.conn, [(request.header, awaiting)],
                             lambda header, result: request.respond(result))
    return DEFERRED


def append_markers(ctx: HandlerContext, body, group_codes: dict | None = None) -> tuple[list, list]:
    """Append every marker; return (answer, waits) as AwaitingReplicas keeps them: answer is
    [(producer id, [(topic, results)])], each result (partition, error code, base offset, -1, message).
    Group entries take their codes from group_codes ((producer id, entry name) -> error code)."""
    answer, waits = [], []
    appended = False
    for marker in body.markers:
        topics = []
        for topic in marker.topics:
            results = []
            if topic.name.startswith(GROUP_PREFIX):
                code = (group_codes or {}).get((marker.producer_id, topic.name), COORDINATOR_NOT_AVAILABLE)
                topics.append((topic.name, [(index, code, -1, -1, None) for index in topic.partition_indexes]))
                continue
            for index in topic.partition_indexes:
                slot = len(results)
                results.append(None)
                try:
                    if topic.name == GROUP_OFFSETS_TOPIC:
                        raise UnknownTopicOrPartition("markers for the offsets topic go to the group coordinator")
                    log = ctx.manager.partition(topic.name, index)
                    produce.check_enough_replicas(log)
                    info = log.append_marker(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                             marker.coordinator_epoch)
                except Exception as exc:  # noqa: BLE001 - each partition answers for itself
                    results[slot] = produce.result_error(index, exc)
                    continue
                appended = True
                results[slot] = (index, 0, info.base_offset, -1, None)
                if log.high_watermark <= info.last_offset:
                    waits.append((results, slot, (topic.name, index), info.last_offset + 1))
            topics.append((topic.name, results))
        answer.append((marker.producer_id, topics))
    if appended:
        ctx.appended()  # read_committed fetches parked anywhere re-check the last stable offset
    return answer, waits


def _response(header, answer):
    return schema.RESPONSE(markers=[
        {"producer_id": pid, "topics": [
            {"name": name, "partitions": [{"partition_index": r[0], "error_code": r[1]} for r in results]}
            for name, results in topics]}
        for pid, topics in answer])

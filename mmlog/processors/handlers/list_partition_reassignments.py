"""ListPartitionReassignments (46): forwarded to the control plane; the controller lists the moves in
progress (others answer NOT_CONTROLLER)."""

from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import list_partition_reassignments as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import LIST_REASSIGNMENTS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.DESCRIBE):
        return schema.RESPONSE(throttle_time_ms=0, error_code=ClusterAuthorizationFailed.code,
                               error_message="not authorized to list reassignments", topics=[])
    topics = request.body.topics
    keys = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]

    def respond(answer):
        (code, message), ongoing = answer
        by_topic: dict[str, list] = {}
        for topic, p, replicas, adding, removing in ongoing:
            by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas,
                                                   "adding_replicas": adding, "removing_replicas": removing})
        return schema.RESPONSE(throttle_time_ms=0, error_code=code, error_message=message, topics=[
            {"name": t, "partitions": ps} for t, ps in by_topic.items()])

    return forward(ctx, request, LIST_REASSIGNMENTS, {"partitions": keys}, respond,
                   lambda code: ((code, failure_message(code)), []))

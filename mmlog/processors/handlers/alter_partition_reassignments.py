"""AlterPartitionReassignments (45): forwarded to the control plane; the controller starts or cancels
each partition's move (others answer NOT_CONTROLLER)."""

from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import alter_partition_reassignments as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import ALTER_REASSIGNMENTS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.ALTER):
        return schema.RESPONSE(throttle_time_ms=0, error_code=ClusterAuthorizationFailed.code,
                               error_message="not authorized to reassign partitions", responses=[])
    asked = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
             for t in request.body.topics for p in t.partitions]

    def respond(answer):
        (code, message), results = answer
        by_topic: dict[str, list] = {}
        for topic, p, pcode, pmessage in results:
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": pcode,
                                                   "error_message": pmessage})
        return schema.RESPONSE(throttle_time_ms=0, error_code=code, error_message=message, responses=[
            {"name": t, "partitions": ps} for t, ps in by_topic.items()])

    return forward(ctx, request, ALTER_REASSIGNMENTS, {"partitions": asked}, respond,
                   lambda code: ((code, failure_message(code)), []), timeout_ms=request.body.timeout_ms)

"""ElectLeaders (43): forwarded to the control plane; the controller decides (others: NOT_CONTROLLER)."""

from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import elect_leaders as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import ELECT_LEADERS

API_KEY = schema.API_KEY
ELECTION_TYPES = (0, 1)  # preferred, unclean
INVALID_REQUEST = 42


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.ALTER):
        return schema.RESPONSE(throttle_time_ms=0, error_code=ClusterAuthorizationFailed.code,
                               replica_election_results=[])
    body = request.body
    keys = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    election_type = body.election_type if request.version >= 1 else 0

    def respond(results):
        by_topic: dict[str, list] = {}
        for topic, p, code, message in results:
            by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
        return schema.RESPONSE(throttle_time_ms=0, error_code=0, replica_election_results=[
            {"topic": t, "partition_result": ps} for t, ps in by_topic.items()])

    if election_type not in ELECTION_TYPES:
        return respond([(t, p, INVALID_REQUEST, f"unknown election type {election_type}") for t, p in keys or ()])
    return forward(ctx, request, ELECT_LEADERS, {"election_type": election_type, "partitions": keys}, respond,
                   lambda code: [(t, p, code, failure_message(code)) for t, p in keys or ()],
                   timeout_ms=request.body.timeout_ms)

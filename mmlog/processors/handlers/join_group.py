"""JoinGroup (11): forwarded to the group coordinator; answered when the rebalance completes.

v0 has no rebalance timeout: the session timeout serves as one (as in Kafka). v4+
clients understand MEMBER_ID_REQUIRED, so the coordinator asks them to rejoin with
the member id it hands out (KIP-394). v7+ answers the group's protocol type, and a
refused join a null protocol name (Kafka's; older versions get "").
"""

from mmlog.processors.handlers._common import client_host, forward
from mmlog.protocol.messages import join_group as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import JOIN_GROUP

API_KEY = schema.API_KEY
JOIN_MARGIN_MS = 10_000
NULL_PROTOCOL_SINCE = 7


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.allowed(request.conn, acls.READ, acls.GROUP, request.body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code, generation_id=-1,
                               protocol_name="", leader="", member_id=request.body.member_id, members=[])
    body, version = request.body, request.version
    args = {
        "group_id": body.group_id,
        "member_id": body.member_id,
        "group_instance_id": body.group_instance_id if version >= 5 else None,
        "session_timeout_ms": body.session_timeout_ms,
        "rebalance_timeout_ms": body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
        "protocol_type": body.protocol_type,
        "protocols": [(p.name, bytes(p.metadata)) for p in body.protocols],
        "client_id": request.header.client_id or "",
        "client_host": client_host(request),
        "require_known_member_id": version >= 4,
    }

    def respond(value):
        if version >= NULL_PROTOCOL_SINCE and value["error_code"]:
            value = dict(value, protocol_type=None, protocol_name=None)
        return schema.RESPONSE(throttle_time_ms=0, **value)

    # The coordinator may hold a JoinGroup for the group's rebalance (its members' longest rebalance timeout,
    # after the initial delay); a client gives up on it after its own, plus a few seconds.
    wait_ms = args["rebalance_timeout_ms"] + ctx.config["group.initial.rebalance.delay.ms"] + JOIN_MARGIN_MS
    return forward(ctx, request, JOIN_GROUP, args, respond,
                   lambda code: {"error_code": code, "generation_id": -1, "protocol_name": "",
                                 "leader": "", "member_id": body.member_id, "members": []}, wait_ms=wait_ms)

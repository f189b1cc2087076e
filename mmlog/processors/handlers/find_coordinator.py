"""FindCoordinator (10): the live broker that coordinates a group or a transactional id.

Answered in the processor from the cluster view (`ipc/cluster_view.py`), with the
same node id, host and port as Metadata (librdkafka opens a separate connection to
the coordinator, so they must match):

- a group's coordinator by rendezvous hashing over live brokers (standalone: this broker);
- a transactional id's coordinator is the leader of its `__transaction_state`
  partition. The first lookup makes that topic (through the control plane, as
  Kafka does); until it exists and has a leader the answer is
  COORDINATOR_NOT_AVAILABLE, and the client asks again.
"""

from mmlog.errors import InvalidRequest, UnknownTopicOrPartition
from mmlog.ipc.cluster_view import TRANSACTION_STATE
from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import find_coordinator as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed, TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_FIND_COORDINATOR

API_KEY = schema.API_KEY
GROUP, TRANSACTION = 0, 1


def handle(ctx: HandlerContext, request):
    key_type, key = request.body.key_type, request.body.key
    authorizer = ctx.authorizer
    if key_type == GROUP and not authorizer.allowed(request.conn, acls.DESCRIBE, acls.GROUP, key):
        return _refuse(GroupAuthorizationFailed.code, f"not authorized to describe group {key!r}")
    if key_type == TRANSACTION and not authorizer.allowed(request.conn, acls.DESCRIBE, acls.TRANSACTIONAL_ID, key):
        return _refuse(TransactionalIdAuthorizationFailed.code, f"not authorized for transactional id {key!r}")
    if key_type == GROUP:
        return _answer(ctx, ctx.views.current().coordinator_for(key), "no live broker", request)
    if key_type != TRANSACTION:
        return _refuse(InvalidRequest.code, f"unknown key type {key_type}")
    if not key:
        return _refuse(InvalidRequest.code, "empty transactional id")
    if _state_topic(ctx) is not None:
        return _transaction(ctx, key, request)
    forward(ctx, request, TXN_FIND_COORDINATOR, None,
            lambda value: _transaction(ctx, key, request) if value["error_code"] == 0 else _refuse(
                value["error_code"], value.get("error_message") or f"{TRANSACTION_STATE} is being created"),
            lambda code: {"error_code": code})
    return DEFERRED


def _state_topic(ctx: HandlerContext):
    """`__transaction_state`'s catalogue entry (re-read once if this process has not seen it yet)."""
    try:
        return ctx.manager.topic(TRANSACTION_STATE)
    except UnknownTopicOrPartition:
        return None


def _transaction(ctx: HandlerContext, key: str, request):
    info = _state_topic(ctx)
    if info is None:
        return _refuse(COORDINATOR_NOT_AVAILABLE, f"{TRANSACTION_STATE} is being created")
    node = ctx.views.current().transaction_coordinator(key, info.partitions, ctx.broker_id)
    return _answer(ctx, node, f"{TRANSACTION_STATE} has no leader for this transactional id", request)


def _answer(ctx: HandlerContext, node: int, why: str, request):
    """The coordinator's endpoint on the listener the request came in on."""
    b = ctx.views.current().brokers.get(node)
    if b is None:
        return _refuse(COORDINATOR_NOT_AVAILABLE, why)
    host, port = b.address(request.conn.listener_name)
    return schema.RESPONSE(throttle_time_ms=0, error_code=0, error_message=None, node_id=b.node_id, host=host,
                           port=port)


def _refuse(code: int, message: str):
    return schema.RESPONSE(throttle_time_ms=0, error_code=code, error_message=message, node_id=-1, host="", port=-1)

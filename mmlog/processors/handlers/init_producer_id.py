"""InitProducerId (22): a producer id and epoch, for idempotent and transactional producers.

Without a transactional id the id comes from the control plane's block of ids
(unique across processors, brokers and restarts), epoch 0. With one, the
transaction coordinator answers (`transactions/`): the same producer id
at the next epoch, which fences the previous producer of that transactional id.

v3+ may name the producer id and epoch the producer has (KIP-360: bump the epoch instead of
losing the id). Both or neither must be -1 (INVALID_REQUEST otherwise, as in Kafka). Without
a transactional id Kafka hands out a new id regardless, and so does mmlog; with one, an id or
epoch that is not the transactional id's current one is fenced (PRODUCER_FENCED).
"""

from mmlog.errors import InvalidRequest, KafkaError
from mmlog.ipc.control_channel import DEFAULT_TIMEOUT_S
from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, answer, error_code, fenced_for, forward
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import init_producer_id as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed, TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import NEXT_PRODUCER_ID, TXN_INIT_PRODUCER_ID

API_KEY = schema.API_KEY
FENCED_SINCE = 4
EXPECTED_SINCE = 3


def _refusal(ctx: HandlerContext, request) -> int:
    """Kafka's rule: WRITE on the transactional id, or for an idempotent producer IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (KIP-679)."""
    authorizer, conn, tid = ctx.authorizer, request.conn, request.body.transactional_id
    if not authorizer.enabled:
        return 0
    if tid:
        allowed = authorizer.allowed(conn, acls.WRITE, acls.TRANSACTIONAL_ID, tid)
        return 0 if allowed else TransactionalIdAuthorizationFailed.code
    allowed = authorizer.cluster(conn, acls.IDEMPOTENT_WRITE) or authorizer.allowed_any(conn, acls.WRITE, acls.TOPIC)
    return 0 if allowed else ClusterAuthorizationFailed.code


def handle(ctx: HandlerContext, request):
    refusal = _refusal(ctx, request)
    if refusal:
        return schema.RESPONSE(throttle_time_ms=0, error_code=refusal, producer_id=-1, producer_epoch=-1)
    body = request.body
    expected = (body.producer_id, body.producer_epoch) if request.version >= EXPECTED_SINCE else (-1, -1)
    if (expected[0] == -1) != (expected[1] == -1):
        return schema.RESPONSE(error_code=InvalidRequest.code, producer_id=-1, producer_epoch=-1)
    if body.transactional_id:
        translate = fenced_for(request.header.api_version, FENCED_SINCE)
        return forward(ctx, request, TXN_INIT_PRODUCER_ID,
                       {"transactional_id": body.transactional_id,
                        "transaction_timeout_ms": body.transaction_timeout_ms,
                        "expected": None if expected == (-1, -1) else expected},
                       lambda v: schema.RESPONSE(throttle_time_ms=0, **dict(v, error_code=translate(v["error_code"]))),
                       lambda code: {"error_code": code, "producer_id": -1, "producer_epoch": -1})

    def refuse(code: int):
        return schema.RESPONSE(error_code=code, producer_id=-1, producer_epoch=-1)

    def done(ok, value):
        if ok:
            request.respond(schema.RESPONSE(error_code=0, producer_id=value, producer_epoch=0))
        else:
            request.respond(refuse(value.code if isinstance(value, KafkaError) else COORDINATOR_NOT_AVAILABLE))

    ctx.control.call(NEXT_PRODUCER_ID, None, done, DEFAULT_TIMEOUT_S,
                     lambda exc: answer(request, lambda: refuse(error_code(exc, logged=True))))
    return DEFERRED

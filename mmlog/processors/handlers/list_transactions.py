"""ListTransactions (66): the transactional ids this broker coordinates, filtered by state and producer id."""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import list_transactions as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_LIST

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    body = request.body
    args = {"state_filters": list(body.state_filters), "producer_id_filters": list(body.producer_id_filters),
            "duration_filter": body.duration_filter}
    authorizer = ctx.authorizer

    def visible(v):  # Kafka lists only the transactional ids the principal may DESCRIBE
        if authorizer.enabled:
            v = dict(v, transaction_states=[s for s in v["transaction_states"] if authorizer.allowed(
                request.conn, acls.DESCRIBE, acls.TRANSACTIONAL_ID, s["transactional_id"])])
        return schema.RESPONSE(throttle_time_ms=0, **v)

    return forward(ctx, request, TXN_LIST, args, visible,
                   lambda code: {"error_code": code, "unknown_state_filters": [],
                            "transaction_states": []})

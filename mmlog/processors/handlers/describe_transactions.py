"""DescribeTransactions (65): transactional ids' states, from their coordinator (NOT_COORDINATOR elsewhere)."""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import describe_transactions as schema
from mmlog.security import acls
from mmlog.errors import TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_DESCRIBE

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    ids = list(request.body.transactional_ids)
    denied = ctx.authorizer.denied(request.conn, acls.DESCRIBE, acls.TRANSACTIONAL_ID, ids)
    if denied:  # Kafka answers each refused id TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        refused = [{"error_code": TransactionalIdAuthorizationFailed.code, "transactional_id": t,
                    "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                    "producer_id": -1, "producer_epoch": -1, "topics": []} for t in ids if t in denied]
        ids = [t for t in ids if t not in denied]
        if not ids:
            return schema.RESPONSE(throttle_time_ms=0, transaction_states=refused)
        return forward(ctx, request, TXN_DESCRIBE, {"transactional_ids": ids},
                       lambda states: schema.RESPONSE(throttle_time_ms=0, transaction_states=[*states, *refused]),
                       lambda code: [{"error_code": code, "transactional_id": t,
                                 "transaction_state": "", "transaction_timeout_ms": 0,
                                 "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
                                 "topics": []} for t in ids])
    return forward(ctx, request, TXN_DESCRIBE, {"transactional_ids": ids},
                   lambda states: schema.RESPONSE(throttle_time_ms=0, transaction_states=states),
                   lambda code: [{"error_code": code, "transactional_id": t, "transaction_state": "",
                             "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                             "producer_epoch": -1, "topics": []} for t in ids])

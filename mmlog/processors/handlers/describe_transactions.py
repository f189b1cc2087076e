"""DescribeTransactions (65): transactional ids' states, from their coordinator (NOT_COORDINATOR elsewhere)."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import describe_transactions as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    ids = list(request.body.transactional_ids)
    return forward(ctx, request, "txn_describe", {"transactional_ids": ids},
                   lambda states: schema.RESPONSE(throttle_time_ms=0, transaction_states=states),
                   lambda: [{"error_code": COORDINATOR_NOT_AVAILABLE, "transactional_id": t, "transaction_state": "",
                             "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                             "producer_epoch": -1, "topics": []} for t in ids])

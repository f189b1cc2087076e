"""ListTransactions (66): the transactional ids this broker coordinates, filtered by state and producer id."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import list_transactions as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    body = request.body
    args = {"state_filters": list(body.state_filters), "producer_id_filters": list(body.producer_id_filters),
            "duration_filter": body.duration_filter}
    return forward(ctx, request, "txn_list", args, lambda v: schema.RESPONSE(throttle_time_ms=0, **v),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE, "unknown_state_filters": [],
                            "transaction_states": []})

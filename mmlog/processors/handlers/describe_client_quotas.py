"""DescribeClientQuotas (48): the quotas of the entities a filter matches (`config/quotas.py`).

Answered here from the catalogue's copy of the quotas (ZooKeeper's, in cluster mode):
components name an entity type and match it exactly (a name, or null for `<default>`),
as the default (match type 1) or any named one (2); `strict` leaves out entities with
types the filter does not name. A bad filter is INVALID_REQUEST, as Kafka answers.
"""

from mmlog.config import quotas
from mmlog.errors import InvalidRequest
from mmlog.protocol.messages import describe_client_quotas as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.DESCRIBE_CONFIGS):
        return schema.RESPONSE(throttle_time_ms=0, error_code=ClusterAuthorizationFailed.code,
                               error_message="not authorized to describe quotas", entries=None)
    ctx.manager.reload()  # one stat: an AlterClientQuotas answered by another processor shows at once
    filters = [(c.entity_type, c.match_type, c.match) for c in request.body.components]
    try:
        quotas.check_filters(filters)
    except quotas.QuotaError as exc:
        return schema.RESPONSE(throttle_time_ms=0, error_code=InvalidRequest.code, error_message=str(exc),
                               entries=None)
    entries = []
    for where, values in sorted(ctx.manager.dynamic.get("quotas", {}).items()):
        entity = quotas.entity_of(where)
        if values and quotas.matches(entity, filters, request.body.strict):
            entries.append({"entity": [{"entity_type": k, "entity_name": v} for k, v in entity.items()],
                            "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]})
    return schema.RESPONSE(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)

"""InitProducerId (22): a producer id for idempotent producers.

Ids come from the control plane so they are unique across processors (and
restarts). Sequence checking is not done yet; the id and epoch are stored in the
batches unchanged. Transactions are not supported: a transactional id is refused.
"""

from mmlog.errors import KafkaError
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import init_producer_id as schema

API_KEY = schema.API_KEY
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def handle(ctx, request):
    if request.body.transactional_id:
        return schema.RESPONSE(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)

    def done(ok, value):
        if ok:
            request.respond(schema.RESPONSE(error_code=0, producer_id=value, producer_epoch=0))
        else:
            code = value.code if isinstance(value, KafkaError) else 15  # COORDINATOR_NOT_AVAILABLE
            request.respond(schema.RESPONSE(error_code=code, producer_id=-1, producer_epoch=-1))

    ctx.control.call("next_producer_id", None, done)
    return DEFERRED

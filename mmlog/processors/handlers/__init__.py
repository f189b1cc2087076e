"""One module per API the processors serve: `API_KEY` and `handle(ctx, request)`.

`HANDLERS` is what ApiVersions advertises: an API without a handler here is not
advertised, so clients turn the feature off instead of failing when they use it.
"""

from mmlog.processors.handlers import (
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)

HANDLERS = {
    module.API_KEY: module
    for module in (
        api_versions, create_topics, delete_topics, describe_configs, fetch, init_producer_id,
        list_offsets, metadata, offset_for_leader_epoch, produce,
    )
}

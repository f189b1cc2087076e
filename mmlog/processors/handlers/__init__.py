"""One module per API the processors serve: `API_KEY` and `handle(ctx, request)`.

`HANDLERS` is what ApiVersions advertises: an API without a handler here is not
advertised, so clients turn the feature off instead of failing when they use it.
"""

from mmlog.processors.handlers import (
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)

HANDLERS = {
    module.API_KEY: module
    for module in (
        api_versions, create_topics, delete_topics, describe_configs, fetch, init_producer_id,
        list_offsets, metadata, offset_for_leader_epoch, produce,
        # the group coordinator's APIs (all but FindCoordinator are served by the control plane)
        find_coordinator, join_group, sync_group, heartbeat, leave_group, offset_commit, offset_fetch,
        list_groups, describe_groups,
    )
}

"""One module per API the processors serve: `API_KEY` and `handle(ctx, request)`, where ctx is
the processor as its handlers may use it (`HandlerContext`, processors/handler_context.py).

`HANDLERS` is the one table of them: dispatch looks requests up in it, and it is what
ApiVersions advertises (`advertised_versions`; the processor keeps that answer as
`ctx.advertised_versions`, so the ApiVersions handler reads it without importing
this table). An API without a handler here is not advertised, so clients turn the
feature off instead of failing when they use it.
"""

from mmlog.protocol import supported_versions
from mmlog.processors.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_groups,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from mmlog.processors.handlers import (alter_configs, create_partitions, delete_groups,  # the admin APIs
                                      delete_records, describe_cluster, describe_log_dirs,
                                      incremental_alter_configs, offset_delete)
from mmlog.processors.handlers import (alter_user_scram_credentials, describe_user_scram_credentials,  # security
                                      sasl_authenticate, sasl_handshake)
from mmlog.processors.handlers import alter_client_quotas, describe_client_quotas  # quotas
from mmlog.processors.handlers import (alter_partition_reassignments, elect_leaders,  # replicas
                                      list_partition_reassignments)
from mmlog.processors.handlers import create_acls, delete_acls, describe_acls  # ACLs

HANDLERS = {
    module.API_KEY: module
    for module in (
        api_versions, create_topics, delete_topics, describe_configs, fetch, init_producer_id,
        list_offsets, metadata, offset_for_leader_epoch, produce, write_txn_markers,
        # the group coordinator's APIs (all but FindCoordinator are served by the control plane)
        find_coordinator, join_group, sync_group, heartbeat, leave_group, offset_commit, offset_fetch,
        list_groups, describe_groups,
        # the transaction coordinator's (forwarded to the control plane)
        add_partitions_to_txn, add_offsets_to_txn, end_txn, describe_transactions, list_transactions,
        txn_offset_commit,
        # the admin APIs
        create_partitions, delete_records, delete_groups, offset_delete, alter_configs, incremental_alter_configs,
        describe_cluster, describe_log_dirs,
        # security
        sasl_handshake, sasl_authenticate, describe_user_scram_credentials, alter_user_scram_credentials,
        describe_client_quotas, alter_client_quotas,
        elect_leaders, alter_partition_reassignments, list_partition_reassignments,
        describe_acls, create_acls, delete_acls,
    )
}


def advertised_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for the APIs this broker has handlers for: the ApiVersions answer.

    kafka-python 3.x infers a broker's Kafka release from this answer (DescribeClientQuotas makes
    it 2.6), and a client pinned to an older `api_version` then sends that release's versions,
    whatever is advertised: so every version a Kafka release below the inferred one serves is served
    here too (docs/protocol-versions.md).
    """
    return [(k, lo, hi) for k, lo, hi in supported_versions() if k in HANDLERS]

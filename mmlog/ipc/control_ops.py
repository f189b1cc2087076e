"""The control channel's operations, all of them: each one's name, what its request carries and
what its reply is.

A processor forwards what changes cluster state to the control plane (`control_channel.py`): a
request is `(id, op, args)`, a reply `(id, ok, value)`, pickled. `op` is one of the names here;
processors send them (`processors/handlers/`), and the control plane serves them
(`acceptor/control.py`, the group coordinator's and the transaction coordinator's `ops()`
tables), both by these constants: a test checks that every name is served and sent, and no
other. The types say what `args` and a successful `value` hold, as plain data (dicts, lists,
tuples: what the channel pickles); a failed call's value is the exception instead.

Most group and transaction replies are Kafka response bodies' fields by their JSON names
(`Fields`), which the processor hands to the codec as they are.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypedDict

Fields = dict[str, Any]  # a Kafka request's or response's fields by their JSON names (or a part of them)
ErrorAndMessage = tuple[int, str | None]  # (Kafka error code, message): 0, None when it succeeded
PartitionKeys = list[tuple[str, int]] | None  # (topic, partition) pairs; None: every partition


class Op(NamedTuple):
    """One control operation."""

    name: str
    request: Any  # the type of its `args`
    reply: Any  # the type of its successful answer
    doc: str


# ------------------------------------------------------------ topics and the cluster (acceptor/control.py)

CREATE_TOPICS = "create_topics"
CREATE_PARTITIONS = "create_partitions"
AUTO_CREATE_TOPICS = "auto_create_topics"
DELETE_TOPICS = "delete_topics"
NEXT_PRODUCER_ID = "next_producer_id"
ALTER_CONFIGS = "alter_configs"
ALTER_CLIENT_QUOTAS = "alter_client_quotas"
ALTER_SCRAM_CREDENTIALS = "alter_scram_credentials"
CREATE_ACLS = "create_acls"
DELETE_ACLS = "delete_acls"
ELECT_LEADERS = "elect_leaders"
ALTER_REASSIGNMENTS = "alter_reassignments"
LIST_REASSIGNMENTS = "list_reassignments"

# ------------------------------------------------------------ consumer groups (coordinator/coordinator.py)

JOIN_GROUP = "join_group"
SYNC_GROUP = "sync_group"
HEARTBEAT = "heartbeat"
LEAVE_GROUP = "leave_group"
OFFSET_COMMIT = "offset_commit"
OFFSET_FETCH = "offset_fetch"
TXN_OFFSET_COMMIT = "txn_offset_commit"
TXN_OFFSETS_END = "txn_offsets_end"
LIST_GROUPS = "list_groups"
DESCRIBE_GROUPS = "describe_groups"
DELETE_GROUPS = "delete_groups"
OFFSET_DELETE = "offset_delete"

# ------------------------------------------------------------ transactions (transactions/coordinator.py)

TXN_FIND_COORDINATOR = "txn_find_coordinator"
TXN_INIT_PRODUCER_ID = "txn_init_producer_id"
TXN_ADD_PARTITIONS = "txn_add_partitions"
TXN_ADD_OFFSETS = "txn_add_offsets"
TXN_END = "txn_end"
TXN_DESCRIBE = "txn_describe"
TXN_LIST = "txn_list"


# ------------------------------------------------------------ what requests carry

class TopicSpec(TypedDict):
    name: str
    partitions: int  # -1: num.partitions
    replication_factor: int  # -1: default.replication.factor
    assignments: list  # manual replica assignments (refused)
    configs: dict[str, str | None]


class CreateTopicsArgs(TypedDict):
    topics: list[TopicSpec]
    validate_only: bool


class PartitionsSpec(TypedDict):
    name: str
    count: int  # the partitions the topic has afterwards
    assignments: list[list[int]] | None


class CreatePartitionsArgs(TypedDict):
    topics: list[PartitionsSpec]
    validate_only: bool


class AlterConfigsArgs(TypedDict):
    resources: list[tuple[int, str, Any]]  # (resource type, name, changes)
    incremental: bool  # IncrementalAlterConfigs: changes are (name, op, value)
    validate_only: bool


class AlterClientQuotasArgs(TypedDict):
    entries: list[tuple[Any, list[tuple[str, float, bool]]]]  # (entity, [(key, value, remove)])
    validate_only: bool


class AlterScramArgs(TypedDict):
    deletions: list
    upsertions: list


class ElectLeadersArgs(TypedDict):
    election_type: int  # 0 preferred, 1 unclean
    partitions: PartitionKeys


class ReassignmentsArgs(TypedDict):
    partitions: Any  # alter: [(topic, partition, replicas or None to cancel)]; list: PartitionKeys


class MemberArgs(TypedDict):
    """What names a group member (Heartbeat; SyncGroup and OffsetCommit add their own fields)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


class TxnOffsetsEndArgs(TypedDict):
    group_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


class TxnInitArgs(TypedDict):
    transactional_id: str
    transaction_timeout_ms: int
    expected: tuple[int, int] | None  # (producer id, epoch) the producer has, KIP-360


class TxnArgs(TypedDict):
    """What names a transactional producer (AddPartitionsToTxn, AddOffsetsToTxn and EndTxn add theirs)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class ErrorCode(TypedDict):
    error_code: int


# ------------------------------------------------------------ the catalogue

OPS: dict[str, Op] = {op.name: op for op in (
    Op(CREATE_TOPICS, CreateTopicsArgs,
       list[tuple[str, int, str | None, tuple[int, int, dict[str, str]] | None]],
       "CreateTopics: per topic (name, code, message, (partitions, replication factor, configs) as made)"),
    Op(CREATE_PARTITIONS, CreatePartitionsArgs, list[tuple[str, int, str | None]],
       "CreatePartitions: per topic (name, code, message)"),
    Op(AUTO_CREATE_TOPICS, list[str], list[str],
       "Metadata's unknown topics: made as the budget allows; the reply names those left for later"),
    Op(DELETE_TOPICS, list[str], list[tuple[str, int]], "DeleteTopics: per topic (name, code)"),
    Op(NEXT_PRODUCER_ID, None, int, "InitProducerId without a transactional id: a fresh producer id"),
    Op(ALTER_CONFIGS, AlterConfigsArgs, list[tuple[int, str, int, str | None]],
       "AlterConfigs and IncrementalAlterConfigs: per resource (type, name, code, message)"),
    Op(ALTER_CLIENT_QUOTAS, AlterClientQuotasArgs, list[tuple[Any, int, str | None]],
       "AlterClientQuotas: per entry (entity, code, message)"),
    Op(ALTER_SCRAM_CREDENTIALS, AlterScramArgs, dict[str, ErrorAndMessage],
       "AlterUserScramCredentials: per user, (code, message)"),
    Op(CREATE_ACLS, list[tuple], list[ErrorAndMessage], "CreateAcls: the bindings; per binding (code, message)"),
    Op(DELETE_ACLS, list[tuple], list[list[tuple]], "DeleteAcls: the filters; per filter the bindings removed"),
    Op(ELECT_LEADERS, ElectLeadersArgs, list[tuple[str, int, int, str | None]],
       "ElectLeaders: per partition (topic, partition, code, message)"),
    Op(ALTER_REASSIGNMENTS, ReassignmentsArgs,
       tuple[ErrorAndMessage, list[tuple[str, int, int, str | None]]],
       "AlterPartitionReassignments: the top-level (code, message) and per partition (topic, p, code, message)"),
    Op(LIST_REASSIGNMENTS, ReassignmentsArgs,
       tuple[ErrorAndMessage, list[tuple[str, int, list[int], list[int], list[int]]]],
       "ListPartitionReassignments: the top-level (code, message) and per move (topic, p, replicas, adding, "
       "removing)"),
    Op(JOIN_GROUP, Fields, Fields, "JoinGroup: answered when the rebalance completes; JoinGroup's response fields"),
    Op(SYNC_GROUP, MemberArgs, Fields, "SyncGroup (adds `assignments` and the protocol): error code, assignment"),
    Op(HEARTBEAT, MemberArgs, ErrorCode, "Heartbeat"),
    Op(LEAVE_GROUP, Fields, Fields, "LeaveGroup (group_id, members): error code and per member"),
    Op(OFFSET_COMMIT, MemberArgs, Fields,
       "OffsetCommit (adds `topics`: [(topic, [(partition, offset, leader epoch, metadata)])]): per partition codes"),
    Op(OFFSET_FETCH, Fields, Fields, "OffsetFetch (group_id, topics, require_stable): the committed offsets"),
    Op(TXN_OFFSET_COMMIT, Fields, Fields, "TxnOffsetCommit: offsets held for a transaction; per partition codes"),
    Op(TXN_OFFSETS_END, TxnOffsetsEndArgs, ErrorCode,
       "A transaction's marker for a group (WriteTxnMarkers): its pending offsets committed or dropped"),
    Op(LIST_GROUPS, list[str], Fields, "ListGroups: the states asked for (empty: all); error code and groups"),
    Op(DESCRIBE_GROUPS, list[str], Fields, "DescribeGroups: the group ids; {'groups': [...]}"),
    Op(DELETE_GROUPS, list[str], Fields, "DeleteGroups: the group ids; {'results': [...]}"),
    Op(OFFSET_DELETE, Fields, Fields, "OffsetDelete (group_id, topics): error code and per partition codes"),
    Op(TXN_FIND_COORDINATOR, None, ErrorCode,
       "FindCoordinator of a transactional id: 0 once `__transaction_state` exists"),
    Op(TXN_INIT_PRODUCER_ID, TxnInitArgs, Fields, "InitProducerId of a transactional producer: code, id, epoch"),
    Op(TXN_ADD_PARTITIONS, TxnArgs, dict[str, dict[int, int]],
       "AddPartitionsToTxn (adds `topics`): {topic: {partition: code}}"),
    Op(TXN_ADD_OFFSETS, TxnArgs, ErrorCode, "AddOffsetsToTxn (adds `group_id`)"),
    Op(TXN_END, TxnArgs, ErrorCode, "EndTxn (adds `committed`): answered once the markers are written"),
    Op(TXN_DESCRIBE, Fields, list[Fields], "DescribeTransactions (transactional_ids): per id its state"),
    Op(TXN_LIST, Fields, Fields, "ListTransactions (state, producer id and duration filters)"),
)}

"""Cross-checks against kafka-python 3.0.12, a codec written by other people.

kafka-python carries two independent codecs: one generated from the same Kafka
JSON schemas (``kafka.protocol.<group>``) and the older hand-written
class-per-version structs (``kafka.protocol.old``). Both must read our bytes to
the same named values, and re-encode them to the very same bytes.
"""

import importlib
import uuid

import pytest

kafka = pytest.importorskip("kafka", minversion="3.0")

from kafka.protocol.old.types import Array, Schema  # noqa: E402

from mmlog.protocol import (RequestHeader, api_versions_body, decode_request,  # noqa: E402
                            decode_response, encode_request, encode_response)
from mmlog.protocol.messages import (fetch, join_group, list_offsets, metadata,  # noqa: E402
                                     offset_commit, produce)
from mmlog.protocol.structs import Struct  # noqa: E402
from .protocol_samples import every_api_version, sample  # noqa: E402

KP_MODULES = [importlib.import_module(f"kafka.protocol.{group}")
              for group in ("metadata", "consumer", "producer", "admin", "sasl")]
OLD_MODULES = [importlib.import_module(f"kafka.protocol.old.{name}") for name in (
    "metadata", "produce", "fetch", "list_offsets", "group", "commit", "api_versions",
    "find_coordinator", "admin", "init_producer_id", "offset_for_leader_epoch", "add_partitions_to_txn",
    "add_offsets_to_txn", "end_txn", "txn_offset_commit", "sasl_handshake", "sasl_authenticate")]
# No hand-written kafka-python structs (their JSON schemas are checked above like every other's): a
# broker-to-broker API, and admin-tool APIs.
NO_OLD_STRUCTS = {"WriteTxnMarkers", "DescribeTransactions", "ListTransactions", "DescribeCluster", "DescribeLogDirs",
                  "IncrementalAlterConfigs", "OffsetDelete", "DescribeClientQuotas", "AlterClientQuotas",
                  "DescribeUserScramCredentials", "AlterUserScramCredentials"}

# hand-written structs that group fields differently (CreatePartitions nests count and assignment in
# `new_partitions`): the same bytes, other names, so only the bytes are compared
OLD_SHAPE_DIFFERS = {"CreatePartitionsRequest"}

# kafka-python's names where they differ from ours (Kafka 4 renamed the field)
RENAMES = {"generation_id_or_member_epoch": "generation_id"}

CASES = [(api, version, kind) for api, version in every_api_version()
         for kind in ("Request", "Response")]
IDS = [f"{api.name}-v{version}-{kind}" for api, version, kind in CASES]


def kp_class(name):
    for module in KP_MODULES:
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(name)


def old_class(name, version):
    for module in OLD_MODULES:
        if hasattr(module, f"{name}_v{version}"):
            return getattr(module, f"{name}_v{version}")
    return None


def our_sample(api, version, kind, nulls):
    message = api.request if kind == "Request" else api.response
    value = sample(message, version, nulls=nulls)
    if api.name == "ApiVersions" and kind == "Response":
        value.error_code = 0  # kafka-python reads any error body as v0
    return message, value, bytes(message.encode(value, version))


def plain(value):
    """Our value as nested dicts/lists/bytes."""
    if isinstance(value, Struct):
        return {name: plain(getattr(value, name)) for name in value.__slots__}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def assert_same_values(theirs, ours, path=""):
    """Every field kafka-python decoded equals ours under the same (or renamed) name."""
    if isinstance(theirs, dict):
        for name, value in theirs.items():
            if name in ("tags", "authorized_operations"):  # kafka-python bookkeeping, bit sets
                continue
            ours_name = RENAMES.get(name, name)
            assert ours_name in ours, f"{path}{name}"
            assert_same_values(value, ours[ours_name], f"{path}{name}.")
    elif isinstance(theirs, list) and isinstance(ours, list):
        assert len(theirs) == len(ours), path
        for a, b in zip(theirs, ours):
            if isinstance(a, str) and isinstance(b, dict) and set(b) - {"topic_id"} == {"name"}:
                b = b["name"]  # old Metadata requests list topics as bare strings
            assert_same_values(a, b, path)
    elif isinstance(theirs, str) and isinstance(ours, bytes):
        assert theirs.encode() == ours, path
    elif isinstance(theirs, str) and isinstance(ours, uuid.UUID):
        assert theirs == str(ours), path  # kafka-python keeps a UUID as its text
    else:
        assert theirs == ours, path


@pytest.mark.parametrize("api, version, kind", CASES, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_kafka_python_json_codec_agrees_byte_for_byte(api, version, kind, nulls):
    _, value, encoded = our_sample(api, version, kind, nulls)
    theirs = kp_class(api.name + kind).decode(encoded, version=version)
    theirs._header = None  # decode() leaves it unset; encode() wants it
    assert bytes(theirs.encode(version=version)) == encoded
    assert_same_values(theirs.to_dict(), plain(value))


def _named(schema_type, value):
    if isinstance(schema_type, Schema):
        fields = zip(schema_type.names, schema_type.fields, value)
        return {name: _named(t, v) for name, t, v in fields}
    if isinstance(schema_type, Array):
        return None if value is None else [_named(schema_type.array_of, v) for v in value]
    return value


# kafka-python's hand-written DescribeAcls v2 says "flexible" but reuses v1's schema (no compact strings,
# no tagged fields); its JSON schema, which its client sends with, is checked above and agrees with ours.
OLD_STRUCT_WRONG = {("DescribeAcls", 2)}
OLD_CASES = [case for case in CASES if old_class(case[0].name + case[2], case[1]) is not None
             and (case[0].name, case[1]) not in OLD_STRUCT_WRONG]


@pytest.mark.parametrize("api, version, kind", OLD_CASES,
                         ids=[f"{a.name}-v{v}-{k}" for a, v, k in OLD_CASES])
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_hand_written_kafka_python_structs_agree(api, version, kind, nulls):
    message, value, encoded = our_sample(api, version, kind, nulls)
    cls = old_class(api.name + kind, version)
    theirs = cls.decode(encoded)
    assert bytes(theirs.encode()) == encoded
    if api.name + kind in OLD_SHAPE_DIFFERS:
        return
    named = _named(cls.SCHEMA, [getattr(theirs, name) for name in cls.SCHEMA.names])
    assert_same_values(named, plain(value))


def test_old_struct_coverage():
    """Every API we speak has hand-written kafka-python structs for most non-flexible versions (its
    hand-written structs stop before KIP-482; the JSON codec above checks the flexible ones)."""
    client_cases = [case for case in CASES if case[0].name not in NO_OLD_STRUCTS and not case[0].is_flexible(case[1])]
    assert len(OLD_CASES) >= len(client_cases) - 8  # the newest version of 4 APIs (DeleteRecords v1, ...)


# --- kafka-python encodes, we decode (values written by hand, in their field order) ---

def old(name, version, *fields):
    return bytes(old_class(name, version)(*fields).encode())


def test_metadata_v0_and_v8_requests_from_kafka_python():
    assert metadata.REQUEST.decode(old("MetadataRequest", 0, ["a", "b"]), 0).topics == [
        metadata.REQUEST.cls.MetadataRequestTopic(name="a"),
        metadata.REQUEST.cls.MetadataRequestTopic(name="b")]
    body = metadata.REQUEST.decode(old("MetadataRequest", 8, None, False, True, False), 8)
    assert body.topics is None
    assert (body.allow_auto_topic_creation, body.include_cluster_authorized_operations,
            body.include_topic_authorized_operations) == (False, True, False)


def test_produce_v7_request_from_kafka_python():
    data = old("ProduceRequest", 7, "txn", -1, 30000, [("t", [(3, b"batch")])])
    body = produce.REQUEST.decode(data, 7)
    assert (body.transactional_id, body.acks, body.timeout_ms) == ("txn", -1, 30000)
    assert body.topic_data[0].name == "t"
    partition = body.topic_data[0].partition_data[0]
    assert (partition.index, bytes(partition.records)) == (3, b"batch")


def test_fetch_v11_request_from_kafka_python():
    data = old("FetchRequest", 11, -1, 500, 1, 52428800, 1, 0, -1,
               [("t", [(2, 5, 100, 0, 1048576)])], [("gone", [7, 8])], "rack-1")
    body = fetch.REQUEST.decode(data, 11)
    assert (body.replica_id, body.max_wait_ms, body.min_bytes, body.max_bytes,
            body.isolation_level, body.session_id, body.session_epoch) == (
        -1, 500, 1, 52428800, 1, 0, -1)
    [partition] = body.topics[0].partitions
    assert (partition.partition, partition.current_leader_epoch, partition.fetch_offset,
            partition.log_start_offset, partition.partition_max_bytes) == (2, 5, 100, 0, 1048576)
    assert body.forgotten_topics_data[0].partitions == [7, 8]
    assert body.rack_id == "rack-1"


def test_list_offsets_v5_request_from_kafka_python():
    data = old("ListOffsetsRequest", 5, -1, 1, [("t", [(0, -1, -2)])])
    body = list_offsets.REQUEST.decode(data, 5)
    assert (body.replica_id, body.isolation_level) == (-1, 1)
    partition = body.topics[0].partitions[0]
    assert (partition.partition_index, partition.current_leader_epoch, partition.timestamp) == (
        0, -1, -2)


def test_join_group_v5_request_from_kafka_python():
    data = old("JoinGroupRequest", 5, "g", 10000, 300000, "m-1", "static-1", "consumer",
               [("range", b"meta")])
    body = join_group.REQUEST.decode(data, 5)
    assert (body.group_id, body.session_timeout_ms, body.rebalance_timeout_ms, body.member_id,
            body.group_instance_id, body.protocol_type) == (
        "g", 10000, 300000, "m-1", "static-1", "consumer")
    assert (body.protocols[0].name, bytes(body.protocols[0].metadata)) == ("range", b"meta")


def test_offset_commit_v2_request_from_kafka_python():
    """assign() consumers commit with generation -1 and an empty member id."""
    data = old("OffsetCommitRequest", 2, "g", -1, "", -1, [("t", [(0, 42, None)])])
    body = offset_commit.REQUEST.decode(data, 2)
    assert (body.group_id, body.generation_id, body.member_id, body.retention_time_ms) == (
        "g", -1, "", -1)
    partition = body.topics[0].partitions[0]
    assert (partition.partition_index, partition.committed_offset,
            partition.committed_metadata) == (0, 42, None)


# --- we encode, kafka-python decodes -----------------------------------------------------

def test_our_metadata_v1_response_read_by_kafka_python():
    body = metadata.RESPONSE(controller_id=0, brokers=[{"node_id": 0, "host": "h", "port": 9092}],
                             topics=[{"name": "t", "partitions": [
                                 {"partition_index": 0, "leader_id": 0, "replica_nodes": [0],
                                  "isr_nodes": [0]}]}])
    theirs = old_class("MetadataResponse", 1).decode(bytes(metadata.RESPONSE.encode(body, 1)))
    assert theirs.brokers == [(0, "h", 9092, None)]
    assert theirs.controller_id == 0
    assert theirs.topics == [(0, "t", False, [(0, 0, 0, [0], [0])])]


def test_our_fetch_v11_response_read_by_kafka_python():
    body = fetch.RESPONSE(responses=[{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 5, "last_stable_offset": 5,
         "log_start_offset": 0, "records": b"batch-bytes"}]}])
    theirs = old_class("FetchResponse", 11).decode(bytes(fetch.RESPONSE.encode(body, 11)))
    assert (theirs.throttle_time_ms, theirs.error_code, theirs.session_id) == (0, 0, 0)
    assert theirs.responses == [("t", [(0, 0, 5, 5, 0, [], -1, b"batch-bytes")])]


# --- whole frames: headers included ---------------------------------------------------------

@pytest.mark.parametrize("api, version", every_api_version(),
                         ids=[f"{a.name}-v{v}" for a, v in every_api_version()])
def test_kafka_python_request_frames_decode(api, version):
    _, value, encoded = our_sample(api, version, "Request", False)
    theirs = kp_class(api.name + "Request").decode(encoded, version=version)
    theirs.with_header(correlation_id=77, client_id="kafka-python")
    frame = bytes(theirs.encode(version=version, header=True, framed=True))
    header, body = decode_request(frame[4:])
    assert header == RequestHeader(api.key, version, 77, "kafka-python")
    assert body == value
    assert encode_request(header, body) == frame


@pytest.mark.parametrize("api, version", every_api_version(),
                         ids=[f"{a.name}-v{v}" for a, v in every_api_version()])
def test_our_response_frames_decode_in_kafka_python(api, version):
    _, value, encoded = our_sample(api, version, "Response", False)
    frame = bytes(encode_response(RequestHeader(api.key, version, 78, "c"), value))
    theirs = kp_class(api.name + "Response").decode(frame, version=version, header=True,
                                                    framed=True)
    assert theirs.header.correlation_id == 78
    assert_same_values(theirs.to_dict(), plain(value))
    assert decode_response(api.key, version, frame[4:]) == (78, value)


def test_kafka_python_reads_our_api_versions_v3_answer():
    frame = bytes(encode_response(RequestHeader(18, 3, 1), api_versions_body()))
    theirs = kp_class("ApiVersionsResponse").decode(frame, version=3, header=True, framed=True)
    assert {k["api_key"]: (k["min_version"], k["max_version"])
            for k in theirs.to_dict()["api_keys"]}[0] == (3, 8)

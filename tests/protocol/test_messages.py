"""Every (api, version) in the registry: round trips, truncation, garbage, advertised ranges."""

import pickle
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlog.protocol import APIS, precompile, supported_versions
from mmlog.protocol.errors import ProtocolError, TruncatedError
from .protocol_samples import every_api_version, sample

CASES = [(api, version, kind) for api, version in every_api_version()
         for kind in ("request", "response")]
IDS = [f"{api.name}-v{version}-{kind}" for api, version, kind in CASES]


def _message(api, kind):
    return api.request if kind == "request" else api.response


@pytest.mark.parametrize("api, version, kind", CASES, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_round_trip(api, version, kind, nulls):
    message = _message(api, kind)
    value = sample(message, version, nulls=nulls)
    encoded = bytes(message.encode(value, version))
    decoded, end = message.decode_from(memoryview(encoded), 0, version)
    assert end == len(encoded)
    assert decoded == value
    assert message.encode(decoded, version) == encoded


@pytest.mark.parametrize("api, version, kind", CASES, ids=IDS)
def test_every_truncation_raises_truncated_error(api, version, kind):
    message = _message(api, kind)
    encoded = bytes(message.encode(sample(message, version), version))
    for cut in range(len(encoded)):
        with pytest.raises(TruncatedError):
            message.decode(encoded[:cut], version)


@pytest.mark.parametrize("api, version, kind", CASES[::3], ids=IDS[::3])
def test_garbage_raises_only_protocol_errors(api, version, kind):
    message = _message(api, kind)

    @settings(max_examples=60, deadline=None)
    @given(st.binary(max_size=200))
    def check(data):
        try:
            message.decode(data, version)
        except ProtocolError:
            pass

    check()


@pytest.mark.parametrize("api, version, kind", CASES[1::3], ids=IDS[1::3])
def test_flipped_bytes_raise_only_protocol_errors(api, version, kind):
    message = _message(api, kind)
    encoded = bytes(message.encode(sample(message, version), version))
    if not encoded:
        return  # ListGroups v0-2 requests: no byte to flip

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, len(encoded) - 1), st.integers(1, 255))
    def check(index, xor):
        damaged = bytearray(encoded)
        damaged[index] ^= xor
        try:
            message.decode(damaged, version)
        except ProtocolError:
            pass

    check()


# What the broker advertises and Kafka's flexibleVersions.
ADVERTISED = {
    18: ("ApiVersions", 0, 3, 3), 3: ("Metadata", 0, 12, 9), 0: ("Produce", 3, 8, 9),
    1: ("Fetch", 4, 11, 12), 2: ("ListOffsets", 1, 6, 6), 19: ("CreateTopics", 2, 5, 5),
    20: ("DeleteTopics", 1, 4, 4), 22: ("InitProducerId", 0, 3, 2),
    32: ("DescribeConfigs", 1, 3, 4), 23: ("OffsetForLeaderEpoch", 2, 3, 4),
    10: ("FindCoordinator", 0, 3, 3), 11: ("JoinGroup", 0, 7, 6), 14: ("SyncGroup", 0, 5, 4),
    12: ("Heartbeat", 0, 4, 4), 13: ("LeaveGroup", 0, 5, 4), 8: ("OffsetCommit", 2, 8, 8),
    9: ("OffsetFetch", 1, 7, 6), 16: ("ListGroups", 0, 4, 3), 15: ("DescribeGroups", 0, 5, 5),
    24: ("AddPartitionsToTxn", 0, 2, 3), 25: ("AddOffsetsToTxn", 0, 2, 3), 26: ("EndTxn", 0, 2, 3),
    27: ("WriteTxnMarkers", 0, 0, 1), 28: ("TxnOffsetCommit", 0, 3, 3),
    65: ("DescribeTransactions", 0, 0, 0), 66: ("ListTransactions", 0, 1, 0),
}
ADVERTISED.update({  # the admin APIs; OffsetDelete is never flexible, DescribeCluster always
    37: ("CreatePartitions", 0, 2, 2), 21: ("DeleteRecords", 0, 1, 2), 42: ("DeleteGroups", 0, 2, 2),
    47: ("OffsetDelete", 0, 0, None), 44: ("IncrementalAlterConfigs", 0, 1, 1), 33: ("AlterConfigs", 0, 1, 2),
    60: ("DescribeCluster", 0, 1, 0), 35: ("DescribeLogDirs", 1, 1, 2),
    43: ("ElectLeaders", 0, 2, 2), 45: ("AlterPartitionReassignments", 0, 0, 0),
    46: ("ListPartitionReassignments", 0, 0, 0),
    48: ("DescribeClientQuotas", 0, 1, 1), 49: ("AlterClientQuotas", 0, 1, 1),
})
ADVERTISED.update({  # security: SaslAuthenticate v2 is flexible (kafka-python sends it)
    17: ("SaslHandshake", 0, 1, None), 36: ("SaslAuthenticate", 0, 2, 2),
    50: ("DescribeUserScramCredentials", 0, 0, 0), 51: ("AlterUserScramCredentials", 0, 0, 0),
    29: ("DescribeAcls", 0, 2, 2), 30: ("CreateAcls", 0, 2, 2), 31: ("DeleteAcls", 0, 2, 2),  # ACLs
})
# No non-flexible version exists (Kafka made them flexible from their first): we speak their flexible ones.
FLEXIBLE_ONLY = {"DescribeCluster", "DescribeTransactions", "ListTransactions", "DescribeUserScramCredentials",
                 "AlterUserScramCredentials", "AlterPartitionReassignments", "ListPartitionReassignments"}


def test_registry_matches_the_interop_table():
    assert {key: (api.name, api.min_version, api.max_version,
                  min((v for v in range(60) if api.is_flexible(v)), default=None))
            for key, api in APIS.items()} == ADVERTISED


def test_request_and_response_agree_on_versions():
    for api in APIS.values():
        assert (api.request.versions, api.request.flexible) == \
               (api.response.versions, api.response.flexible)
        assert api.request.api_key == api.response.api_key == api.key


# The flexible (KIP-482) versions we speak of APIs that also have non-flexible ones: what Kafka 2.4-2.8
# brokers serve, so a kafka-python pinned to any release below the one it infers finds its versions here
# (tests/interop/test_kafka_python_version_inference.py).
FLEXIBLE = {
    "ApiVersions": [3], "Metadata": [9, 10, 11, 12], "ListOffsets": [6], "CreateTopics": [5], "DeleteTopics": [4],
    "InitProducerId": [2, 3], "FindCoordinator": [3], "JoinGroup": [6, 7], "SyncGroup": [4, 5], "Heartbeat": [4],
    "LeaveGroup": [4, 5], "OffsetCommit": [8], "OffsetFetch": [6, 7], "ListGroups": [3, 4], "DescribeGroups": [5],
    "TxnOffsetCommit": [3], "CreatePartitions": [2], "DeleteGroups": [2], "IncrementalAlterConfigs": [1],
    "ElectLeaders": [2], "SaslAuthenticate": [2], "DescribeClientQuotas": [1], "AlterClientQuotas": [1],
    "DescribeAcls": [2], "CreateAcls": [2], "DeleteAcls": [2],  # kafka-python pinned to 2.5 sends v2
}


def test_the_flexible_versions_we_speak_are_the_table():
    flexible: dict[str, list[int]] = {}
    for api, v in every_api_version():
        if api.is_flexible(v) and api.name not in FLEXIBLE_ONLY:
            flexible.setdefault(api.name, []).append(v)
    assert flexible == FLEXIBLE


def test_supported_versions_is_sorted_by_key():
    keys = [key for key, _, _ in supported_versions()]
    assert keys == sorted(ADVERTISED)


def test_precompile_compiles_every_version():
    precompile()
    for api, version in every_api_version():
        assert version in api.request._codecs and version in api.response._codecs


def test_every_message_value_unpickles_in_a_fresh_process():
    """A control-channel pickle names only `structs._restore`; importing it registers every message."""
    values = [sample(_message(api, kind), api.max_version) for api in APIS.values() for kind in ("request", "response")]
    script = "import pickle, sys; print(*(type(v).__qualname__ for v in pickle.load(sys.stdin.buffer)))"
    out = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(values), capture_output=True, check=True)
    assert out.stdout.decode().split() == [type(v).__qualname__ for v in values]

"""ConsumerProtocol subscription and assignment bytes: golden tables, newer versions, kafka-python's codec."""

from __future__ import annotations

import pytest

from mmlog.client.consumer_protocol import (Assignment, Subscription, decode_assignment, decode_subscription,
                                            encode_assignment, encode_subscription)
from mmlog.client.records import TopicPartition as TP
from mmlog.protocol import ProtocolError

SUBSCRIPTIONS = [
    (Subscription(("clicks",)),
     "0000"                                  # version 0
     "00000001" "0006" "636c69636b73"        # topics: ["clicks"]
     "ffffffff"),                            # user_data: null
    (Subscription(("a", "b"), b"\x01\x02"),
     "0000" "00000002" "0001" "61" "0001" "62" "00000002" "0102"),
    (Subscription(("t",), None, (TP("t", 0), TP("t", 2)), 7, "rack-1", version=3),
     "0003" "00000001" "0001" "74" "ffffffff"
     "00000001" "0001" "74" "00000002" "00000000" "00000002"   # owned_partitions: t [0, 2]   (v1+)
     "00000007"                                                # generation_id 7               (v2+)
     "0006" "7261636b2d31"),                                   # rack_id "rack-1"              (v3+)
]

ASSIGNMENTS = [
    (Assignment((TP("a", 0), TP("a", 2), TP("b", 1))),
     "0000"
     "00000002" "0001" "61" "00000002" "00000000" "00000002"   # a: [0, 2]
     "0001" "62" "00000001" "00000001"                         # b: [1]
     "ffffffff"),
    (Assignment(), "0000" "00000000" "ffffffff"),
]


@pytest.mark.parametrize("sub, hexbytes", SUBSCRIPTIONS)
def test_subscription_bytes(sub, hexbytes):
    assert encode_subscription(sub).hex() == hexbytes
    assert decode_subscription(bytes.fromhex(hexbytes)) == sub


@pytest.mark.parametrize("assignment, hexbytes", ASSIGNMENTS)
def test_assignment_bytes(assignment, hexbytes):
    assert encode_assignment(assignment).hex() == hexbytes
    assert decode_assignment(bytes.fromhex(hexbytes)) == assignment


def test_assignment_partitions_are_grouped_by_topic_whatever_the_order_given():
    out = encode_assignment(Assignment((TP("b", 1), TP("a", 2), TP("a", 0))))
    assert out.hex() == ASSIGNMENTS[0][1]


def test_a_newer_version_reads_as_the_newest_known_one():
    """Kafka's rule: fields are only appended, so v9 with trailing bytes still decodes."""
    v3 = bytes.fromhex(SUBSCRIPTIONS[2][1])
    sub = decode_subscription(b"\x00\x09" + v3[2:] + b"future fields")
    assert (sub.topics, sub.owned_partitions, sub.generation_id, sub.version) == (("t",), (TP("t", 0), TP("t", 2)),
                                                                                   7, 9)
    assert decode_assignment(b"\x00\x05" + bytes.fromhex(ASSIGNMENTS[0][1])[2:]).partitions == ASSIGNMENTS[0][0].partitions


def test_an_empty_assignment_is_no_partitions():
    """The coordinator hands a member the leader left out an empty byte string."""
    assert decode_assignment(b"") == Assignment()


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05\x00\x01"])
def test_garbage_is_a_protocol_error(data):
    with pytest.raises(ProtocolError):
        decode_subscription(data)


def test_kafka_pythons_codec_reads_ours_and_we_read_its():
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    theirs = ConsumerProtocolSubscription.decode(encode_subscription(Subscription(("x", "y"))))
    assert (theirs.version, list(theirs.topics), theirs.user_data) == (0, ["x", "y"], None)
    ours = decode_subscription(ConsumerProtocolSubscription(version=0, topics=["x"], user_data=b"").encode())
    assert ours == Subscription(("x",), b"")

    theirs = ConsumerProtocolAssignment.decode(encode_assignment(ASSIGNMENTS[0][0]))
    assert [(t.topic, list(t.partitions)) for t in theirs.assigned_partitions] == [("a", [0, 2]), ("b", [1])]
    ours = decode_assignment(ConsumerProtocolAssignment(version=0, assigned_partitions=[("t", [3, 1])],
                                                        user_data=b"").encode())
    assert ours.partitions == (TP("t", 3), TP("t", 1))

"""Encoded items (`Message.encode_item`): a struct encoded once and spliced as it is, byte for byte the codec's."""

import uuid

import pytest

from mmlog.protocol.errors import EncodeError, UnsupportedVersionError
from mmlog.protocol.messages import metadata
from mmlog.protocol.schema import Field, Message, error_codes
from mmlog.protocol.structs import Encoded
from tests.protocol.test_schema import EXAMPLE, VALUE

# Items with a tagged field of their own (their writer takes the instance road, not the dict one).
TAGGED = Message("TaggedItemsResponse", api_key=1001, versions="0-1", flexible="1+", fields=[
    Field("error_code", "int16", "0+"),
    Field("items", "[]TaggedItem", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("name", "string", "0+"),
        Field("note", "string", "1+", nullable="1+", default=None, tag=0, tagged="1+"),
        Field("parts", "[]TaggedPart", "0+", fields=[Field("error_code", "int16", "0+"), Field("id", "int32", "0+")]),
    ]),
])

TOPIC = {"error_code": 0, "name": "t", "topic_id": uuid.UUID(int=7), "is_internal": False, "partitions": [
    {"error_code": 5, "partition_index": 0, "leader_id": -1, "leader_epoch": 3, "replica_nodes": [1, 2],
     "isr_nodes": [2], "offline_replicas": [1]},
    {"partition_index": 1, "leader_id": 2, "replica_nodes": [2, 1], "isr_nodes": [2, 1]}]}


@pytest.mark.parametrize("version", range(metadata.RESPONSE.min_version, metadata.RESPONSE.max_version + 1))
def test_a_response_with_encoded_topics_is_byte_for_byte_the_one_with_their_values(version):
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "cluster_id": "c", "controller_id": 1}
    other = {**TOPIC, "name": "u", "partitions": []}
    plain = metadata.RESPONSE.encode(metadata.RESPONSE(**body, topics=[TOPIC, other, TOPIC]), version)
    item = metadata.RESPONSE.encode_item("topics", TOPIC, version)
    spliced = metadata.RESPONSE.encode(metadata.RESPONSE(**body, topics=[item, other, item]), version)
    assert spliced == plain
    parts = metadata.RESPONSE.encode_parts(metadata.RESPONSE(**body, topics=[item, other, item]), version)
    assert b"".join(parts) == plain


@pytest.mark.parametrize("version", [0, 1])
def test_items_of_a_struct_with_tagged_fields_and_nested_paths_splice_alike(version):
    item = {"error_code": 1, "name": "x", "note": "n", "parts": [{"error_code": 2, "id": 3}]}
    plain = TAGGED.encode(TAGGED(items=[item, item]), version)
    encoded = TAGGED.encode_item("items", item, version)
    assert TAGGED.encode(TAGGED(items=[encoded, item]), version) == plain
    part = TAGGED.encode_item("items.parts", {"error_code": 2, "id": 3}, version)
    assert TAGGED.encode(TAGGED(items=[{**item, "parts": [part]}, encoded]), version) == plain


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_example_messages_items_splice_in_every_version(version):
    encoded = EXAMPLE.encode_item("items", VALUE.items[0], version)
    assert EXAMPLE.encode(EXAMPLE(**{**_fields(VALUE), "items": [encoded]}), version) == EXAMPLE.encode(VALUE, version)


def _fields(value) -> dict:
    return {name: getattr(value, name) for name in value.__slots__}


def test_an_item_encoded_for_another_version_or_struct_is_refused():
    v9 = metadata.RESPONSE.encode_item("topics", TOPIC, 9)
    with pytest.raises(EncodeError, match="MetadataResponseTopic v9"):
        metadata.RESPONSE.encode(metadata.RESPONSE(topics=[v9]), 10)
    part = metadata.RESPONSE.encode_item("topics.partitions", TOPIC["partitions"][0], 9)
    with pytest.raises(EncodeError):
        metadata.RESPONSE.encode(metadata.RESPONSE(topics=[part]), 9)


def test_only_struct_fields_of_a_version_the_message_speaks_have_items():
    with pytest.raises(ValueError, match="no struct field 'brokers.host'"):
        metadata.RESPONSE.encode_item("brokers.host", "h", 1)
    with pytest.raises(ValueError, match="no struct field 'nothing'"):
        metadata.RESPONSE.encode_item("nothing", {}, 1)
    with pytest.raises(UnsupportedVersionError):
        metadata.RESPONSE.encode_item("topics", TOPIC, 99)


def test_error_codes_count_those_inside_encoded_items_as_in_their_values():
    item = metadata.RESPONSE.encode_item("topics", TOPIC, 12)
    assert isinstance(item, Encoded) and item.errors == (5,)
    with_values = list(error_codes(metadata.RESPONSE(topics=[TOPIC, {"error_code": 3, "name": "gone"}])))
    with_items = list(error_codes(metadata.RESPONSE(topics=[item, {"error_code": 3, "name": "gone"}])))
    assert sorted(with_items) == sorted(with_values) == [3, 5]

"""Whole frames: a client and a broker built from this codec, talking over a fake link."""

import random

import pytest

from mmlog.protocol import (FrameReader, Placeholder, RequestHeader, UnsupportedVersionError,
                            api_versions_body, decode_request, decode_response, encode_request,
                            encode_response, encode_response_parts, is_supported, parts_size)
from mmlog.protocol.messages import api_versions, fetch, metadata, produce

BATCH = bytes(range(256)) * 300  # stands for a 76 KB record batch
LOG = {("events", 0): BATCH}  # what the fake broker serves


class FakeLink:
    """A byte pipe that delivers whatever is written in random-sized pieces."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pending = bytearray()

    def send(self, parts) -> None:
        for part in parts:
            self.pending += part.payload if isinstance(part, Placeholder) else part

    def deliver_into(self, reader: FrameReader) -> list:
        while self.pending:
            target = reader.get_buffer()
            n = min(len(target), self.rng.randint(1, 9000), len(self.pending))
            target[:n] = self.pending[:n]
            del self.pending[:n]
            reader.buffer_updated(n)
        return reader.pop_frames()


def broker_answer(frame) -> list:
    """The broker side: decode the request, build the answer, encode it (as parts)."""
    header, body = decode_request(frame)
    if header.api_key == api_versions.API_KEY:
        return [encode_response(header, api_versions_body())]
    if header.api_key == metadata.API_KEY:
        answer = metadata.RESPONSE(brokers=[{"node_id": 0, "host": "127.0.0.1", "port": 9092}],
                                   controller_id=0, topics=[{"name": "events", "partitions": [
                                       {"partition_index": 0, "leader_id": 0}]}])
        return [encode_response(header, answer)]
    if header.api_key == produce.API_KEY:
        partition = body.topic_data[0].partition_data[0]
        assert partition.records == BATCH
        return [encode_response(header, produce.RESPONSE(responses=[{
            "name": "events", "partition_responses": [{"index": partition.index}]}]))]
    if header.api_key == fetch.API_KEY:
        topic = body.topics[0]
        records = LOG[topic.topic, topic.partitions[0].partition]
        return encode_response_parts(header, fetch.RESPONSE(responses=[{
            "topic": topic.topic, "partitions": [{
                "partition_index": 0, "high_watermark": 1,
                "records": Placeholder(len(records), records)}]}]))
    raise AssertionError(header)


REQUESTS = [
    (api_versions.API_KEY, 3, api_versions.REQUEST(client_software_name="mmlog")),
    (metadata.API_KEY, 8, metadata.REQUEST(topics=None)),
    (produce.API_KEY, 8, produce.REQUEST(acks=-1, timeout_ms=1000, topic_data=[
        {"name": "events", "partition_data": [{"index": 0, "records": BATCH}]}])),
    (fetch.API_KEY, 11, fetch.REQUEST(max_wait_ms=500, min_bytes=1, topics=[
        {"topic": "events", "partitions": [{"partition": 0, "partition_max_bytes": 1 << 20}]}])),
]


@pytest.mark.parametrize("seed", range(5))
def test_a_conversation_over_a_fake_link(seed):
    to_broker, to_client = FakeLink(seed), FakeLink(seed + 100)
    broker_reader, client_reader = FrameReader(), FrameReader()
    for correlation_id, (key, version, body) in enumerate(REQUESTS):  # pipelined
        to_broker.send([encode_request(RequestHeader(key, version, correlation_id, "c"), body)])
    for frame in to_broker.deliver_into(broker_reader):
        to_client.send(broker_answer(frame))
    answers = [decode_response(key, version, frame) for (key, version, _), frame in
               zip(REQUESTS, to_client.deliver_into(client_reader), strict=True)]
    assert [correlation_id for correlation_id, _ in answers] == [0, 1, 2, 3]
    versions, brokers, produced, fetched = (body for _, body in answers)
    assert (18, 0, 3) in [(k.api_key, k.min_version, k.max_version) for k in versions.api_keys]
    assert brokers.topics[0].partitions[0].leader_id == 0
    assert produced.responses[0].partition_responses[0].error_code == 0
    partition = fetched.responses[0].partitions[0]
    assert (partition.high_watermark, partition.preferred_read_replica) == (1, -1)
    assert partition.records == BATCH


def test_parts_without_placeholders_are_the_plain_frame():
    header = RequestHeader(3, 8, 9, "c")
    body = metadata.RESPONSE(cluster_id="x")
    assert encode_response_parts(header, body) == [encode_response(header, body)]


def test_parts_size_counts_the_whole_frame():
    header = RequestHeader(1, 4, 1, "c")
    parts = encode_response_parts(header, fetch.RESPONSE(responses=[
        {"topic": "t", "partitions": [{"records": Placeholder(10)}, {"records": Placeholder(7)}]}]))
    assert int.from_bytes(parts[0][:4], "big") == parts_size(parts) - 4


def test_versions_outside_the_registry_are_refused_on_encode():
    assert not is_supported(0, 2) and not is_supported(99, 0)
    with pytest.raises(UnsupportedVersionError):
        encode_request(RequestHeader(0, 2, 1, "c"), produce.REQUEST())
    with pytest.raises(UnsupportedVersionError):
        encode_response(RequestHeader(3, 13, 1, "c"), metadata.RESPONSE())

"""A consumer's Fetch frames from a filled template are the codec's bytes for the same request."""

from __future__ import annotations

import random

import pytest

from mmlog.client.fetch_requests import FETCH_VERSION, FetchRequests
from mmlog.protocol.codec import decode_request

PARTITION_SETS = [
    [("t", 0)],
    [("t", 3), ("t", 1)],
    [("a", 0), ("b", 0), ("a", 1)],  # a topic named again after another: grouped in the frame
    [("a", 0), ("b", 1), ("c", 2), ("a", 3)],
    [("a", i) for i in range(6)],  # more partitions than markers: the codec each time
]


@pytest.mark.parametrize("partitions", PARTITION_SETS, ids=lambda ps: f"{len(ps)}-partitions")
def test_filled_template_frames_equal_the_codecs_frames(partitions):
    rng = random.Random(len(partitions))
    requests = FetchRequests("consumer-1", max_wait_ms=500, min_bytes=1, isolation=1)
    for _ in range(20):
        parts = [(t, p, rng.choice([0, 1, rng.randrange(1 << 40)]), 1 << 20) for t, p in partitions]
        max_bytes = rng.choice([50 << 20, 1 << 20])
        assert requests.frame(parts, max_bytes) == requests._encode(parts, max_bytes)


def test_the_frame_says_what_each_partition_fetches():
    requests = FetchRequests("c", max_wait_ms=250, min_bytes=7, isolation=0)
    requests.frame([("x", 1, 5, 100), ("y", 0, 9, 200)], 1000)  # makes the template
    frame = requests.frame([("x", 1, 123456789012, 100), ("y", 0, 42, 200)], 1000)
    header, body = decode_request(bytes(frame[4:]))
    assert (header.api_version, body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level) == \
        (FETCH_VERSION, 250, 7, 1000, 0)
    got = {(t.topic, p.partition): (p.fetch_offset, p.partition_max_bytes) for t in body.topics for p in t.partitions}
    assert got == {("x", 1): (123456789012, 100), ("y", 0): (42, 200)}

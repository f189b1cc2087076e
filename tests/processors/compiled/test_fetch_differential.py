"""A consumer's Fetch served by the compiled path and by the Python handler: the same answers, byte for byte.

Two brokers of one processor each, `compiled.request.path.enable` true and false, with the same topics
filled by the same Produce frames (so their files are identical: test_differential.py proves that).
Each Fetch stream goes to both on one connection each, cut into the same seeded chunks, and must get
the same response bytes: the Fetch frames captured from librdkafka and kafka-python (tests/fixtures/
client_frames; their topics filled here), and generated ones: every version 4-11, several partitions,
fetch offsets at 0, mid-batch, at and past the high watermark, small partition_max_bytes and max_bytes
(cuts mid-batch, partitions left without records), read_committed, leader epochs, and long polls. A
reader that does not read while a large answer is sent (a small receive buffer) gets it whole and in
order: the compiled path hands the unsent header bytes and file ranges to Python.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path

import pytest

from mmlog.client import Admin
from mmlog.protocol import RequestHeader, decode_request, encode_request
from mmlog.protocol.messages import fetch
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, scrape
from tests.processors.compiled.test_differential import (
    TOPIC_CONFIG,
    batch,
    chunking,
    exchange,
    part,
    partition_files,
    request,
)
from tools.fuzz_frames import CORPUS, api_key, read_frames

SEED = 11
ONE, THREE, BIG, ROLLED = "f-one", "f-three", "f-big", "f-rolled"
ROLLED_CONFIG = {**TOPIC_CONFIG, "segment.bytes": "8192"}  # many segments: reads of older ones are Python's
CAPTURES = ("confluent-kafka-consumer", "kafka-python-consumer", "kafka-python-1.1")


def captured_fetch_frames() -> list[bytes]:
    frames = []
    for name in CAPTURES:
        frames += [f for f in read_frames((Path(CORPUS) / f"{name}.frames").read_bytes())
                   if api_key(f) == fetch.API_KEY]
    return frames


def captured_topics() -> dict[str, int]:
    """Each captured fetch's topic and how many partitions it reads."""
    topics: dict[str, int] = {}
    for frame in captured_fetch_frames():
        _, body = decode_request(frame[4:])
        for t in body.topics:
            topics[t.topic] = max(topics.get(t.topic, 0), 1 + max(p.partition for p in t.partitions))
    return topics


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """(compiled, python), with the same topics and records (the high watermarks in `hw`)."""
    made = []
    topics = {ONE: 1, THREE: 3, BIG: 1, ROLLED: 1, **captured_topics()}
    try:
        for enable in ("true", "false"):
            broker = EmbeddedBroker(tmp_path_factory.mktemp(f"fetch-{enable}"), processors=1,
                                    config={**METRICS_ON, "compiled.request.path.enable": enable}).start()
            made.append(broker)
            with Admin(broker.bootstrap) as admin:
                for name, count in topics.items():
                    admin.create_topic(name, count, ROLLED_CONFIG if name == ROLLED else TOPIC_CONFIG)
        rng = random.Random(SEED)
        frames, cid = [], 1
        for name, count in topics.items():
            if name == BIG:
                continue
            for _ in range(60 if name in (ONE, THREE, ROLLED) else 80):
                for index in range(count):
                    frames.append(request(8, cid, part(name, index, batch(rng))))
                    cid += 1
        big = [(None, bytes(rng.randrange(256) for _ in range(1000)) * 100)]  # 100 KB records
        frames += [request(8, cid + i, part(BIG, 0, build_batch(big, base_timestamp=1_700_000_000_000)))
                   for i in range(40)]
        stream = b"".join(frames)
        answers = [exchange(broker, stream, []) for broker in made]
        assert answers[0] == answers[1]
        assert partition_files(made[0]) == partition_files(made[1])
        for broker in made:  # a first fetch of each partition is Python's, and enters it in the compiled table
            for name, count in topics.items():
                for index in range(count):
                    exchange(broker, fetch_request(11, 1, [(name, [(index, 0, 1, -1)])]), [])
        yield tuple(made)
    finally:
        for broker in made:
            broker.stop()


def fetch_request(version, cid, topics, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1) -> bytes:
    """topics: [(topic, [(partition, fetch_offset, partition_max_bytes, current_leader_epoch)])]."""
    body = fetch.REQUEST(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                         isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
                         topics=[{"topic": t, "partitions": [
                             {"partition": p, "current_leader_epoch": e, "fetch_offset": o, "log_start_offset": -1,
                              "partition_max_bytes": m} for p, o, m, e in ps]} for t, ps in topics],
                         forgotten_topics_data=[], rack_id="")
    return bytes(encode_request(RequestHeader(fetch.API_KEY, version, cid, "fetch-differential"), body))


def generated_fetches(rng, end: int) -> list[bytes]:
    """Fetches of f-one and f-three whose partitions end near `end` (60 batches of 1-5 records each)."""
    frames, cid = [], 1

    def offsets():
        return [0, rng.randrange(1, end // 2), rng.randrange(end // 2, end), end + 400, 10 ** 9]

    for version in range(4, 12):
        for offset in offsets():
            for pmb, max_bytes in ((1 << 20, 50 << 20), (100, 50 << 20), (1 << 20, 300), (0, 0), (-1, 1)):
                frames.append(fetch_request(version, cid, [(ONE, [(0, offset, pmb, -1)])], max_bytes=max_bytes))
                cid += 1
        spread = [(i, rng.choice(offsets()[:3]), rng.choice([50, 700, 1 << 20]), -1) for i in (2, 0, 1)]
        frames.append(fetch_request(version, cid, [(THREE, spread), (ONE, [(0, 0, 500, -1)])],
                                    max_bytes=rng.choice([900, 4000, 50 << 20])))
        frames.append(fetch_request(version, cid + 1, [(THREE, spread)], isolation_level=1))
        frames.append(fetch_request(version, cid + 2, [(ONE, [(0, 3, 1 << 20, rng.choice([-1, 0, 7]))])]))
        frames.append(fetch_request(version, cid + 3, [(ONE, [(0, 0, 1 << 20, -1)]), ("no-such-topic", [(0, 0, 10, -1)])]))
        frames.append(fetch_request(version, cid + 4, [(ONE, [(0, 1, 1 << 20, -1)])], session_id=5, session_epoch=2))
        frames += [fetch_request(version, cid + 5 + i, [(ROLLED, [(0, offset, rng.choice([100, 1 << 20]), -1)])])
                   for i, offset in enumerate(offsets()[:3])]  # older segments (Python's) and the active one
        cid += 8
    # long polls: min_bytes unmet parks (Python's), met answers at once
    frames.append(fetch_request(11, cid, [(ONE, [(0, 0, 1 << 20, -1)])], max_wait_ms=20, min_bytes=1 << 30))
    frames.append(fetch_request(11, cid + 1, [(ONE, [(0, 0, 1 << 20, -1)])], max_wait_ms=20, min_bytes=100))
    return frames


def answers_of(brokers, frames, rng):
    stream = b"".join(frames)
    chunks = chunking(rng, len(stream))
    return [exchange(broker, stream, chunks) for broker in brokers]


def compiled_count(broker) -> float:
    return scrape(broker).get("mmlog_processor_requests_compiled_total", 0)


def test_captured_consumer_fetches_get_the_same_answers(brokers):
    compiled, _ = brokers
    before = compiled_count(compiled)
    rng = random.Random(f"{SEED}-captured")
    first, second = answers_of(brokers, captured_fetch_frames(), rng)
    assert first == second
    assert compiled_count(compiled) > before


def test_generated_fetches_get_the_same_answers(brokers):
    compiled, python = brokers
    end = _log_end(brokers, ONE)
    before = compiled_count(compiled)
    rng = random.Random(f"{SEED}-generated")
    first, second = answers_of(brokers, generated_fetches(rng, end), rng)
    assert first == second
    assert compiled_count(compiled) > before
    assert compiled_count(python) == 0


def covered_fetches(rng, end: int) -> list[bytes]:
    """Fetches the compiled path answers itself: every version, offsets at 0, mid-batch and at the high
    watermark, partitions and responses cut by their limits, read_committed, min_bytes met at once."""
    frames, cid = [], 1
    for version in range(4, 12):
        for offset in (0, rng.randrange(1, end), end):
            for pmb, max_bytes in ((1 << 20, 50 << 20), (100, 50 << 20), (1 << 20, 300), (0, 0), (700, 1)):
                frames.append(fetch_request(version, cid, [(ONE, [(0, offset, pmb, -1)])], max_bytes=max_bytes,
                                            isolation_level=rng.choice([0, 1])))
                cid += 1
        spread = [(i, rng.randrange(0, end), rng.choice([50, 700, 1 << 20]), rng.choice([-1, 0])) for i in (2, 0, 1)]
        frames.append(fetch_request(version, cid, [(THREE, spread), (ONE, [(0, 0, 500, -1)])],
                                    max_bytes=rng.choice([900, 4000, 50 << 20]), max_wait_ms=500, min_bytes=10))
        cid += 1
    return frames


def test_covered_fetches_are_the_compiled_paths_and_get_the_same_answers(brokers):
    compiled, _ = brokers
    end = _log_end(brokers, ONE)
    rng = random.Random(f"{SEED}-covered")
    frames = covered_fetches(rng, end)
    before = compiled_count(compiled)
    first, second = [exchange(broker, b"".join(frames), []) for broker in brokers]
    assert first == second
    assert compiled_count(compiled) - before == len(frames)
    # Both brokers answered the same fetches so far: the same records counted out, the same requests
    scrapes = [scrape(broker) for broker in brokers]
    for name, labels in (("kafka_server_brokertopicmetrics_bytesout_total", {}),
                         ("kafka_network_requestmetrics_requests_total", {"request": "Fetch"})):
        assert scrapes[0].get(name, **labels) == scrapes[1].get(name, **labels) > 0, name


def _log_end(brokers, topic) -> int:
    """The topic's partition 0's high watermark, from a Fetch of its first batch (the answer's header),
    asked of both brokers (which so count the same bytes out)."""
    frame = fetch_request(4, 1, [(topic, [(0, 0, 1, -1)])])
    first, second = [exchange(broker, frame, []) for broker in brokers]
    assert first == second
    # size, correlation id, throttle, topic count, topic name, partition count, index, error, HW
    at = 4 + 4 + 4 + 4 + 2 + len(topic) + 4 + 4 + 2
    return struct.unpack_from(">q", first, at)[0]


def test_a_slow_reader_gets_a_large_answer_whole_and_in_order(brokers):
    """An answer of megabytes to a client that does not read at first: the socket takes a part, the rest
    (header bytes and file ranges) goes to Python's queue, and the bytes arrive as the Python path sends them."""
    answers = []
    frames = [fetch_request(11, 1 + i, [(BIG, [(0, 0, 8 << 20, -1)]), (ONE, [(0, 0, 1 << 20, -1)])])
              for i in range(3)]
    expected = len(frames)
    before = compiled_count(brokers[0])
    for broker in brokers:
        host, port = broker.bootstrap.rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect((host, int(port)))
        with sock:
            sock.sendall(b"".join(frames))
            time.sleep(0.5)  # the broker meets a full socket
            received = bytearray()
            while True:
                pos = count = 0
                while pos + 4 <= len(received):
                    size = struct.unpack_from(">i", received, pos)[0]
                    if pos + 4 + size > len(received):
                        break
                    pos += 4 + size
                    count += 1
                if count == expected:
                    break
                data = sock.recv(1 << 16)
                assert data, "the broker closed the connection"
                received += data
        answers.append(bytes(received))
    assert len(answers[0]) > 3 * 3_000_000
    assert answers[0] == answers[1]
    assert compiled_count(brokers[0]) - before == len(frames)  # answered in compiled code, finished by Python

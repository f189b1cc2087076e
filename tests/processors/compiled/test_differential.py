"""The compiled request path and the Python handlers are one behaviour: the same request streams
through a broker with each give the same response bytes and the same partition files.

Two brokers of one processor each, `compiled.request.path.enable` true and false, with the
same topics. Each stream goes to both on one connection each, cut into the same seeded chunks
(so frames split across reads and the compiled path hands connections to Python mid-frame),
and ends with an ApiVersions request whose answer says everything before it was answered.
Streams: the Produce frames captured from librdkafka and kafka-python (tests/fixtures/
client_frames), mmlog's own producer's, and generated ones: every version, acks 0, 1 and
all, several batches in one records field, several partitions, a pipelining producer's runs
to one partition (several requests in one read), and the error paths
(corrupt and truncated batches, bad magic, null records, unknown partitions, invalid acks,
a transactional id). Then every response byte is equal, and every segment, index and time
index file, and the state page but for its clock and sequence slots.
"""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path

import numpy as np
import pytest

from mmlog.client import Admin
from mmlog.log.state import (
    FLUSHED_AT_MS,
    LOCK_SLOTS,
    MAX_REPLICAS,
    PROGRESS,
    PROGRESS_WIDTH,
    ROLLED_AT_MS,
    SEQ,
    STATE_FILE,
)
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import api_versions, produce
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, scrape
from tools.fuzz_frames import CORPUS, api_key, read_frames

SEED = 7
ONE, THREE = "one", "three"  # a one-partition topic, a three-partition one
MANY, MANY_PARTITIONS = "many", 300  # a keyed producer's topic: each request names many of its partitions
TOPIC_CONFIG = {"index.interval.bytes": "300"}  # index entries every few batches: the index is compared too
SENTINEL = 0x5E5E
# The state page's clock slots (and its seqlock's count, which a group commit moves less): not behaviour.
CLOCKS = [SEQ, FLUSHED_AT_MS, ROLLED_AT_MS] + [PROGRESS + PROGRESS_WIDTH * i + k for i in range(MAX_REPLICAS)
                                                for k in (1, 2)]  # a replica's last fetch and last caught up


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """(compiled, python): two brokers alike but for the compiled path, with the same topics."""
    made = []
    try:
        for enable in ("true", "false"):
            broker = EmbeddedBroker(tmp_path_factory.mktemp(f"compiled-{enable}"), processors=1,
                                    config={**METRICS_ON, "compiled.request.path.enable": enable}).start()
            made.append(broker)
            with Admin(broker.bootstrap) as admin:
                admin.create_topic(ONE, 1, TOPIC_CONFIG)
                admin.create_topic(THREE, 3, TOPIC_CONFIG)
                admin.create_topic(MANY, MANY_PARTITIONS, {**TOPIC_CONFIG, "segment.index.bytes": "16384"})  # compared whole
                for name in captured_topics():
                    admin.create_topic(name, 1, TOPIC_CONFIG)
        yield tuple(made)
    finally:
        for broker in made:
            broker.stop()


def captured_topics() -> set[str]:
    from mmlog.protocol import decode_request
    names = set()
    for frame in captured_produce_frames():
        _, body = decode_request(frame[4:])
        names |= {t.name for t in body.topic_data}
    return names - {ONE, THREE}


def captured_produce_frames() -> list[bytes]:
    frames = []
    for path in sorted(Path(CORPUS).glob("*producer*.frames")) + sorted(Path(CORPUS).glob("*1.1.frames")):
        frames += [f for f in read_frames(path.read_bytes()) if api_key(f) == produce.API_KEY]
    return frames


def request(version, correlation_id, topic_data, acks=1, transactional_id=None, client_id="differential"):
    return bytes(encode_request(RequestHeader(produce.API_KEY, version, correlation_id, client_id),
                                produce.REQUEST(transactional_id=transactional_id, acks=acks, timeout_ms=3000,
                                                topic_data=topic_data)))


def part(topic, index, records):
    return [{"name": topic, "partition_data": [{"index": index, "records": records}]}]


def batch(rng, records=None):
    n = records or rng.randint(1, 5)
    return build_batch([(rng.choice([None, b"key"]), bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
                        for _ in range(n)])


def generated(rng) -> list[bytes]:
    """Every version and acks, then the error paths, interleaved with plain requests."""
    frames, cid = [], 1
    for version in range(3, 9):
        for acks in (1, 0, -1):
            for _ in range(3):
                frames.append(request(version, cid, part(ONE, 0, batch(rng)), acks))
                cid += 1
    corrupt = bytearray(batch(rng))
    corrupt[-1] ^= 0xFF
    bad_magic = bytearray(batch(rng))
    bad_magic[16] = 1
    odd = [
        part(ONE, 0, bytes(corrupt)), part(ONE, 0, bytes(bad_magic)), part(ONE, 0, batch(rng)[:-7]),
        part(ONE, 0, None), part(ONE, 0, b""), part(ONE, 5, batch(rng)), part("no-such-topic", 0, batch(rng)),
        part(ONE, 0, batch(rng) + batch(rng) + batch(rng)),  # several batches in one records field
        [{"name": THREE, "partition_data": [{"index": i, "records": batch(rng)} for i in range(3)]}],
        part(THREE, 1, batch(rng)) + part(ONE, 0, batch(rng)),
    ]
    for topic_data in odd:
        for version in (3, 8):
            frames.append(request(version, cid, topic_data))
            frames.append(request(version, cid + 1, part(ONE, 0, batch(rng))))
            cid += 2
    frames.append(request(8, cid, part(ONE, 0, batch(rng)), acks=2))
    frames.append(request(8, cid + 1, part(ONE, 0, batch(rng)), transactional_id="txn"))
    frames += [request(8, cid + 2 + i, part(THREE, i % 3, batch(rng)), acks=(1, -1)[i % 2]) for i in range(30)]
    return frames


def keyed(rng) -> list[bytes]:
    """What a keyed producer sends: one small batch for each of many partitions in every request."""
    return [request(8, 2000 + i, [{"name": MANY, "partition_data": [
        {"index": p, "records": batch(rng, rng.randint(1, 2))}
        for p in sorted(rng.sample(range(MANY_PARTITIONS), rng.randint(65, MANY_PARTITIONS)))]}])
        for i in range(12)]


def pipelined(rng) -> list[bytes]:
    """A pipelining producer's requests: runs to one partition that a read takes several of at a time, acks 1
    and 0 and every version, each run ended by a corrupt batch, a request to another partition or an acks=all
    one."""
    corrupt = bytearray(batch(rng))
    corrupt[-1] ^= 0xFF
    frames, cid = [], 3000
    for run in range(9):
        for _ in range(rng.randint(2, 24)):
            frames.append(request(3 + cid % 6, cid, part(ONE, 0, batch(rng)), acks=(1, 0)[run % 2]))
            cid += 1
        breaker = (part(ONE, 0, bytes(corrupt)), part(THREE, run % 3, batch(rng)), part(ONE, 0, batch(rng)))[run % 3]
        frames.append(request(8, cid, breaker, acks=-1 if run % 3 == 2 else 1))
        cid += 1
    return frames


def mmlog_producer_frames(rng) -> list[bytes]:
    """What mmlog's producer sends (its version, client id and batch shape), as its request encoder makes it."""
    from mmlog.client.produce_requests import PRODUCE_VERSION
    return [request(PRODUCE_VERSION, 1000 + i, part(ONE, 0, batch(rng, 10)), client_id="mmlog-producer")
            for i in range(40)]


def exchange(broker, stream: bytes, chunks: list[int]) -> bytes:
    """Send the stream in these chunk sizes, then the sentinel; every response byte up to the sentinel's."""
    with connect(broker) as sock:
        return round_trip(sock, stream, chunks)


def exchange_runs(broker, runs: list[bytes]) -> bytes:
    """Each run sent whole on one connection, after the answers to the one before it (so the connection is
    idle, and compiled code's, when the run comes): every response byte but the sentinels'."""
    with connect(broker) as sock:
        return b"".join(round_trip(sock, run, []) for run in runs)


def connect(broker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=20)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def round_trip(sock, stream: bytes, chunks: list[int]) -> bytes:
    at = 0
    for size in chunks:
        sock.sendall(stream[at:at + size])
        at += size
    sock.sendall(stream[at:])
    sock.sendall(encode_request(RequestHeader(api_versions.API_KEY, 0, SENTINEL, "differential"),
                                api_versions.REQUEST()))
    received = bytearray()
    while True:
        pos = 0
        while pos + 4 <= len(received):  # walk the whole frames received so far
            size = struct.unpack_from(">i", received, pos)[0]
            if pos + 4 + size > len(received):
                break
            if struct.unpack_from(">i", received, pos + 4)[0] == SENTINEL:
                assert pos + 4 + size == len(received), "an answer came after the sentinel's"
                return bytes(received[:pos])
            pos += 4 + size
        data = sock.recv(1 << 16)
        assert data, "the broker closed the connection"
        received += data


def chunking(rng, total: int) -> list[int]:
    sizes, left = [], total
    while left > 0:
        size = rng.choice([1, 7, 64, 500, 4096, 20_000])
        sizes.append(min(size, left))
        left -= size
    return sizes


def partition_files(broker) -> dict[str, object]:
    """Segments, indexes, producer snapshots and the state page (but its clock slots) of every partition."""
    files = {}
    for state in Path(broker.data_dir).rglob(STATE_FILE):
        for path in sorted(state.parent.iterdir()):
            if path.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
                files[f"{state.parent.name}/{path.name}"] = path.read_bytes()
        slots = np.fromfile(state, dtype=np.int64)
        slots[CLOCKS] = 0
        slots[LOCK_SLOTS] = 0  # the writer lock: its run's epoch and the mutex's own words
        files[f"{state.parent.name}/{STATE_FILE}"] = slots.tolist()
    return files


STREAMS = {
    "librdkafka and kafka-python": lambda rng: captured_produce_frames(),
    "mmlog producer": mmlog_producer_frames,
    "generated": generated,
    "keyed over many partitions": keyed,
    "pipelined to one partition": pipelined,
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_request_stream_gets_the_same_answers_and_files_from_both_paths(brokers, name):
    compiled, python = brokers
    rng = random.Random(f"{SEED}-{name}")
    stream = b"".join(STREAMS[name](rng))
    chunks = chunking(rng, len(stream))
    answers = [exchange(broker, stream, chunks) for broker in brokers]
    assert answers[0] == answers[1]
    assert partition_files(compiled) == partition_files(python)


def test_runs_of_requests_that_each_arrive_in_one_read_get_the_same_answers_and_files(brokers):
    compiled, python = brokers
    rng = random.Random(f"{SEED}-runs")
    runs, run = [], []
    for frame in pipelined(rng):
        run.append(frame)
        if len(run) > 1 and api_key(frame) == produce.API_KEY and frame != run[0] and rng.random() < 0.15:
            runs.append(b"".join(run))
            run = []
    runs.append(b"".join(run))
    served = scrape(compiled).get("mmlog_processor_requests_compiled_total", 0)
    answers = [exchange_runs(broker, runs) for broker in brokers]
    assert answers[0] == answers[1]
    assert partition_files(compiled) == partition_files(python)
    assert scrape(compiled).get("mmlog_processor_requests_compiled_total", 0) > served + len(runs)


def test_the_compiled_path_served_requests_and_the_other_broker_none(brokers):
    compiled, python = brokers
    stream = b"".join(request(8, i, part(ONE, 0, batch(random.Random(i)))) for i in range(10))
    for broker in brokers:
        exchange(broker, stream, [])
    assert scrape(compiled).get("mmlog_processor_requests_compiled_total", 0) > 0
    assert scrape(python).get("mmlog_processor_requests_compiled_total", 0) == 0


def test_a_keyed_producers_requests_naming_hundreds_of_partitions_are_compiled(brokers):
    compiled, _ = brokers
    rng = random.Random("keyed, compiled")
    every = [{"name": MANY, "partition_data": [{"index": p, "records": batch(rng, 1)} for p in range(MANY_PARTITIONS)]}]
    exchange(compiled, request(8, 1, every), [])  # a partition's first append is Python's, which enters it
    before = scrape(compiled).get("mmlog_processor_requests_compiled_total", 0)
    frames = keyed(rng)
    exchange(compiled, b"".join(frames), [])
    assert scrape(compiled).get("mmlog_processor_requests_compiled_total", 0) - before == len(frames)

"""acks=all where followers are in the ISR: the compiled path appends and the answer waits for the followers
in Python's purgatory, one behaviour with the Python handlers' own.

Three brokers on ZooKeeper; brokers 0 and 2 serve with the compiled path, broker 1 without it. A topic of
three partitions, replicated three times, has one partition led by each broker: the same request streams
sent to the partition led by broker 0 and to the one led by broker 1 get the same answers (the partition
index aside) and leave the same segment and index files on every replica. Then what only a waiting answer
shows: it comes once the followers have the records (here, once the ISR drops a paused follower), and a
request whose timeout passes first is answered REQUEST_TIMED_OUT, by both paths alike.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path

import pytest

from mmlog.client import Admin
from mmlog.protocol import RequestHeader, decode_response, encode_request
from mmlog.protocol.messages import produce
from mmlog.protocol.records import build_batch
from mmlog.testing.cluster import REPLICATION, by_id, full_isr, leaders, three_brokers
from mmlog.testing.scrape import METRICS_ON, scrape
from mmlog.testing.wait import wait_for

TOPIC = "acks-all"
COMPILED, PYTHON = 0, 1  # broker ids
REQUEST_TIMED_OUT = 7


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper):
    """The three brokers and, for each broker id, the partition of TOPIC it leads."""
    connect = f"{zookeeper.connect}/mmlog-acks-all"
    with three_brokers(tmp_path_factory.mktemp("acks-all"), connect, **REPLICATION, **METRICS_ON,
                       own={PYTHON: {"compiled.request.path.enable": "false"}}) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic(TOPIC, 3, {"index.interval.bytes": "300"}, replication_factor=3)
        full_isr(brokers, TOPIC, 3)
        led = wait_for(lambda: (found := leaders(brokers[0].bootstrap, TOPIC)) and sorted(found) == [0, 1, 2]
                       and {broker: p for p, broker in enumerate(found)}, what="one partition led by each broker")
        yield brokers, led


def request(version: int, correlation_id: int, partitions: list[tuple[int, bytes]], acks: int = -1,
            timeout_ms: int = 10_000) -> bytes:
    topic_data = [{"name": TOPIC, "partition_data": [{"index": i, "records": r} for i, r in partitions]}]
    return bytes(encode_request(RequestHeader(produce.API_KEY, version, correlation_id, "acks-all"),
                                produce.REQUEST(transactional_id=None, acks=acks, timeout_ms=timeout_ms,
                                                topic_data=topic_data)))


def batch(rng: random.Random) -> bytes:
    return build_batch([(rng.choice([None, b"key"]), rng.randbytes(rng.randint(0, 300)))
                        for _ in range(rng.randint(1, 5))])


def stream(seed: str) -> list[tuple[int, int, int, bytes]]:
    """(version, correlation id, acks, records) of a seeded stream: every version with acks=all, acks=1
    between them, several batches in one records field, a corrupt batch (Python's answer)."""
    rng = random.Random(seed)
    items, cid = [], 1
    for version in range(3, 9):
        for acks in (-1, 1, -1):
            items.append((version, cid, acks, batch(rng)))
            cid += 1
    items.append((8, cid, -1, batch(rng) + batch(rng) + batch(rng)))
    corrupt = bytearray(batch(rng))
    corrupt[-1] ^= 0xFF
    items.append((8, cid + 1, -1, bytes(corrupt)))
    return items + [(7, cid + 2 + i, -1, batch(rng)) for i in range(20)]


def to(index: int, items: list[tuple[int, int, int, bytes]]) -> list[tuple[int, bytes]]:
    """(version, frame) of each item, to partition `index`."""
    return [(version, request(version, cid, [(index, records)], acks)) for version, cid, acks, records in items]


def connect(broker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=20)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_answers(sock, n: int) -> list[bytes]:
    """The next n response frames (their size prefixes taken off)."""
    received, frames = bytearray(), []
    while len(frames) < n:
        while len(received) >= 4 and len(received) >= 4 + (size := struct.unpack_from(">i", received)[0]):
            frames.append(bytes(received[4:4 + size]))
            del received[:4 + size]
        if len(frames) < n:
            data = sock.recv(1 << 16)
            assert data, "the broker closed the connection"
            received += data
    assert not received and len(frames) == n
    return frames


def read_answer(sock) -> bytes:
    return read_answers(sock, 1)[0]


def answers(broker, frames: list[tuple[int, bytes]], pipelined: bool) -> list:
    """The decoded answers, partition indexes blanked: awaited one at a time, or all sent at once."""
    with connect(broker) as sock:
        if pipelined:
            sock.sendall(b"".join(frame for _, frame in frames))
            raw = read_answers(sock, len(frames))
        else:
            raw = []
            for _, frame in frames:
                sock.sendall(frame)
                raw.append(read_answer(sock))
    decoded = []
    for (version, _), answer in zip(frames, raw):
        correlation_id, body = decode_response(produce.API_KEY, version, answer)
        for topic in body.responses:
            for p in topic.partition_responses:
                p.index = -1
        decoded.append((correlation_id, body))
    return decoded


def compiled_requests(broker) -> float:
    return scrape(broker).get("mmlog_processor_requests_compiled_total", 0)


def segment_files(broker, index: int) -> dict[str, bytes]:
    directory = Path(broker.data_dir) / f"{TOPIC}-{index}"
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())
            if p.suffix in (".log", ".index", ".timeindex")}


@pytest.mark.parametrize("pipelined", [False, True], ids=["awaited", "pipelined"])
def test_acks_all_streams_get_the_same_answers_and_files_from_both_paths(cluster, pipelined):
    brokers, led = cluster
    compiled, python = by_id(brokers, COMPILED), by_id(brokers, PYTHON)
    items = stream(f"acks-all-{pipelined}")
    before = compiled_requests(compiled)
    got = [answers(b, to(led[b.broker_id], items), pipelined) for b in (compiled, python)]
    assert got[0] == got[1]
    assert all(r.error_code == 0 for _, body in got[0][:18] for t in body.responses for r in t.partition_responses)
    assert compiled_requests(compiled) - before >= (1 if pipelined else 20)  # held answers among them
    assert compiled_requests(python) == 0
    wait_for(lambda: len({tuple(segment_files(b, led[owner.broker_id]).values())
                          for owner in (compiled, python) for b in brokers}) == 1,
             what="the same files on every replica of both partitions")


def test_an_acks_all_answer_waits_until_the_isr_is_only_those_that_have_the_records(cluster):
    brokers, led = cluster
    compiled = by_id(brokers, COMPILED)
    index = led[COMPILED]
    followers = [b for b in brokers if b is not compiled]
    before = compiled_requests(compiled)
    for follower in followers:
        follower.pause()
    try:
        with connect(compiled) as sock:
            started = time.monotonic()
            sock.sendall(request(8, 1, [(index, batch(random.Random(1)))], timeout_ms=30_000))
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                sock.recv(1)  # no follower has fetched it: no answer yet
            sock.settimeout(20)
            _, body = decode_response(produce.API_KEY, 8, read_answer(sock))
            waited = time.monotonic() - started
    finally:
        for follower in followers:
            follower.resume()
    [[result]] = [t.partition_responses for t in body.responses]
    assert result.error_code == 0
    # answered once the leader dropped the paused followers from the ISR (they fetch nothing for the lag time)
    assert waited >= REPLICATION["replica.lag.time.max.ms"] / 1000 * 0.9
    assert compiled_requests(compiled) == before + 1  # appended by compiled code, answered by Python
    full_isr(brokers, TOPIC, 3)


def test_an_acks_all_request_whose_timeout_passes_first_is_answered_request_timed_out_by_both(cluster):
    brokers, led = cluster
    full_isr(brokers, TOPIC, 3)
    records = batch(random.Random(2))
    results = []
    for leader in (by_id(brokers, COMPILED), by_id(brokers, PYTHON)):
        index = led[leader.broker_id]
        followers = [b for b in brokers if b is not leader]
        for follower in followers:
            follower.pause()
        try:
            with connect(leader) as sock:
                sock.sendall(request(8, 2, [(index, records)], timeout_ms=300))
                _, body = decode_response(produce.API_KEY, 8, read_answer(sock))
        finally:
            for follower in followers:
                follower.resume()
        [[result]] = [t.partition_responses for t in body.responses]
        results.append(result.error_code)
        full_isr(brokers, TOPIC, 3)
    assert results == [REQUEST_TIMED_OUT, REQUEST_TIMED_OUT]

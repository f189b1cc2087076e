"""Idempotent producers through the compiled request path and the Python handlers: the same request streams
give the same response bytes and the same partition files, producer snapshots included.

As test_differential.py: two brokers of one processor each, `compiled.request.path.enable` true and false,
each stream sent to both on one connection, cut into the same seeded chunks. Streams: librdkafka's
(confluent-kafka, enable.idempotence=True) and mmlog's own producer's (idempotence on), captured through a
recording proxy in front of a third broker and replayed; and generated ones: several producers interleaved,
a retried batch (a duplicate), sequences out of order, a fenced epoch, an unknown producer, a new epoch,
sequences wrapping at 2^31 (a producer state preloaded from a snapshot), compressed batches and batches of
producer id -1 in between (the Python path appends those), a request spanning partitions where one batch is
refused, and segments small enough to roll every few requests (each roll writes a producer snapshot).
Then one producer's batches over two connections to brokers of two processors, in turn: each processor
catches up from what the other appended.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path

import pytest

from mmlog.client import Admin
from mmlog.log.producer_state import ProducerState
from mmlog.log.transaction_state import PRODUCER_EXPIRATION_MS
from mmlog.protocol.messages import produce
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, scrape
from tests.processors.compiled.test_differential import (
    chunking,
    exchange,
    part,
    partition_files,
    request,
)
from tools.capture_frames import RecordingProxy, settle
from tools.fuzz_frames import api_key

SEED = 11
CAPTURED, GENERATED, WRAP = "idem", "idem-gen", "idem-wrap"
TOPIC_CONFIG = {"index.interval.bytes": "300", "segment.bytes": "6000"}  # index entries and rolls every few requests
WRAP_PID = 77
WRAP_AT = 2**31 - 7  # the preloaded producer's last sequence
COMPILED_TOTAL = "mmlog_processor_requests_compiled_total"


def make_topics(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(CAPTURED, 3, TOPIC_CONFIG)
        admin.create_topic(GENERATED, 2, TOPIC_CONFIG)
        admin.create_topic(WRAP, 1, TOPIC_CONFIG)


def preload_wrap(broker, now_ms: int) -> None:
    """A producer state at offset 0 of WRAP's partition (as a snapshot of an older segment would hold):
    WRAP_PID's last batch ends 7 sequences short of 2^31. No process has looked at the state yet."""
    directory = next(Path(broker.data_dir).rglob(f"{WRAP}-0"))
    state = ProducerState(directory)
    state.apply(WRAP_PID, 0, WRAP_AT - 3, WRAP_AT, 0, 3, now_ms)
    state.write_snapshot(0, now_ms, PRODUCER_EXPIRATION_MS)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """(compiled, python, captured streams)."""
    made = []
    proxy = RecordingProxy()
    now_ms = int(time.time() * 1000)  # one time for both brokers' preloaded state: their snapshots alike
    try:
        for enable in ("true", "false"):
            broker = EmbeddedBroker(tmp_path_factory.mktemp(f"idem-{enable}"), processors=1,
                                    config={**METRICS_ON, "compiled.request.path.enable": enable}).start()
            made.append(broker)
            make_topics(broker)
            preload_wrap(broker, now_ms)
        capture = EmbeddedBroker(tmp_path_factory.mktemp("idem-capture"), processors=1,
                                 config={"advertised.listeners": f"127.0.0.1:{proxy.port}"}).start()
        made.append(capture)
        proxy.start(("127.0.0.1", capture.port))  # before any client: the broker sends them to the proxy
        make_topics(capture)
        yield made[0], made[1], capture_streams(f"127.0.0.1:{proxy.port}", proxy)
    finally:
        proxy.stop()
        for broker in made:
            broker.stop()


def capture_streams(bootstrap: str, proxy: RecordingProxy) -> dict[str, list[bytes]]:
    """The Produce frames of librdkafka's and mmlog's idempotent producers, as they sent them."""
    from confluent_kafka import Producer as KafkaProducer

    from mmlog.client import Producer

    streams = {}
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
                              "batch.num.messages": 4, "compression.type": "none"})
    for i in range(240):
        producer.produce(CAPTURED, key=b"k%d" % (i % 5), value=b"librdkafka %d " % i * (1 + i % 7))
        producer.poll(0)
        if i % 40 == 39:
            producer.flush(20)  # awaited batches between pipelined ones
    assert producer.flush(20) == 0
    settle()
    streams["librdkafka"] = [f for f in proxy.take() if api_key(f) == produce.API_KEY]
    with Producer(bootstrap, enable_idempotence=True, linger_ms=2, max_batch_records=4) as mine:
        for i in range(240):
            mine.send(CAPTURED, value=b"mmlog %d " % i * (1 + i % 5), key=b"k%d" % (i % 3))
            if i % 40 == 39:
                mine.flush()
        mine.flush()
    settle()
    streams["mmlog producer"] = [f for f in proxy.take() if api_key(f) == produce.API_KEY]
    for name, frames in streams.items():
        assert len(frames) > 20, name
    return streams


def acks_of(frame: bytes) -> int:
    """A Produce v3-v8 request's acks: after the header's client id and the body's transactional id."""
    at = 12
    at += 2 + max(struct.unpack_from(">h", frame, at)[0], 0)
    at += 2 + max(struct.unpack_from(">h", frame, at)[0], 0)
    return struct.unpack_from(">h", frame, at)[0]


def exchange_awaited(broker, frames: list[bytes], rng) -> bytes:
    """Each frame sent (in one or two writes) and its answer read before the next (acks=0: none): the way an
    awaited client meets the broker, which keeps a connection on the compiled path between requests."""
    host, port = broker.bootstrap.rsplit(":", 1)
    received = bytearray()
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for frame in frames:
            cut = rng.randrange(1, len(frame)) if rng.random() < 0.3 else len(frame)
            sock.sendall(frame[:cut])
            sock.sendall(frame[cut:])
            if acks_of(frame) == 0:
                continue
            received += read_answer(sock)
    return bytes(received)


def read_answer(sock) -> bytes:
    """One whole response frame."""
    answer = bytearray()
    while len(answer) < 4 or len(answer) < 4 + struct.unpack_from(">i", answer)[0]:
        data = sock.recv(1 << 16)
        assert data, "the broker closed the connection"
        answer += data
    return bytes(answer)


def idempotent(rng, pid, epoch, seq, n=None, compression=0):
    n = n or rng.randint(1, 4)
    return build_batch([(rng.choice([None, b"key"]), rng.randbytes(rng.randint(0, 200))) for _ in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, compression=compression)


def generated(rng, base_pid: int = 0, wrap: bool = False) -> list[bytes]:
    """Producers interleaved (ids from base_pid), with every case producer_state.py decides, on two
    partitions, and (wrap) WRAP's producer across 2^31."""
    frames, cid = [], 1
    sent = {}  # (pid, partition) -> the batches sent, as sent
    seqs = {}  # (pid, partition) -> [epoch, next sequence]

    def send(pid, partition, kind="in order", acks=-1, topic=GENERATED):
        nonlocal cid
        epoch, seq = seqs.setdefault((pid, partition), [0, 0])
        if kind == "retry" and sent.get((pid, partition)):
            buf = rng.choice(sent[(pid, partition)][-5:])
        elif kind == "out of order":
            buf = idempotent(rng, pid, epoch, seq + 2)
        elif kind == "old epoch":
            buf = idempotent(rng, pid, epoch - 1, seq)
        elif kind == "new epoch late":
            buf = idempotent(rng, pid, epoch + 1, 3)
        else:
            if kind == "new epoch":
                epoch, seq = epoch + 1, 0
            n = rng.randint(1, 4)
            buf = idempotent(rng, pid, epoch, seq, n, compression=1 if kind == "compressed" else 0)
            seqs[(pid, partition)] = [epoch, (seq + n) % 2**31]
            sent.setdefault((pid, partition), []).append(buf)
        frames.append(request(rng.choice([3, 7, 8]), cid, part(topic, partition, buf), acks=acks))
        cid += 1

    kinds = ["in order"] * 12 + ["retry", "out of order", "compressed", "plain", "new epoch", "old epoch",
                                 "new epoch late", "unknown", "acks 1"]
    for step in range(260):
        pid, partition = base_pid + rng.choice([1, 2, 3]), rng.choice([0, 1])
        kind = rng.choice(kinds)
        if kind == "plain":
            frames.append(request(8, cid, part(GENERATED, partition, build_batch([(None, b"plain %d" % step)]))))
            cid += 1
        elif kind == "unknown":
            frames.append(request(8, cid, part(GENERATED, partition, idempotent(rng, 5000 + step, 0, 4))))
            cid += 1
        elif kind == "old epoch" and seqs.get((pid, partition), [0])[0] == 0:
            send(pid, partition, "new epoch")
        elif kind == "acks 1":
            send(pid, partition, acks=rng.choice([0, 1]))
        else:
            send(pid, partition, kind)
        if step % 37 == 0:  # one request for both partitions: all compiled, or (one refused) all Python's
            bufs = []
            for p in (0, 1):
                epoch, seq = seqs.setdefault((base_pid + 4, p), [0, 0])
                refused = p == 1 and step % 74 == 0
                bufs.append(idempotent(rng, base_pid + 4, epoch, seq + 7 if refused else seq, 2))
                if not refused:
                    seqs[(base_pid + 4, p)] = [epoch, seq + 2]
            topic_data = [{"name": GENERATED, "partition_data": [{"index": p, "records": b} for p, b in enumerate(bufs)]}]
            frames.append(request(8, cid, topic_data, acks=-1))
            cid += 1
    if wrap:
        seqs[(WRAP_PID, 0)] = [0, WRAP_AT + 1]
        for _ in range(6):  # across the wrap (a batch whose last sequence is below its first, or one from 0)
            send(WRAP_PID, 0, topic=WRAP)
        send(WRAP_PID, 0, "retry", topic=WRAP)
    return frames


# (frames, awaited): the captured streams and one generated stream awaited request by request (a connection
# then stays on the compiled path, which must serve most of it), one generated stream pipelined in chunks
# (frames split across reads; a handed-off connection stays Python's while it has bytes buffered)
STREAMS = {
    "librdkafka": (lambda rng, captured: captured["librdkafka"], True),
    "mmlog producer": (lambda rng, captured: captured["mmlog producer"], True),
    "generated, awaited": (lambda rng, captured: generated(rng, base_pid=0, wrap=True), True),
    "generated, pipelined": (lambda rng, captured: generated(rng, base_pid=100), False),
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_an_idempotent_stream_gets_the_same_answers_and_files_from_both_paths(brokers, name):
    compiled, python, captured = brokers
    make, awaited = STREAMS[name]
    rng = random.Random(f"{SEED}-{name}")
    frames = make(rng, captured)
    stream = b"".join(frames)
    chunks = chunking(rng, len(stream))
    served = scrape(compiled).get(COMPILED_TOTAL, 0)
    if awaited:
        seed = rng.random()
        answers = [exchange_awaited(broker, frames, random.Random(seed)) for broker in (compiled, python)]
    else:
        answers = [exchange(broker, stream, chunks) for broker in (compiled, python)]
    assert answers[0] == answers[1]
    files = partition_files(compiled)
    assert files == partition_files(python)
    assert any(name.endswith(".snapshot") and not name.endswith(f"{0:020d}.snapshot") for name in files)
    if awaited:  # most of it compiled: what Python answers is each partition's first producer batch, the
        # duplicates and refusals, compressed batches and rolls
        compiled_now = scrape(compiled).get(COMPILED_TOTAL, 0) - served
        assert compiled_now >= len(frames) // 2, (compiled_now, len(frames))
    assert scrape(python).get(COMPILED_TOTAL, 0) == 0


@pytest.fixture(scope="module")
def two_processor_brokers(tmp_path_factory):
    """(compiled, python) of two processors each: a producer's connections land on both."""
    made = []
    try:
        for enable in ("true", "false"):
            broker = EmbeddedBroker(tmp_path_factory.mktemp(f"idem2-{enable}"), processors=2,
                                    config={**METRICS_ON, "compiled.request.path.enable": enable}).start()
            made.append(broker)
            with Admin(broker.bootstrap) as admin:
                admin.create_topic(GENERATED, 1, TOPIC_CONFIG)
        yield tuple(made)
    finally:
        for broker in made:
            broker.stop()


def test_a_producers_batches_over_connections_to_two_processors_in_turn(two_processor_brokers):
    """Each processor appends some of one producer's batches: each catches up from what the other appended
    (the compiled one from the batch headers) and the answers and files are the Python path's."""
    rng = random.Random(SEED)
    frames, seq, epoch = [], 0, 0
    for i in range(240):
        kind = rng.choice(["in order"] * 8 + ["retry", "new epoch", "out of order"])
        if kind == "retry" and frames:
            frames.append(frames[-1 - rng.randrange(min(3, len(frames)))])
            continue
        if kind == "new epoch":
            epoch, seq = epoch + 1, 0
        n = rng.randint(1, 4)
        buf = idempotent(rng, 7, epoch, seq + (5 if kind == "out of order" else 0), n)
        frames.append(request(8, i, part(GENERATED, 0, buf), acks=-1))
        if kind != "out of order":
            seq += n
    served = scrape(two_processor_brokers[0]).get(COMPILED_TOTAL, 0)
    answers, files = [], []
    for broker in two_processor_brokers:
        host, port = broker.bootstrap.rsplit(":", 1)
        # two connections in a row: the acceptor hands them to the two processors in turn
        socks = [socket.create_connection((host, int(port)), timeout=20) for _ in range(2)]
        pick = random.Random(SEED + 1)  # the same connection for each frame on both brokers
        try:
            received = bytearray()
            for i, frame in enumerate(frames):
                sock = socks[(i // pick.choice([1, 1, 2])) % 2]  # mostly in turn, now and then twice on one
                sock.sendall(frame)
                received += read_answer(sock)
            answers.append(bytes(received))
        finally:
            for sock in socks:
                sock.close()
        files.append(partition_files(broker))
    assert answers[0] == answers[1]
    assert files[0] == files[1]
    assert scrape(two_processor_brokers[0]).get(COMPILED_TOTAL, 0) - served >= len(frames) // 2

"""Long polls in the compiled path: a consumer's Fetch that finds fewer than min_bytes waits in compiled code
until records come or max_wait_ms passes, and is answered as the Python purgatory answers its own.

Two brokers alike but for `compiled.request.path.enable`, one processor each (two for the wake across
processors), the same topic and the same records produced the same way. Each test does the same on both
and requires the same answer bytes; on the compiled broker the parked fetches are counted as compiled.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time

import pytest

from mmlog.client import Admin
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import api_versions, fetch, produce
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, scrape
from mmlog.testing.wait import wait_for

TOPIC = "long-polls"
BATCH = bytes(build_batch([(b"k", b"v" * 100)], base_timestamp=1_700_000_000_000))


@contextlib.contextmanager
def pair(tmp_path_factory, processors: int):
    """(compiled, python) with the topic; both stopped at the end."""
    made = []
    try:
        for enable in ("true", "false"):
            broker = EmbeddedBroker(tmp_path_factory.mktemp(f"long-poll-{enable}"), processors=processors,
                                    config={**METRICS_ON, "compiled.request.path.enable": enable}).start()
            made.append(broker)
            with Admin(broker.bootstrap) as admin:
                admin.create_topic(TOPIC, 1)
        yield tuple(made)
    finally:
        for broker in made:
            broker.stop()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """One processor each."""
    with pair(tmp_path_factory, 1) as made:
        yield made


class Peer:
    """A raw connection: frames out, whole answers in (kept in order)."""

    def __init__(self, broker) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.received = bytearray()

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def answered(self, within: float) -> bool:
        """Whether an answer (or part of one) arrives within `within` seconds."""
        return bool(self.received) or bool(select.select([self.sock], [], [], within)[0])

    def answer(self) -> bytes:
        while len(self.received) < 4 or len(self.received) < 4 + struct.unpack_from(">i", self.received)[0]:
            data = self.sock.recv(1 << 16)
            assert data, "the broker closed the connection"
            self.received += data
        size = 4 + struct.unpack_from(">i", self.received)[0]
        frame = bytes(self.received[:size])
        del self.received[:size]
        return frame

    def close(self) -> None:
        self.sock.close()


def fetch_frame(cid: int, offset: int, max_wait_ms: int, min_bytes: int = 1) -> bytes:
    body = fetch.REQUEST(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[{"topic": TOPIC, "partitions": [
                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                         forgotten_topics_data=[], rack_id="")
    return bytes(encode_request(RequestHeader(fetch.API_KEY, 11, cid, "long-poll"), body))


def produce_frame(cid: int) -> bytes:
    body = produce.REQUEST(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        {"name": TOPIC, "partition_data": [{"index": 0, "records": BATCH}]}])
    return bytes(encode_request(RequestHeader(produce.API_KEY, 8, cid, "long-poll"), body))


def produce_one(broker, cid: int) -> None:
    peer = Peer(broker)
    try:
        peer.send(produce_frame(cid))
        peer.answer()
    finally:
        peer.close()


def log_end(broker) -> int:
    """The partition's log end, from a fetch that does not wait (and enters it in the compiled table)."""
    peer = Peer(broker)
    try:
        peer.send(fetch_frame(1, 0, 0))
        answer = peer.answer()
    finally:
        peer.close()
    # v11 answer: size, correlation id, throttle, error, session id, topics count, name, partitions count, then
    # the partition: index int32, error int16, high watermark int64
    at = 4 + 4 + 4 + 2 + 4 + 4 + 2 + len(TOPIC) + 4 + 4 + 2
    return struct.unpack_from(">q", answer, at)[0]


def compiled_requests(broker) -> float:
    return scrape(broker).get("mmlog_processor_requests_compiled_total", 0)


def each(brokers, scenario) -> list:
    """The scenario's answers from each broker (it is given the broker and the partition's log end)."""
    return [scenario(broker, log_end(broker)) for broker in brokers]


def test_a_long_poll_is_answered_by_the_records_that_come(brokers):
    def scenario(broker, end):
        peer = Peer(broker)
        try:
            peer.send(fetch_frame(7, end, 10_000))
            assert not peer.answered(0.3)  # parked
            started = time.monotonic()
            produce_one(broker, 8)
            answer = peer.answer()
            assert time.monotonic() - started < 2.0  # the records woke it, not its wait
            return answer
        finally:
            peer.close()

    compiled = brokers[0]
    log_end(compiled)  # a partition's first fetch is Python's, and enters it in the compiled table
    before = compiled_requests(compiled)
    answers = each(brokers, scenario)
    assert answers[0] == answers[1]
    assert compiled_requests(compiled) - before == 3  # the fetch that does not wait, the produce, the parked one


def test_a_long_poll_whose_wait_passes_is_answered_empty_then(brokers):
    def scenario(broker, end):
        peer = Peer(broker)
        try:
            started = time.monotonic()
            peer.send(fetch_frame(9, end, 300))
            answer = peer.answer()
            assert 0.28 <= time.monotonic() - started < 2.0
            return answer
        finally:
            peer.close()

    answers = each(brokers, scenario)
    assert answers[0] == answers[1]


def test_min_bytes_waits_for_enough_records(brokers):
    def scenario(broker, end):
        peer = Peer(broker)
        try:
            peer.send(fetch_frame(11, end, 10_000, min_bytes=2 * len(BATCH) + 1))
            produce_one(broker, 12)
            produce_one(broker, 13)
            assert not peer.answered(0.3)  # two batches are not min_bytes
            produce_one(broker, 14)
            return peer.answer()
        finally:
            peer.close()

    answers = each(brokers, scenario)
    assert answers[0] == answers[1]


def test_a_request_behind_a_parked_fetch_is_answered_after_it(brokers):
    versions = bytes(encode_request(RequestHeader(api_versions.API_KEY, 3, 16, "long-poll"),
                                    api_versions.REQUEST(client_software_name="t", client_software_version="1")))

    def scenario(broker, end):
        peer = Peer(broker)
        try:
            peer.send(fetch_frame(15, end, 10_000))
            assert not peer.answered(0.2)
            peer.send(versions)
            assert not peer.answered(0.2)  # behind the parked fetch
            produce_one(broker, 17)
            return peer.answer(), peer.answer()
        finally:
            peer.close()

    answers = each(brokers, scenario)
    assert answers[0] == answers[1]
    assert struct.unpack_from(">i", answers[0][0], 4)[0] == 15  # the fetch first


def test_a_consumer_that_leaves_while_parked_costs_nothing_after(brokers):
    compiled = brokers[0]
    for _ in range(20):
        peer = Peer(compiled)
        peer.send(fetch_frame(18, log_end(compiled), 10_000))
        peer.close()
    scenario_answers = each(brokers, lambda broker, end: _awaited_fetch(broker, end))
    assert scenario_answers[0] == scenario_answers[1]
    wait_for(lambda: scrape(compiled).get("kafka_server_delayedoperationpurgatory_purgatorysize", 0) == 0,
             what="no fetch parked once their consumers left")


def _awaited_fetch(broker, end):
    peer = Peer(broker)
    try:
        peer.send(fetch_frame(19, max(end - 1, 0), 10_000))
        return peer.answer()
    finally:
        peer.close()


@pytest.fixture(scope="module")
def two_processors(tmp_path_factory):
    with pair(tmp_path_factory, 2) as made:
        yield made


def test_long_polls_on_both_processors_are_woken_by_one_produce(two_processors):
    def scenario(broker, end):
        peers = [Peer(broker) for _ in range(6)]  # spread over the two processors
        try:
            for i, peer in enumerate(peers):
                peer.send(fetch_frame(20 + i, end, 10_000))
            time.sleep(0.3)
            assert not any(peer.answered(0) for peer in peers)
            produce_one(broker, 30)
            return [peer.answer() for peer in peers]
        finally:
            for peer in peers:
                peer.close()

    answers = each(two_processors, scenario)
    assert answers[0] == answers[1]

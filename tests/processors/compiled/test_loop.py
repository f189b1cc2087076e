"""What the compiled loop owes the processor around it: activity that keeps a connection open, idleness that
closes it, a frame cut anywhere reaching the Python handlers whole and in order, and an idle processor that
wakes only when one of its Python phases is due."""

from __future__ import annotations

import os
import socket
import time

import pytest

from mmlog.client import Admin
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import metadata, produce
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, scrape

TOPIC = "loop"
IDLE_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("loop"), processors=1,
                        config={**METRICS_ON, "connections.max.idle.ms": IDLE_MS}) as b:
        with Admin(b.bootstrap) as admin:
            admin.create_topic(TOPIC, 1)
        yield b


def produce_frame(correlation_id: int) -> bytes:
    return bytes(encode_request(RequestHeader(produce.API_KEY, 8, correlation_id, "loop-test"), produce.REQUEST(
        acks=1, timeout_ms=3000, topic_data=[{"name": TOPIC, "partition_data": [
            {"index": 0, "records": build_batch([(None, b"v" * 100)])}]}])))


def connect(broker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def answer(sock) -> bytes:
    size = int.from_bytes(recv_exactly(sock, 4), "big")
    return recv_exactly(sock, size)


def recv_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def compiled_requests(broker) -> int:
    return scrape(broker).get("mmlog_processor_requests_compiled_total", 0)


def test_requests_served_by_compiled_code_keep_a_connection_open_past_the_idle_time(broker):
    sock = connect(broker)
    before = compiled_requests(broker)
    deadline = time.monotonic() + 2.5 * IDLE_MS / 1000
    n = 0
    while time.monotonic() < deadline:
        sock.sendall(produce_frame(n))
        assert int.from_bytes(answer(sock)[:4], "big") == n
        n += 1
        time.sleep(0.2)
    assert compiled_requests(broker) - before >= n - 1  # all but the first (which enters the partition)
    sock.close()


def test_a_connection_left_idle_is_closed_even_when_only_compiled_code_served_it(broker):
    sock = connect(broker)
    for i in range(3):
        sock.sendall(produce_frame(i))
        answer(sock)
    sock.settimeout(4 * IDLE_MS / 1000)
    assert sock.recv(1) == b""  # closed by the broker's idle reaper
    sock.close()


def test_a_frame_cut_byte_by_byte_and_a_python_request_behind_it_are_answered_in_order(broker):
    sock = connect(broker)
    sock.sendall(produce_frame(0))
    answer(sock)
    stream = produce_frame(1) + bytes(encode_request(RequestHeader(metadata.API_KEY, 4, 2, "loop-test"),
                                                     metadata.REQUEST(topics=[{"name": TOPIC}]))) + produce_frame(3)
    for i in range(len(stream)):
        sock.sendall(stream[i:i + 1])
        if i % 50 == 0:
            time.sleep(0.001)  # let the broker read the pieces apart
    assert [int.from_bytes(answer(sock)[:4], "big") for _ in range(3)] == [1, 2, 3]
    sock.close()


def turns(pid: int) -> int:
    """How many times the process's threads went to sleep of their own accord (their voluntary context
    switches): each is one wait that ended, so each is a wake. Preemption by other work on a loaded machine
    puts a thread on a CPU again too, but it is the scheduler's doing, not the processor's, so it is not counted."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches:"))
    return total


def test_an_idle_processor_wakes_when_its_python_phases_are_due_not_ten_times_a_second(broker):
    """Its catalogue check (every 0.5 s) and idle-connection reaping (every second) end the compiled loop's wait;
    nothing else does while no request comes, so it turns a few times a second (it turned ten times)."""
    (processor,) = broker.processor_pids()
    time.sleep(0.5)  # after the fixture's requests
    before, started = turns(processor), time.monotonic()
    time.sleep(3)
    per_second = (turns(processor) - before) / (time.monotonic() - started)
    assert per_second < 5, f"{per_second:.1f} turns a second while idle"

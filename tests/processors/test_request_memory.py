"""Request memory is bounded (queued.max.request.bytes): sockets that declare huge frames and send little
cost little, an exhausted pool stops reading sockets instead of allocating, and reading resumes when memory
comes back. Real broker processes; RSS read from /proc."""

import os
import select
import socket
import struct
import threading
from pathlib import Path

from mmlog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from mmlog.protocol.messages import metadata, produce
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, fetch_one
from mmlog.testing.wait import wait_for
from tests.processors.test_bad_input import produce_one, produce_request

MiB = 1 << 20


def broker_rss(broker) -> int:
    """Resident bytes of the broker: its main process and every processor (VmRSS summed, so pages
    shared between them count once per process: an upper bound)."""
    total = 0
    for pid in [broker.pid, *broker.processor_pids()]:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def open_socket(broker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def still_open(sock) -> bool:
    """The broker has not closed it (no EOF, no reset, nothing to read)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def push(sock, data) -> int:
    """Send what the kernel takes without blocking (the broker may not be reading); return how much."""
    view, sent = memoryview(data), 0
    sock.setblocking(False)
    try:
        while sent < len(view):
            sent += sock.send(view[sent:])
    except BlockingIOError:
        pass
    return sent


class Bystander:
    """A client producing and fetching back in a loop, counting round trips; it must see no error."""

    def __init__(self, broker, topic="bystander"):
        self.broker, self.topic = broker, topic
        self.round_trips = 0
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        wait_for(lambda: self.round_trips or self.errors, what="the bystander to get going")
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)
        assert not self.errors, self.errors

    def _run(self):
        try:
            with connect(self.broker) as conn:
                conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": self.topic}],
                                                                  allow_auto_topic_creation=True))
                offset = 0
                while not self.stop.is_set():
                    result = produce_one(conn, self.topic, 0, build_batch([(b"k", b"v" * 100)]))
                    assert result.error_code == 0
                    part = fetch_one(conn, self.topic, 0, offset)
                    assert part.error_code == 0 and len(part.records) > 0
                    offset += 1
                    self.round_trips += 1
        except Exception as exc:  # noqa: BLE001
            self.errors.append(exc)

    def wait_for_more(self, count=20, timeout=30):
        target = self.round_trips + count
        wait_for(lambda: self.round_trips >= target or self.errors, timeout, "the bystander's round trips",
                 show=lambda: self.round_trips)
        assert not self.errors, self.errors


def test_two_hundred_sockets_declaring_100_mib_frames_cost_only_their_staging_buffers(tmp_path):
    """Before the pool, each of these made a processor allocate its declared 100 MiB (20 took 2.45 GB)."""
    with EmbeddedBroker(tmp_path / "data", processors=2) as broker, Bystander(broker) as bystander:
        before = broker_rss(broker)
        hostile = []
        try:
            for _ in range(200):
                sock = open_socket(broker)
                sock.sendall(struct.pack(">i", 100 * MiB) + os.urandom(4096))
                hostile.append(sock)
            bystander.wait_for_more()  # every hostile byte sent before this has been read by now
            for _ in range(2):  # and on the other processor too: new connections go to each in turn
                with connect(broker) as conn:
                    conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[]))
            after = broker_rss(broker)
            assert all(still_open(s) for s in hostile)  # a frame in progress, not an error
            print(f"broker RSS {before / MiB:.0f} MiB -> {after / MiB:.0f} MiB with 200 hostile sockets")
            assert after < 600 * MiB
            assert after - before < 64 * MiB  # 200 staging buffers of 64 KiB are 12.5 MiB
        finally:
            for sock in hostile:
                sock.close()
        bystander.wait_for_more()


def produce_frame(topic: str, value_size: int, correlation_id: int = 7) -> bytes:
    """A whole Produce request frame (size prefix included) carrying one record of value_size bytes."""
    request = produce_request(topic, 0, build_batch([(None, os.urandom(value_size))]))
    return bytes(encode_request(RequestHeader(produce.API_KEY, 8, correlation_id, "big"), request))


def read_frame(sock, timeout, reader=None) -> bytes | None:
    """One response frame's body, or None if none starts arriving within timeout. Pass the same reader for
    every frame of a socket: one receive may carry the start of the next frame."""
    reader = reader or FrameReader()
    if not reader.queued and not reader.partial and not select.select([sock], [], [], timeout)[0]:
        return None
    sock.settimeout(30)
    while not reader.queued:
        target = reader.get_buffer()
        n = sock.recv_into(target)
        assert n, "the broker closed the connection"
        reader.buffer_updated(n)
    return bytes(reader.next_frame())


def test_an_exhausted_pool_stops_reading_and_reading_resumes_when_memory_comes_back(tmp_path):
    """Pool 8 MiB, frames up to 4 MiB: hostile sockets that send most of a 4 MiB frame and stall take it all.
    A well-behaved 4 MiB Produce then waits, unread (not refused, not allocated); once the hostile sockets
    close, it is read and answered on the same connection without being sent again."""
    config = {"socket.request.max.bytes": 4 * MiB, "queued.max.request.bytes": 8 * MiB,
              "message.max.bytes": 4 * MiB}
    with EmbeddedBroker(tmp_path / "data", processors=2, config=config) as broker:
        with connect(broker) as conn:
            conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "big"}],
                                                              allow_auto_topic_creation=True))
            assert produce_one(conn, "big", 0, build_batch([(None, b"warm")])).error_code == 0
        before = broker_rss(broker)
        honest = open_socket(broker)
        hostile = [open_socket(broker) for _ in range(4)]
        try:
            for sock in hostile:
                push(sock, struct.pack(">i", 4 * MiB) + bytes(4 * MiB - 64 * 1024))
            wait_for(lambda: any("request memory short" in line for line in broker.log_lines),
                     what="the broker to read what its pool lets it")
            frame = produce_frame("big", 4 * MiB - 1024)
            assert len(frame) <= 4 * MiB + 4
            sender = threading.Thread(target=honest.sendall, args=(frame,), daemon=True)
            sender.start()
            assert read_frame(honest, timeout=3) is None  # unread: the pool has no room for it
            held = broker_rss(broker) - before
            print(f"broker RSS {before / MiB:.0f} MiB -> +{held / MiB:.0f} MiB with the pool exhausted")
            assert held < (8 + 16) * MiB
        finally:
            for sock in hostile:
                sock.close()
        body = read_frame(honest, timeout=30)
        sender.join(10)
        assert body is not None
        correlation_id, response = decode_response(produce.API_KEY, 8, body)
        assert correlation_id == 7 and response.responses[0].partition_responses[0].error_code == 0
        wait_for(lambda: any("request memory available again" in line for line in broker.log_lines),
                 what="the pool to recover")
        # Resumed by the wake-up: the backstop (every 10 s) says so in the log when it is the one, before
        # the pool's recovery is logged.
        assert not [line for line in broker.log_lines if "resumed by the backstop" in line]
        honest.close()
        # The pool is whole again: another full-size request goes straight through.
        with connect(broker) as conn:
            result = produce_one(conn, "big", 0, build_batch([(None, os.urandom(4 * MiB - 1024))]))
            assert result.error_code == 0 and result.base_offset == 2
            assert len(fetch_one(conn, "big", 0, 1).records) > 4 * MiB - 1024


def test_the_pool_bounds_what_many_partly_sent_frames_take(tmp_path):
    """Sixty sockets each send 1 MiB of an 8 MiB frame and stall: the broker holds at most the 32 MiB pool
    for them (plus staging buffers), the rest wait unread; a small request still gets through once they go."""
    config = {"socket.request.max.bytes": 8 * MiB, "queued.max.request.bytes": 32 * MiB}
    with EmbeddedBroker(tmp_path / "data", processors=2, config=config) as broker:
        before = broker_rss(broker)
        hostile = [open_socket(broker) for _ in range(60)]
        try:
            for sock in hostile:
                push(sock, struct.pack(">i", 8 * MiB) + bytes(MiB))
            # 60 MiB offered to a 32 MiB pool: the broker has read all it will once the pool ran short.
            wait_for(lambda: any("request memory short" in line for line in broker.log_lines),
                     what="the pool to run short")
            after = broker_rss(broker)
            print(f"broker RSS {before / MiB:.0f} MiB -> {after / MiB:.0f} MiB with 60 sockets sending 1 MiB each")
            # 32 MiB of pool, 60 staging buffers (3.75 MiB), and room for one buffer copy per processor.
            assert after - before < (32 + 4 + 2 * 8 + 8) * MiB
        finally:
            for sock in hostile:
                sock.close()
        with connect(broker) as conn:
            conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "t"}], allow_auto_topic_creation=True))
            assert produce_one(conn, "t", 0, build_batch([(None, b"after")])).error_code == 0


def test_every_reserved_byte_comes_back(tmp_path):
    """Pool 8 MiB, frames up to 4 MiB: after a hundred connections that pipeline small requests, send big ones,
    send acks=0 ones and drop half-sent frames, a full-size frame still fits. A leak of 40 KB per connection
    would have filled the pool."""
    config = {"socket.request.max.bytes": 4 * MiB, "queued.max.request.bytes": 8 * MiB,
              "message.max.bytes": 4 * MiB}
    with EmbeddedBroker(tmp_path / "data", processors=2, config=config) as broker:
        with connect(broker) as conn:
            conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "leak"}],
                                                              allow_auto_topic_creation=True))
        small = produce_frame("leak", 100, correlation_id=1)
        big = produce_frame("leak", 1 * MiB, correlation_id=2)
        quiet = bytes(encode_request(RequestHeader(produce.API_KEY, 8, 3, "q"),
                                     produce_request("leak", 0, build_batch([(None, b"q")]), acks=0)))
        for i in range(100):
            with open_socket(broker) as sock:
                sock.sendall(small * 5 + quiet + big + small)
                reader = FrameReader()
                for _ in range(7):
                    assert read_frame(sock, timeout=30, reader=reader) is not None
                if i % 2:
                    sock.sendall(struct.pack(">i", 3 * MiB) + bytes(MiB))  # dropped mid-frame
        with connect(broker) as conn:
            result = produce_one(conn, "leak", 0, build_batch([(None, os.urandom(4 * MiB - 1024))]))
            assert result.error_code == 0

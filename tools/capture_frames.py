"""Capture real clients' request frames: the corpus the framer and decoder are fuzzed with.

    python tools/capture_frames.py [--out tests/fixtures/client_frames] [--per-api 24]

Starts a broker (EmbeddedBroker, loopback, temp dir) behind a recording TCP proxy on
127.0.0.1 (the broker advertises the proxy, so every connection a client opens goes
through it), then drives, one after the other:

  * confluent-kafka: AdminClient (create topics with configs, list, describe configs,
    delete), a producer per codec (none, gzip, snappy, lz4, zstd; idempotent), a
    consumer in a group (join, sync, heartbeat, commit, leave);
  * kafka-python: KafkaAdminClient (create, describe configs, list and describe groups,
    delete), a producer per codec it can load, a consumer in a group, and a producer and
    an assigning consumer pinned to Kafka 1.1's API versions (older Produce, Fetch, ...).

Each client's client->broker bytes are split into frames and saved to
``<out>/<client>-<role>.frames``: the frames exactly as on the wire (int32 size, then
header and body), concatenated, so a file is itself a valid request stream. At most
``--per-api`` frames of one API are kept per file (a polling consumer sends Fetch after
Fetch), which keeps the corpus a few hundred frames and well under 1 MiB.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from mmlog.protocol import FrameReader
from mmlog.testing import EmbeddedBroker

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "client_frames"
_SIZE = struct.Struct(">i")


class RecordingProxy:
    """A loopback TCP proxy that forwards both ways and records each client->broker frame."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self._frames: list[bytes] = []
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    def start(self, upstream: tuple[str, int]) -> "RecordingProxy":
        self.upstream = upstream
        self._spawn(self._accept)
        return self

    def take(self) -> list[bytes]:
        """The frames recorded since the last take (size prefix included), in arrival order."""
        with self._lock:
            frames, self._frames = self._frames, []
        return frames

    def stop(self) -> None:
        self.listener.close()
        for sock in list(self._socks):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(self.upstream)
            except OSError:  # the broker is stopping
                client.close()
                continue
            self._socks += [client, broker]
            self._spawn(self._pump, client, broker, True)
            self._spawn(self._pump, broker, client, False)

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        reader = FrameReader()
        try:
            while data := src.recv(65536):
                if record:
                    reader.feed(data)
                    with self._lock:
                        self._frames += [_SIZE.pack(len(f)) + bytes(f) for f in reader.pop_frames()]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def keep(frames: list[bytes], per_api: int) -> list[bytes]:
    """The frames in order, at most per_api of each api_key."""
    seen: Counter = Counter()
    kept = []
    for frame in frames:
        api_key = _SIZE.unpack_from(frame, 4)[0] >> 16
        seen[api_key] += 1
        if seen[api_key] <= per_api:
            kept.append(frame)
    return kept


def settle(seconds: float = 0.5) -> None:
    """Let a closed client's last frames pass the proxy before they are taken."""
    time.sleep(seconds)


# --- confluent-kafka -------------------------------------------------------------------------

def confluent_admin(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("ck-admin-a", num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"}),
              NewTopic("ck-admin-b", num_partitions=1, replication_factor=1),
              NewTopic("ck-records", num_partitions=2, replication_factor=1),  # the producers' topics
              NewTopic("kp-records", num_partitions=2, replication_factor=1)]
    for future in admin.create_topics(topics, operation_timeout=10).values():
        future.result(15)
    admin.list_topics(timeout=10)
    admin.list_topics("ck-admin-a", timeout=10)
    for future in admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-admin-a")]).values():
        future.result(15)
    for future in admin.delete_topics(["ck-admin-a", "ck-admin-b"], operation_timeout=10).values():
        future.result(15)


def confluent_producer(bootstrap: str) -> None:
    from confluent_kafka import Producer
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                             "enable.idempotence": codec != "none", "batch.num.messages": 6})
        for i in range(60):
            producer.produce("ck-records", key=b"k%d" % (i % 7), value=b"%s value %d " % (codec.encode(), i) * 3,
                             headers=[("n", b"%d" % i)])
            producer.poll(0)
        assert producer.flush(20) == 0


def confluent_consumer(bootstrap: str) -> None:
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe(["ck-records"])
    got, deadline = 0, time.monotonic() + 30
    while got < 300 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
            if got % 100 == 50:
                consumer.commit(asynchronous=False)
    consumer.commit(asynchronous=False)
    consumer.committed(consumer.assignment(), timeout=10)
    consumer.get_watermark_offsets(consumer.assignment()[0], timeout=10)
    idle = time.monotonic() + 2  # heartbeats and empty long polls
    while time.monotonic() < idle:
        consumer.poll(0.2)
    consumer.close()
    assert got == 300, got


# --- kafka-python ----------------------------------------------------------------------------

def kafka_python_codecs() -> list[str | None]:
    """The codecs kafka-python can load here (it needs a module per codec)."""
    from kafka.codec import has_gzip, has_lz4, has_snappy, has_zstd
    found = {"gzip": has_gzip(), "snappy": has_snappy(), "lz4": has_lz4(), "zstd": has_zstd()}
    return [None] + [codec for codec, ok in found.items() if ok]


def kafka_python_admin(bootstrap: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("kp-admin-a", 2, 1, topic_configs={"retention.ms": "3600000"}),
                         NewTopic("kp-admin-b", 1, 1)])
    admin.list_topics()
    admin.describe_topics(["kp-admin-a"])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin-a")])
    admin.list_groups()
    admin.describe_groups(["ck-group"])
    admin.list_group_offsets("ck-group")
    admin.delete_topics(["kp-admin-a", "kp-admin-b"])
    admin.close()


def kafka_python_producer(bootstrap: str) -> None:
    from kafka import KafkaProducer
    for codec in kafka_python_codecs():
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                                 batch_size=600)
        futures = [producer.send("kp-records", key=b"k%d" % (i % 7), value=b"%s value %d " % (
            str(codec).encode(), i) * 3, headers=[("n", b"%d" % i)]) for i in range(60)]
        producer.flush(20)
        for future in futures:
            future.get(10)
        producer.close(10)


def kafka_python_consumer(bootstrap: str) -> None:
    from kafka import KafkaConsumer
    consumer = KafkaConsumer("kp-records", bootstrap_servers=bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False, max_partition_fetch_bytes=2048,
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
    want, got, deadline = 60 * len(kafka_python_codecs()), 0, time.monotonic() + 30
    while got < want and time.monotonic() < deadline:
        got += sum(len(records) for records in consumer.poll(500).values())
        consumer.commit()
    consumer.close()
    assert got == want, got


def kafka_python_old(bootstrap: str) -> None:
    """A producer and an assigning consumer pinned to Kafka 1.1's versions (older Produce, Fetch, Metadata)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(1, 1), linger_ms=5, batch_size=512)
    for i in range(40):
        producer.send("kp-old", key=b"k%d" % i, value=b"old %d" % i, timestamp_ms=1_000_000 + i)
    producer.flush(20)
    producer.close(10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(1, 1), enable_auto_commit=False,
                             fetch_max_bytes=600, max_partition_fetch_bytes=300)
    tp = TopicPartition("kp-old", 0)
    consumer.assign([tp])
    consumer.offsets_for_times({tp: 1_000_020})
    consumer.beginning_offsets([tp])
    consumer.end_offsets([tp])
    consumer.seek_to_beginning(tp)
    got, deadline = 0, time.monotonic() + 20
    while got < 40 and time.monotonic() < deadline:
        got += sum(len(records) for records in consumer.poll(500).values())
    consumer.close()
    assert got == 40, got


SCENARIOS = [
    ("confluent-kafka-admin", confluent_admin),
    ("confluent-kafka-producer", confluent_producer),
    ("confluent-kafka-consumer", confluent_consumer),
    ("kafka-python-producer", kafka_python_producer),
    ("kafka-python-consumer", kafka_python_consumer),
    ("kafka-python-admin", kafka_python_admin),
    ("kafka-python-1.1", kafka_python_old),
]


def capture(out: Path, per_api: int) -> dict[str, int]:
    """Run every scenario through the proxy; write one file per scenario; return frames per file."""
    out.mkdir(parents=True, exist_ok=True)
    proxy = RecordingProxy()
    written = {}
    try:
        with EmbeddedBroker(processors=2, config={"advertised.listeners": f"127.0.0.1:{proxy.port}"}) as broker:
            proxy.start(("127.0.0.1", broker.port))
            bootstrap = f"127.0.0.1:{proxy.port}"
            for name, scenario in SCENARIOS:
                scenario(bootstrap)
                settle()
                frames = keep(proxy.take(), per_api)
                (out / f"{name}.frames").write_bytes(b"".join(frames))
                written[name] = len(frames)
    finally:
        proxy.stop()
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--per-api", type=int, default=40, help="frames of one API kept per file")
    args = parser.parse_args(argv)
    written = capture(args.out, args.per_api)
    total = sum((args.out / f"{name}.frames").stat().st_size for name in written)
    for name, count in written.items():
        print(f"{name}: {count} frames")
    print(f"{sum(written.values())} frames, {total} bytes in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

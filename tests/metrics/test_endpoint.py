"""The Prometheus endpoint of a real broker: counters move by exactly what clients did (mmlog's raw protocol
and confluent-kafka), histograms are well formed, partition and group gauges agree with ListOffsets and the
group's committed offsets, and a processor's death loses no count."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mmlog.client.admin import EARLIEST, LATEST, Admin
from mmlog.config.broker import parse_metrics_listen
from mmlog.protocol import records as rec
from mmlog.protocol.messages import fetch, metadata, produce
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import scrape, wait_for
from tests.client.consumer_tools import connect, create_topic, produce_batches, values

METRICS_ON = {"metrics.listen": "127.0.0.1:0", "auto.create.topics.enable": "false"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("metrics"), processors=2, config=METRICS_ON) as b:
        yield b


class Delta:
    """What changed between two scrapes."""

    def __init__(self, before, after) -> None:
        self.before, self.after = before, after

    def __call__(self, name: str, **labels) -> float:
        return self.after.get(name, **labels) - self.before.get(name, **labels)


def settled(broker):
    """A scrape once the request counts hold still for 50 ms: a processor counts a request when its answer
    is written whole, so a client that read the answer may scrape a moment before the count (on a loaded
    machine a processor can be descheduled between its send and the count)."""
    last = scrape(broker)
    deadline = time.monotonic() + 10
    while True:
        time.sleep(0.05)
        now = scrape(broker)
        if _requests(now) == _requests(last) or time.monotonic() > deadline:
            return now
        last = now


def _requests(s) -> dict:
    return {k: v for k, v in s.samples.items() if k[0] == "kafka_network_requestmetrics_requests_total"}


def around(broker, action) -> Delta:
    before = settled(broker)
    action()
    return Delta(before, settled(broker))


def test_produce_requests_bytes_and_messages_are_counted_exactly(broker):
    create_topic(broker, "counted")
    batches = [rec.build_batch(values(5, start=5 * i)) for i in range(4)]
    delta = around(broker, lambda: produce_batches(broker, "counted", 0, batches))
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == 4
    assert delta("kafka_server_brokertopicmetrics_bytesin_total") == sum(map(len, batches))
    assert delta("kafka_server_brokertopicmetrics_messagesin_total") == 20
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == 4


def test_pipelined_and_unanswered_produce_requests_are_each_counted(broker):
    create_topic(broker, "pipelined")
    batch = rec.build_batch(values(2))

    def send(acks: int, count: int) -> None:
        with connect(broker) as conn:
            for _ in range(count):  # sent back to back: the broker handles them as groups
                conn.send(produce.API_KEY, 8, produce.REQUEST(acks=acks, timeout_ms=5000, topic_data=[
                    {"name": "pipelined", "partition_data": [{"index": 0, "records": batch}]}]),
                    expect_response=acks != 0)
            for _ in range(count if acks else 0):
                conn.receive()

    before = settled(broker)
    send(1, 40)
    send(0, 5)
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    after = wait_for(broker, lambda s: s.get(messages) - before.get(messages) == 90)  # acks=0 sends no answer
    delta = Delta(before, after)
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == 45
    assert delta("kafka_network_requestmetrics_localtimems_count", request="Produce") == 45


def test_partition_gauges_match_list_offsets_and_the_segments(broker):
    create_topic(broker, "gauged", partitions=2)
    produce_batches(broker, "gauged", 1, [rec.build_batch(values(7))])
    s = scrape(broker)
    admin = Admin(broker.bootstrap)
    try:
        latest, earliest = admin.offsets("gauged", LATEST), admin.offsets("gauged", EARLIEST)
    finally:
        admin.close()
    for p in (0, 1):
        labels = {"topic": "gauged", "partition": p}
        assert s.get("kafka_log_log_highwatermark", None, **labels) == latest[p]
        assert s.get("kafka_log_log_logendoffset", None, **labels) == latest[p]
        assert s.get("kafka_log_log_logstartoffset", None, **labels) == earliest[p]
        assert s.get("kafka_log_log_numlogsegments", None, **labels) == 1
        assert s.get("kafka_cluster_partition_underreplicated", None, **labels) == 0
    assert latest[1] == 7
    directory = broker.data_dir / "gauged-1"
    on_disk = sum(f.stat().st_size for f in directory.glob("*.log"))
    assert s.get("kafka_log_log_size", None, topic="gauged", partition=1) == on_disk
    assert s.get("kafka_controller_kafkacontroller_activecontrollercount") == 1


def test_a_fetch_counts_the_record_bytes_it_sends(broker):
    create_topic(broker, "fetched")
    batches = [rec.build_batch(values(3, start=3 * i)) for i in range(3)]
    produce_batches(broker, "fetched", 0, batches)

    def fetch_all():
        with connect(broker) as conn:
            body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                topics=[{"topic": "fetched", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                              "partition_max_bytes": 1 << 20}]}]))
        assert body.responses[0].partitions[0].error_code == 0

    delta = around(broker, fetch_all)
    assert delta("kafka_server_brokertopicmetrics_bytesout_total") == sum(map(len, batches))
    assert delta("kafka_network_requestmetrics_requests_total", request="Fetch") == 1


def test_error_codes_are_counted_per_api(broker):
    create_topic(broker, "one-partition")

    def bad_requests():
        with connect(broker) as conn:
            body = conn.request(produce.API_KEY, 8, produce.REQUEST(
                acks=1, timeout_ms=5000, topic_data=[{"name": "one-partition", "partition_data": [
                    {"index": 7, "records": rec.build_batch(values(1))}]}]))
            assert body.responses[0].partition_responses[0].error_code == 3
            body = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "no-such-topic"}],
                                                                      allow_auto_topic_creation=False))
            assert body.topics[0].error_code == 3

    delta = around(broker, bad_requests)
    assert delta("kafka_network_requestmetrics_errors_total", request="Produce",
                 error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert delta("kafka_network_requestmetrics_errors_total", request="Metadata",
                 error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert delta("kafka_server_brokertopicmetrics_messagesin_total") == 0


def test_confluent_kafka_traffic_and_group_lag(broker):
    admin = Admin(broker.bootstrap)
    admin.create_topic("lagging", 1)
    before = settled(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(50):
        producer.produce("lagging", b"v%d" % i)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lag-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("lagging", 0, 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got += 1
        consumer.commit(offsets=[TopicPartition("lagging", 0, 30)], asynchronous=False)
    finally:
        consumer.close()
    after = settled(broker)
    delta = Delta(before, after)
    assert delta("kafka_server_brokertopicmetrics_messagesin_total") == 50
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert delta("kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
    assert delta("kafka_network_requestmetrics_requests_total", request="OffsetCommit") == 1
    assert delta("kafka_server_brokertopicmetrics_bytesout_total") > 0
    labels = {"consumergroup": "lag-group", "topic": "lagging", "partition": 0}
    assert after.get("kafka_consumergroup_current_offset", None, **labels) == 30
    assert after.get("kafka_consumergroup_lag", None, **labels) == 20
    try:
        offsets = admin.group_offsets("lag-group")
    finally:
        admin.close()
    assert [o.lag for o in offsets.values()] == [20]  # what `mmlog groups describe` prints


PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems", "totaltimems")


def _ms(delta: Delta, phase: str, request: str) -> tuple[float, float]:
    """(requests counted, summed ms) of one phase's histogram of one API, between two scrapes."""
    family = f"kafka_network_requestmetrics_{phase}"
    return delta(f"{family}_count", request=request), delta(f"{family}_sum", request=request)


def test_produce_requests_are_timed_in_every_phase_they_pass_through(broker):
    """Queue, local, send and total time for each Produce; no remote time (acks=1 waits for nothing); the
    phases add up to no more than the total."""
    create_topic(broker, "timed")
    before = settled(broker)
    produce_batches(broker, "timed", 0, [rec.build_batch(values(5, start=5 * i)) for i in range(6)])
    after = wait_for(broker, lambda s: s.get("kafka_network_requestmetrics_totaltimems_count", request="Produce")
                     - before.get("kafka_network_requestmetrics_totaltimems_count", request="Produce") == 6)
    delta = Delta(before, after)
    counts = {phase: _ms(delta, phase, "Produce") for phase in PHASES}
    assert {phase: n for phase, (n, _) in counts.items()} == {
        "requestqueuetimems": 6, "localtimems": 6, "remotetimems": 0, "responsesendtimems": 6, "totaltimems": 6}
    assert all(0 <= ms < 6 * 1000 for _, ms in counts.values()), counts  # six quick requests: under a second each
    parts = counts["requestqueuetimems"][1] + counts["localtimems"][1] + counts["responsesendtimems"][1]
    assert 0 < parts <= counts["totaltimems"][1] + 0.01, counts


def _fetch_request(topic: str, max_wait_ms: int, max_bytes: int, offset: int = 0):
    return fetch.REQUEST(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                         isolation_level=0, topics=[{"topic": topic, "partitions": [
                             {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}])


def test_a_parked_fetch_shows_its_wait_as_remote_time(broker):
    create_topic(broker, "parked")

    def wait_in_purgatory():
        with connect(broker) as conn:
            body = conn.request(fetch.API_KEY, 11, _fetch_request("parked", 400, 1 << 20))
        assert body.responses[0].partitions[0].records in (None, b"")

    delta = around(broker, wait_in_purgatory)
    count, remote = _ms(delta, "remotetimems", "Fetch")
    assert count == 1 and 350 <= remote <= 5000, remote
    count, total = _ms(delta, "totaltimems", "Fetch")
    assert count == 1 and total >= remote
    for phase in ("requestqueuetimems", "localtimems", "responsesendtimems"):
        count, ms = _ms(delta, phase, "Fetch")
        assert count == 1 and 0 <= ms < remote, (phase, ms)


def test_a_large_sendfile_fetch_to_a_slow_reader_shows_send_time(broker):
    """4 MB of records sent with sendfile to a client with a small receive window that waits a second
    before reading: the response is queued at once, and written whole only as the client reads."""
    from mmlog.protocol import RequestHeader, encode_request

    create_topic(broker, "sent-slowly")
    batches = [rec.build_batch([(None, os.urandom(10_000)) for _ in range(80)]) for _ in range(5)]
    produce_batches(broker, "sent-slowly", 0, batches)
    size = sum(map(len, batches))
    frame = encode_request(RequestHeader(fetch.API_KEY, 11, 1, "slow-reader"),
                           _fetch_request("sent-slowly", 0, 8 << 20))
    host, port = broker.bootstrap.rsplit(":", 1)

    def read_slowly():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
            sock.settimeout(30)
            sock.connect((host, int(port)))
            sock.sendall(frame)
            time.sleep(1.0)  # the broker has queued the response and filled what the socket buffers take
            got = 0
            while got < 4 or got < 4 + int.from_bytes(head, "big"):
                chunk = sock.recv(1 << 20)
                assert chunk, "the broker closed the connection"
                head = chunk[:4] if got == 0 else head
                got += len(chunk)
            assert got > size

    before = settled(broker)
    read_slowly()
    after = wait_for(broker, lambda s: s.get("kafka_network_requestmetrics_responsesendtimems_count", request="Fetch")
                     > before.get("kafka_network_requestmetrics_responsesendtimems_count", request="Fetch"))
    delta = Delta(before, after)
    count, send = _ms(delta, "responsesendtimems", "Fetch")
    assert count == 1 and 700 <= send <= 10_000, send
    count, total = _ms(delta, "totaltimems", "Fetch")
    assert count == 1 and total >= send
    assert _ms(delta, "localtimems", "Fetch")[1] < 500  # the handler only planned the file ranges


def test_histograms_are_well_formed(broker):
    s = scrape(broker)
    histograms = [name for name, kind in s.types.items() if kind == "histogram"]
    assert {f"kafka_network_requestmetrics_{phase}" for phase in PHASES} <= set(histograms)
    assert "kafka_log_logflushstats_logflushtimems" in histograms
    for name in histograms:
        by_labels: dict[frozenset, list] = {}
        for labels, value in s.series(f"{name}_bucket").items():
            le = dict(labels)["le"]
            by_labels.setdefault(labels - {("le", le)}, []).append((float(le), value))
        for labels, buckets in by_labels.items():
            buckets.sort()
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), (name, labels)  # cumulative
            assert math.isinf(buckets[-1][0])
            assert s.samples[(f"{name}_count", labels)] == counts[-1]
            assert s.samples[(f"{name}_sum", labels)] >= 0
    assert (s.get("kafka_network_requestmetrics_totaltimems_count", request="Produce")
            == s.get("kafka_network_requestmetrics_requests_total", request="Produce"))


def test_a_flush_per_message_lands_in_the_flush_histogram(broker):
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("flushed", 1, {"flush.messages": "1"})
    batches = [rec.build_batch(values(1, start=i)) for i in range(3)]
    delta = around(broker, lambda: produce_batches(broker, "flushed", 0, batches))
    assert delta("kafka_log_logflushstats_logflushtimems_count") >= 3  # one fsync per append at least
    assert delta("kafka_log_logflushstats_logflushtimems_sum") > 0


def test_other_paths_are_not_found(broker):
    from urllib.error import HTTPError

    from mmlog.testing.scrape import scrape_text
    with pytest.raises(HTTPError) as caught:
        scrape_text(broker, "/")
    assert caught.value.code == 404


def test_a_killed_processor_is_counted_and_no_count_is_lost(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=2, config=METRICS_ON) as broker:
        create_topic(broker, "survives")
        produce_batches(broker, "survives", 0, [rec.build_batch(values(2)) for _ in range(6)])
        before = settled(broker)
        victim = broker.processor_pids()[0]
        os.kill(victim, signal.SIGKILL)
        after = wait_for(broker, lambda s: s.get("mmlog_processor_restarts_total") == 1
                         and len(broker.processor_pids()) == 2 and victim not in broker.processor_pids())
        # The dead processor's counts were folded into the base region: every counter kept its value.
        for (name, labels), value in before.samples.items():
            if before.types.get(name.removesuffix("_total")) == "counter":
                assert after.samples[(name, labels)] >= value, name
        assert (after.get("kafka_network_requestmetrics_requests_total", request="Produce")
                == before.get("kafka_network_requestmetrics_requests_total", request="Produce"))
        assert (after.get("kafka_server_brokertopicmetrics_messagesin_total")
                == before.get("kafka_server_brokertopicmetrics_messagesin_total") == 12)
        produce_batches(broker, "survives", 0, [rec.build_batch(values(2))])
        s = scrape(broker)
        assert s.get("kafka_server_brokertopicmetrics_messagesin_total") == 14


def _listening_sockets(pid: int) -> int:
    """TCP sockets in LISTEN state that process `pid` holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    count += 1
    return count


def test_the_endpoint_is_off_by_default(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1) as broker:
        assert not any("metrics listening" in line for line in broker.log_lines)
        assert _listening_sockets(broker.pid) == 1  # the Kafka listener alone


def test_a_bare_port_listens_on_loopback_only(broker):
    from mmlog.testing.scrape import metrics_address
    assert metrics_address(broker)[0] == "127.0.0.1"


def _broker_command(tmp_path, *more) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmlog", "broker", "--data-dir", str(tmp_path / "data"),
                           "--listen", "127.0.0.1:0", "--processors", "1", *more],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("value", ["nonsense", "127.0.0.1:99999", "localhost:", ":", "[::1]:port"])
def test_a_bad_metrics_address_is_refused_in_one_line(tmp_path, value):
    done = _broker_command(tmp_path, "--override", f"metrics.listen={value}")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"mmlog: error: ConfigError: metrics.listen: {value!r} is invalid ([HOST:]PORT)"]


def test_a_metrics_port_in_use_stops_the_broker_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = _broker_command(tmp_path, "--metrics-listen", str(taken.getsockname()[1]))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mmlog: error:") and "in use" in last, done.stderr


@pytest.mark.parametrize("value, address", [
    ("", None), ("9404", ("127.0.0.1", 9404)), ("0.0.0.0:9404", ("0.0.0.0", 9404)), ("[::1]:0", ("::1", 0))])
def test_metrics_listen_values(value, address):
    assert parse_metrics_listen(value) == address


ROOT = Path(__file__).resolve().parents[2]


def _family_of(name: str, served: set) -> str:
    """The family a sample name belongs to (a gauge's own name may end in _count)."""
    if name in served:
        return name
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def test_the_dashboard_and_the_metrics_page_name_only_families_the_broker_serves(broker):
    served = set(scrape(broker).types)
    dashboard = json.loads((ROOT / "docs/grafana/mmlog.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    in_dashboard = {_family_of(n, served) for e in exprs for n in re.findall(r"\b(?:kafka|mmlog)_\w+", e)}
    assert in_dashboard and in_dashboard <= served, in_dashboard - served
    page = (ROOT / "docs/metrics.md").read_text()
    start = page.index("\n## The families\n")
    table = page[start:page.index("\n## ", start + 1)]
    named = {name for cell in re.findall(r"^\| (.+?) \|", table, flags=re.M)
             for name in re.findall(r"`([a-z_]+)`", cell)}
    assert {_family_of(n, served) for n in named} == served


def test_the_cleaners_figures_after_it_compacts_a_topic(tmp_path):
    config = {**METRICS_ON, "log.cleaner.backoff.ms": 100}
    with EmbeddedBroker(tmp_path / "data", processors=1, config=config) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("compacted", 1, {"cleanup.policy": "compact", "segment.bytes": "8192",
                                                "min.cleanable.dirty.ratio": "0.01"})
        batches = [rec.build_batch([(b"key-%d" % k, b"value-%d-%d" % (k, r) + b"." * 100) for k in range(10)])
                   for r in range(20)]
        produce_batches(broker, "compacted", 0, batches)
        s = wait_for(broker, lambda s: s.get("kafka_log_logcleaner_passes_total") >= 1, timeout=60)
        read, written = (s.get("kafka_log_logcleaner_bytes_read_total"),
                         s.get("kafka_log_logcleaner_bytes_written_total"))
        assert 0 < written < read  # duplicates of ten keys went
        assert s.get("kafka_log_logcleaner_cleaner_recopy_percent") == pytest.approx(100 * written / read)
        assert s.get("kafka_log_logcleaner_last_clean_time_secs") > 0
        assert s.get("kafka_log_logcleanermanager_dirty_ratio", None, topic="compacted", partition=0) is not None

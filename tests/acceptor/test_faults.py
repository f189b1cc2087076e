"""Killed processes: nothing acknowledged is lost, and the broker keeps (or comes back to) serving."""

import os
import re
import signal
import threading
import time

import pytest

from mmlog.client.connection import ConnectionClosed
from mmlog.errors import KafkaError
from mmlog.protocol.messages import metadata
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, read_all
from mmlog.testing.wait import wait_for
from tests.processors.test_bad_input import produce_one


class Load:
    """Producers that keep appending (acks=1) and remember what was acknowledged."""

    def __init__(self, broker, topic, producers=4):
        self.broker, self.topic = broker, topic
        self.acked: list[tuple[int, bytes]] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(producers)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _run(self, n):
        i = 0
        while not self.stop.is_set():
            try:
                with connect(self.broker) as conn:
                    while not self.stop.is_set():
                        value = b"producer-%d-%d" % (n, i)
                        result = produce_one(conn, self.topic, 0, build_batch([(None, value)]))
                        if result.error_code == 0:
                            with self.lock:
                                self.acked.append((result.base_offset, value))
                        i += 1
            except (ConnectionClosed, KafkaError, OSError):
                time.sleep(0.05)  # the broker or our processor went away: reconnect

    def wait_for(self, count, timeout=60):
        wait_for(lambda: len(self.acked) >= count, timeout, f"{count} acks", interval=0.01,
                 show=lambda: len(self.acked))


def assert_all_acked_present(broker, topic, acked):
    with connect(broker) as conn:
        records = read_all(conn, topic)
    by_offset = {r.offset: r.value for r in records}
    assert [r.offset for r in records] == list(range(len(records)))
    missing = [(o, v) for o, v in acked if by_offset.get(o) != v]
    assert not missing, missing[:5]


def create(broker, topic):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": topic}]))


def test_a_killed_processor_is_replaced_and_no_acknowledged_record_is_lost(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=2) as broker:
        create(broker, "victim")
        with Load(broker, "victim") as load:
            load.wait_for(500)
            before = broker.processor_pids()
            assert len(before) == 2
            os.kill(before[0], signal.SIGKILL)
            wait_for(lambda: len(broker.processor_pids()) == 2 and before[0] not in broker.processor_pids(),
                     what="the processor replaced", show=broker.processor_pids)
            settled = len(load.acked)
            load.wait_for(settled + 500)  # the broker keeps serving through the replacement
        assert_all_acked_present(broker, "victim", load.acked)
        assert any("died with signal SIGKILL; replacing it" in line for line in broker.log_lines)


def test_a_killed_broker_restarts_with_every_acknowledged_record(tmp_path):
    broker = EmbeddedBroker(tmp_path / "data", processors=2).start()
    try:
        create(broker, "crash")
        with Load(broker, "crash") as load:
            load.wait_for(1000)
            broker.kill()  # SIGKILL to the whole process group, mid-load
        acked = list(load.acked)
        broker.start()
        assert any("recovered=1" in line for line in broker.log_lines)
        assert_all_acked_present(broker, "crash", acked)
    finally:
        broker.stop()


def test_sigterm_exits_0_and_the_restart_skips_recovery(tmp_path):
    broker = EmbeddedBroker(tmp_path / "data", processors=2).start()
    try:
        create(broker, "clean")
        with connect(broker) as conn:
            for i in range(50):
                assert produce_one(conn, "clean", 0, build_batch([(None, b"%d" % i)])).error_code == 0
        assert broker.stop() == 0
        broker.log_lines.clear()
        broker.start()
        assert any("loaded partitions=1 recovered=0" in line for line in broker.log_lines), broker.log_lines
        with connect(broker) as conn:
            assert [r.value for r in read_all(conn, "clean")] == [b"%d" % i for i in range(50)]
    finally:
        broker.stop()


def test_sigterm_answers_requests_already_received(tmp_path):
    broker = EmbeddedBroker(tmp_path / "data", processors=1).start()
    try:
        create(broker, "inflight")
        conn = connect(broker)
        from mmlog.protocol.messages import produce

        for i in range(20):  # pipelined: all sent before the broker is told to stop
            conn.send(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=1000, topic_data=[
                {"name": "inflight", "partition_data": [{"index": 0, "records": build_batch([(None, b"x")])}]}]))
        os.kill(broker.pid, signal.SIGTERM)
        answers = [conn.receive() for _ in range(20)]
        assert all(a.responses[0].partition_responses[0].error_code == 0 for a in answers)
        conn.close()
        assert broker.proc.wait(30) == 0
    finally:
        broker.stop()


@pytest.mark.parametrize("bad", [["--override", "no.such.setting=1"], ["--processors", "zero"],
                                 ["--listen", "localhost"]])
def test_an_unknown_or_invalid_setting_is_a_one_line_start_up_error(tmp_path, bad):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mmlog", "broker", "--data-dir", str(tmp_path), *bad],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmlog: error:")


def test_a_processor_that_keeps_dying_is_restarted_ever_more_slowly_and_the_broker_keeps_serving(tmp_path):
    broker = EmbeddedBroker(tmp_path / "data", processors=1).start()
    try:
        restarts = re.compile(r"processor 0 \(pid \d+\) died with signal SIGKILL; replacing it in "
                              r"(?P<delay>[\d.]+) s \(death (?P<n>\d+) in a row\)")
        deadline = time.monotonic() + 60
        while len([line for line in broker.log_lines if restarts.search(line)]) < 6:
            assert time.monotonic() < deadline, "the processor was not restarted six times"
            assert broker.proc.poll() is None, "the broker gave up"
            for pid in broker.processor_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
        found = [restarts.search(line) for line in broker.log_lines if restarts.search(line)]
        assert [float(m["delay"]) for m in found[:6]] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]
        assert [int(m["n"]) for m in found[:6]] == [1, 2, 3, 4, 5, 6]
        # Left alone, the slot comes back after its backoff and the broker serves as before.
        deadline = time.monotonic() + 30
        while True:
            try:
                create(broker, "after")
                with connect(broker) as conn:
                    assert produce_one(conn, "after", 0, build_batch([(None, b"x")])).error_code == 0
                break
            except (ConnectionClosed, KafkaError, OSError, AssertionError):
                assert time.monotonic() < deadline, "the broker did not serve again"
                time.sleep(0.2)
        assert broker.proc.poll() is None
        assert broker.stop() == 0
    finally:
        broker.stop()

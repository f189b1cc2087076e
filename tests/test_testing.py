"""mmlog.testing: the `mmlog_broker` pytest fixture and EmbeddedBroker, used as another project would."""

import os
import signal
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from mmlog.testing import EmbeddedBroker


def test_the_mmlog_broker_fixture_serves_confluent_kafka(mmlog_broker):
    producer = Producer({"bootstrap.servers": mmlog_broker.bootstrap})
    for i in range(10):
        producer.produce("fixture", value=b"%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": mmlog_broker.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("fixture", 0, 0)])
    got = []
    while len(got) < 10:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None
        got.append(msg.value())
    consumer.close()
    assert got == [b"%d" % i for i in range(10)]


def test_embedded_broker_cleans_up_after_itself():
    with EmbeddedBroker(processors=1) as broker:
        data_dir = broker.data_dir
        assert data_dir.exists() and broker.proc.poll() is None
    assert broker.proc.returncode == 0
    assert not data_dir.exists()


def test_a_broker_stops_when_its_starting_process_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from mmlog.testing import EmbeddedBroker\n"
        f"b = EmbeddedBroker({str(tmp_path / 'data')!r}, processors=1).start()\n"
        "print(b.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    broker_pid = int(starter.stdout.readline())
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 20
    while True:
        try:
            os.kill(broker_pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the broker outlived its parent"
        time.sleep(0.1)


def test_a_zookeeper_stops_when_its_starting_process_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from mmlog.testing import ZooKeeperServer\n"
        f"z = ZooKeeperServer({str(tmp_path / 'zk')!r}).start()\n"
        "print(z.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    jvm_pid = int(starter.stdout.readline())
    starter.send_signal(signal.SIGKILL)  # as a crashed test process: no fixture teardown runs
    starter.wait()
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                os.kill(jvm_pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "ZooKeeper outlived the process that started it"
            time.sleep(0.1)
    finally:
        try:
            os.kill(jvm_pid, signal.SIGKILL)  # only if the assertion failed: the test stops what it started
        except ProcessLookupError:
            pass

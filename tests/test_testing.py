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
    assert _ends_with_its_starter(script), "the broker outlived its parent"


def test_a_zookeeper_stops_when_its_starting_process_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from mmlog.testing import ZooKeeperServer\n"
        f"z = ZooKeeperServer({str(tmp_path / 'zk')!r}).start()\n"
        "print(z.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    assert _ends_with_its_starter(script), "ZooKeeper outlived the process that started it"


def _ends_with_its_starter(script: str, seconds: float = 20.0) -> bool:
    """Run `script` (it prints the pid of what it starts), SIGKILL it as a crashed test process dies (no
    teardown runs), and say whether what it started ended within `seconds`; if not, it is killed here."""
    starter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(starter.stdout.readline())
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)  # the test stops what it started
    return False

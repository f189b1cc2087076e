"""A failure inside the main process is fatal, never a zombie: an essential thread that dies, or a control
thread that stops turning, ends the broker with exit code 1 and one line saying why, and a restart serves.
systemd's watchdog is fed only while the control thread turns.

Faults are injected as the broker allows under MMLOG_FAULT_INJECTION=1 (acceptor/liveness.py): SIGUSR2 makes
it raise InjectedFault (a BaseException, which no net contains) in the thread named in its data dir's
`inject-fault` file, or block the named loop for good."""

import os
import signal
import socket
import time

import pytest

from mmlog.acceptor.liveness import FAULT_FILE, FAULT_INJECTION_ENV
from mmlog.client import Consumer, Producer
from mmlog.testing import EmbeddedBroker
from mmlog.testing.wait import wait_for

CONFIG = {"metrics.listen": "127.0.0.1:0", "controlled.shutdown.timeout.ms": 2_000}
EXIT_S = 20  # how long a broker may take to stop after a failure (its stop ends itself after 15 s)


@pytest.fixture(autouse=True)
def fault_injection(monkeypatch):
    monkeypatch.setenv(FAULT_INJECTION_ENV, "1")


def inject(broker: EmbeddedBroker, what: str) -> None:
    (broker.data_dir / FAULT_FILE).write_text(what)
    os.kill(broker.pid, signal.SIGUSR2)


def exit_code(broker: EmbeddedBroker) -> int:
    return broker.proc.wait(EXIT_S)


def fatal_line(broker: EmbeddedBroker) -> str:
    lines = [line for line in broker.log_lines if "level=CRITICAL" in line and "stopping:" in line]
    assert len(lines) == 1, broker.log_lines[-20:]
    return lines[0]


def round_trip(broker: EmbeddedBroker, topic: str) -> None:
    with Producer(broker.bootstrap, acks="all") as producer:
        offset = producer.send(topic, b"after the restart", partition=0).get(timeout=30).offset
    consumer = Consumer(broker.bootstrap, auto_offset_reset="earliest")
    consumer.assign([(topic, 0)])
    deadline, got = time.monotonic() + 30, []
    while not got and time.monotonic() < deadline:
        got = [r for r in consumer.poll(timeout=0.5) if r.offset == offset]
    consumer.close()
    assert [r.value for r in got] == [b"after the restart"]


@pytest.mark.parametrize("thread", ["control-plane", "topic-worker", "txn-marker-sender", "web", "main"])
def test_a_thread_of_the_main_process_that_dies_stops_the_broker_with_one_line_and_a_restart_serves(tmp_path,
                                                                                                    thread):
    with EmbeddedBroker(tmp_path, processors=1, config=CONFIG) as broker:
        inject(broker, thread)
        assert exit_code(broker) == 1
        line = fatal_line(broker)
        if thread == "main":
            assert "the supervisor's loop died: InjectedFault" in line
        else:
            assert f"thread {thread} died: InjectedFault" in line
        assert not broker.processor_pids()  # its processors went with it
        broker.start()
        round_trip(broker, "served-again")


def test_a_control_thread_that_stops_turning_stops_the_broker(tmp_path):
    config = dict(CONFIG, **{"broker.stall.timeout.ms": 2_000})
    with EmbeddedBroker(tmp_path, processors=1, config=config) as broker:
        inject(broker, "stall:the control thread")
        assert exit_code(broker) == 1
        assert "the control thread has not turned for" in fatal_line(broker)
        broker.config["broker.stall.timeout.ms"] = 60_000
        broker.start()
        round_trip(broker, "served-again")


def test_systemds_watchdog_is_fed_while_the_control_thread_turns_and_not_once_it_stalls(tmp_path, monkeypatch):
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(address)
        notify.settimeout(30)
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        monkeypatch.setenv("WATCHDOG_USEC", "1000000")  # WatchdogSec=1: fed every half second
        config = dict(CONFIG, **{"broker.stall.timeout.ms": 6_000})
        with EmbeddedBroker(tmp_path / "d", processors=1, config=config) as broker:
            assert notify.recv(64) == b"READY=1"
            fed = [notify.recv(64) for _ in range(4)]
            assert fed == [b"WATCHDOG=1"] * 4
            inject(broker, "stall:the control thread")
            received = []  # until the broker says it is stopping (each recv has the socket's 30 s timeout)
            while not received or received[-1] != b"STOPPING=1":
                received.append(notify.recv(64))
            assert exit_code(broker) == 1
        # Fed a few times more at most (what was due before the stall took hold), then never again through
        # the stall's 6 s (a dozen feeds, had it gone on): systemd would have killed it after WatchdogSec,
        # seconds before the broker's own stall timeout stopped it.
        assert received[-1] == b"STOPPING=1" and set(received[:-1]) <= {b"WATCHDOG=1"}
        assert len(received) - 1 <= 4, received


def test_a_processor_whose_loop_stops_turning_is_killed_and_replaced(tmp_path):
    config = dict(CONFIG, **{"broker.stall.timeout.ms": 3_000})
    with EmbeddedBroker(tmp_path, processors=2, config=config) as broker:
        stuck = broker.processor_pids()[0]
        os.kill(stuck, signal.SIGSTOP)  # its loop turns no more; the rest of the broker does
        wait_for(lambda: stuck not in broker.processor_pids() and len(broker.processor_pids()) >= 2,
                 what="the stuck processor replaced", interval=0.1, show=lambda: broker.log_lines[-10:])
        assert any("has not turned for" in line and f"(pid {stuck})" in line for line in broker.log_lines)
        assert broker.proc.poll() is None
        round_trip(broker, "served-by-the-replacement")


def test_a_pause_of_the_whole_broker_is_not_taken_for_a_stall(tmp_path):
    config = dict(CONFIG, **{"broker.stall.timeout.ms": 2_000})
    with EmbeddedBroker(tmp_path, processors=1, config=config) as broker:
        pids = broker.processor_pids()
        broker.pause()  # every process of the broker, as a frozen machine
        time.sleep(6)
        broker.resume()
        round_trip(broker, "after-the-pause")
        assert broker.proc.poll() is None and broker.processor_pids() == pids
        wait_for(lambda: any("the broker was paused for" in line for line in broker.log_lines),
                 what="the pause logged")
        assert not [line for line in broker.log_lines if "level=CRITICAL" in line]

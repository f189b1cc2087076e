"""Mutants of real clients' request frames harm no one: the framer and decoder under fuzzing.

One broker for the module, with short timeouts. A producer and a consumer (mmlog's own
client) work beside it the whole time, while 2,000 seeded mutants of the frames in
tests/fixtures/client_frames (tools/fuzz_frames.py) reach the broker on many connections,
in batches. After each batch the broker runs with the same processor pids and answers on
new connections; at the end every record the producer got acknowledged is read back
exactly once, in order, no connection is left open, and Metadata, Produce and Fetch
still work.
"""

import collections
import os
import signal
import threading
import time

import pytest

from mmlog.acceptor.liveness import FAULT_FILE, FAULT_INJECTION_ENV
from mmlog.client import Admin, Consumer, Producer
from mmlog.protocol import decode_request_body, is_supported, parse_request_header
from mmlog.testing import EmbeddedBroker
from tools.fuzz_frames import EXCLUDED_APIS, Health, Mutator, api_key, load_corpus, send_cases
from mmlog.testing.wait import wait_for

SEED = 16  # any fixed seed makes a failure replayable
CASES, BATCH = 2_000, 200
TOPIC = "fuzz-bystander"
CONFIG = {"connections.max.idle.ms": 5_000, "controlled.shutdown.timeout.ms": 5_000,
          "group.initial.rebalance.delay.ms": 0, "group.max.session.timeout.ms": 30_000}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("fuzz"), processors=2, config=CONFIG) as b:
        yield b


@pytest.fixture(scope="module")
def topic(broker):
    """The bystanders' topic: one partition, so their records have one order."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=1)
    return TOPIC


def open_sockets(pid: int) -> int:
    """Sockets a process holds (its connections, and its channels to the main process)."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            pass
    return sum(link.startswith("socket:") for link in links)


class Bystanders:
    """A producer sending numbered records and a consumer reading them back, each in its own thread.

    Both clients are made before the threads start: a fresh checkout compiles the consumer's numba
    kernels on the first Consumer (seconds holding the GIL), which must not count against the producer.
    """

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.acked: list[tuple[int, int]] = []  # (offset, number) of each acknowledged record
        self.read: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []

    def __enter__(self) -> "Bystanders":
        self.producer = Producer(self.bootstrap, acks="all", linger_ms=2, request_timeout_ms=10_000)
        self.consumer = Consumer(self.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100)
        self.consumer.assign([(TOPIC, 0)])
        self.threads = [threading.Thread(target=self._guard, args=(f,)) for f in (self._produce, self._consume)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        self.producer.close()
        self.consumer.close()

    def _guard(self, run) -> None:
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - the test reports it
            self.errors.append(exc)

    def _produce(self) -> None:
        n = 0
        while not self.stop.is_set():
            futures = [(n + i, self.producer.send(TOPIC, b"%08d" % (n + i), partition=0)) for i in range(20)]
            for number, future in futures:
                self.acked.append((future.get(timeout=20).offset, number))
            n += len(futures)
            time.sleep(0.01)

    def _consume(self) -> None:
        while not (self.stop.is_set() and self._caught_up()):
            self.read += [(r.offset, int(r.value)) for r in self.consumer.poll(timeout=0.2)]

    def _caught_up(self) -> bool:
        return not self.acked or (self.read and self.read[-1][0] >= self.acked[-1][0])


def test_the_corpus_is_real_clients_requests_that_decode():
    corpus = load_corpus()
    assert 150 <= len(corpus) and sum(map(len, corpus)) < 1 << 20
    apis = collections.Counter(api_key(frame) for frame in corpus)
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 20, 22, 32} <= set(apis)  # Produce ... DescribeConfigs
    assert not set(apis) & set(EXCLUDED_APIS)
    for frame in corpus:
        header, offset = parse_request_header(memoryview(frame)[4:])
        if is_supported(header.api_key, header.api_version):
            decode_request_body(header, memoryview(frame)[4:], offset)
        else:  # kafka-python asks ApiVersions v4 first, and is answered in v0 to retry with v3
            assert (header.api_key, header.api_version) == (18, 4)


def test_mutants_are_seeded_and_cover_every_kind_of_mutation():
    corpus = load_corpus()
    mutator, same, other = Mutator(SEED), Mutator(SEED), Mutator(SEED + 1)
    cases = [mutator.case(corpus) for _ in range(500)]
    assert cases == [same.case(corpus) for _ in range(500)] != [other.case(corpus) for _ in range(500)]
    hows = " ".join(c.how for c in cases)
    for kind in ("bit_flip@", "byte@", ">h@", ">i@", "truncate@", "extend+", "dup[", "del[", "size=", "cut@",
                 "stream "):
        assert kind in hows, kind
    assert any(c.data not in corpus for c in cases)


def test_mutants_kill_no_processor_and_bystanders_lose_nothing(broker, topic):
    address = ("127.0.0.1", broker.port)
    health = Health(broker)
    assert len(health.pids) == 2
    sockets = {pid: open_sockets(pid) for pid in health.pids}
    mutator, corpus = Mutator(SEED), load_corpus()
    outcomes = collections.Counter()
    with Bystanders(broker.bootstrap) as bystanders:
        for done in range(0, CASES, BATCH):
            batch = [mutator.case(corpus) for _ in range(BATCH)]
            outcomes.update(send_cases(address, batch))
            assert health.problems() == [], f"after {done + BATCH} cases (seed {SEED})"
            assert not bystanders.errors
        before_end = len(bystanders.acked)
    assert not bystanders.errors, bystanders.errors
    assert outcomes["closed"] > CASES // 3 and outcomes["refused"] == 0  # most mutants are refused by closing
    assert before_end > 100  # the producer worked during the fuzzing, not only after it
    assert bystanders.read == bystanders.acked  # each acknowledged record once, in order, nothing else
    assert [n for _, n in bystanders.read] == list(range(len(bystanders.read)))
    deadline = time.monotonic() + 5  # the last closes reach the processors
    while any(open_sockets(pid) > n for pid, n in sockets.items()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(open_sockets(pid) <= n for pid, n in sockets.items()), "connections left open"


def test_after_the_fuzzing_the_broker_serves_metadata_produce_and_fetch(broker, topic):
    with Admin(broker.bootstrap) as admin:
        end = admin.latest_offsets(TOPIC)[0]  # Metadata and ListOffsets
    with Producer(broker.bootstrap) as producer:
        assert producer.send(TOPIC, b"after", partition=0).get(timeout=10).offset == end
    consumer = Consumer(broker.bootstrap)
    consumer.assign([(TOPIC, 0)])
    consumer.seek((TOPIC, 0), end)
    deadline, got = time.monotonic() + 10, []
    while not got and time.monotonic() < deadline:
        got = consumer.poll(timeout=0.5)
    consumer.close()
    assert [r.value for r in got] == [b"after"]
    assert Health(broker).problems() == []
    assert broker.stop() == 0  # and it still stops cleanly



def test_the_health_check_sees_a_processor_die_and_a_broker_that_does_not_answer(tmp_path):
    """The instrument of the fuzz test works: a replaced processor and a stopped broker are findings."""
    with EmbeddedBroker(tmp_path, processors=2, config=CONFIG) as broker:
        health = Health(broker)
        assert health.problems() == []
        os.kill(health.pids[0], signal.SIGKILL)
        wait_for(lambda: len(broker.processor_pids()) >= 2 and health.pids[0] not in broker.processor_pids(),
                 what="the processor replaced", show=broker.processor_pids)
        assert health.problems()[0].startswith("processor pids")
        health.reset()
        assert health.problems() == []
        os.kill(broker.pid, signal.SIGSTOP)  # wedged: accepts nothing, answers nothing
        try:
            assert "broker does not answer ApiVersions" in health.problems(probes=1)
        finally:
            os.kill(broker.pid, signal.SIGCONT)


def test_the_health_check_sees_a_zombie_whose_control_plane_stopped_answering(tmp_path, monkeypatch):
    """A broker whose processors answer ApiVersions while its control thread is stuck is a finding too."""
    monkeypatch.setenv(FAULT_INJECTION_ENV, "1")
    with EmbeddedBroker(tmp_path, processors=1, config=CONFIG) as broker:
        health = Health(broker)
        assert health.problems() == []
        (broker.data_dir / FAULT_FILE).write_text("stall:the control thread")
        os.kill(broker.pid, signal.SIGUSR2)
        assert health.problems(probes=1) == ["the control plane does not answer ListGroups"]
        broker.kill()

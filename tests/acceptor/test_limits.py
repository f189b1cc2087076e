"""Bounded resources: partition counts are checked before anything is made, a creation
that fails leaves nothing behind, the main process holds a bounded number of descriptors, and
auto-creating thousands of topics neither refuses later work nor stalls group heartbeats."""

from __future__ import annotations

import collections
import functools
import multiprocessing
import os
import sys
import time

import pytest

from mmlog.protocol.messages import create_topics, metadata
from mmlog.testing import EmbeddedBroker, connections
from tests.coordinator.conftest import FAST_GROUPS, RawMember

NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 0, 3, 5
INVALID_PARTITIONS, POLICY_VIOLATION, KAFKA_STORAGE_ERROR = 37, 44, 56


connect = functools.partial(connections.connect, timeout=60)


def create(conn, *topics, validate_only=False) -> dict:
    """{name: (error code, message)} for CreateTopics of (name, partitions) pairs."""
    r = conn.request(create_topics.API_KEY, 4, create_topics.REQUEST(
        topics=[{"name": n, "num_partitions": p, "replication_factor": 1} for n, p in topics],
        timeout_ms=60_000, validate_only=validate_only))
    return {t.name: (t.error_code, t.error_message) for t in r.topics}


def partition_dirs(broker) -> list[str]:
    return sorted(e.name for e in os.scandir(broker.data_dir) if e.is_dir())


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def produce_to_each(conn, topic: str, n: int, value) -> list[tuple[int, int, int]]:
    """One Produce of a one-record batch to each of partitions 0..n-1 (`value(p)`); (index, error, base) each."""
    from mmlog.protocol.messages import produce
    from mmlog.protocol.records import build_batch

    r = conn.request(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=10_000, topic_data=[
        {"name": topic, "partition_data": [{"index": p, "records": build_batch([(None, value(p))])}
                                           for p in range(n)]}]))
    return [(x.index, x.error_code, x.base_offset) for x in r.responses[0].partition_responses]


def fetch_from_each(conn, topic: str, n: int, offset: int) -> dict[int, tuple[int, list[bytes]]]:
    """One Fetch from `offset` of each of partitions 0..n-1: {partition: (error, the values answered)}."""
    from mmlog.protocol.messages import fetch
    from mmlog.protocol.records import decode_records, iter_batches

    r = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20} for p in range(n)]}], forgotten_topics_data=[], rack_id=""))
    return {x.partition_index: (x.error_code, [rec.value for pos, _ in iter_batches(bytes(x.records))
                                               for rec in decode_records(bytes(x.records), pos)])
            for x in r.responses[0].partitions}


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class LimitedBroker(EmbeddedBroker):
    """A broker started with RLIMIT_NOFILE set (soft and hard) before exec, as a tight `ulimit -n` would."""

    def __init__(self, *args, nofile: int, **kw) -> None:
        super().__init__(*args, **kw)
        self.nofile = nofile

    def command(self) -> list[str]:
        inner = super().command()
        wrapper = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (%d, %d)); "
                   "os.execv(sys.argv[1], sys.argv[1:])" % (self.nofile, self.nofile))
        return [sys.executable, "-c", wrapper, *inner]


# ------------------------------------------------------------ limits checked first


@pytest.fixture(scope="module")
def small_broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("limits"), processors=1, config={
            "max.partitions.per.request": 50, "max.partitions.per.broker": 90}) as broker:
        yield broker


def test_a_topic_with_more_partitions_than_a_request_may_create_is_refused_naming_the_limit(small_broker):
    with connect(small_broker) as conn:
        code, message = create(conn, ("too-many", 51))["too-many"]
    assert code == INVALID_PARTITIONS and "max.partitions.per.request (50)" in message
    assert "too-many-0" not in partition_dirs(small_broker)


def test_two_to_the_31_minus_1_partitions_cost_nothing(small_broker):
    """Refused from the count alone: no memory for the partitions (a walk over 2**31 of them would also
    outlast the connection's timeout), and nothing made."""
    before = rss_kib(small_broker.pid)
    with connect(small_broker) as conn:
        code, _ = create(conn, ("huge", 2**31 - 1))["huge"]
    assert code == INVALID_PARTITIONS
    assert rss_kib(small_broker.pid) - before < 10 * 1024
    assert "huge-0" not in partition_dirs(small_broker)


def test_the_partitions_of_one_request_count_together(small_broker):
    with connect(small_broker) as conn:
        answers = create(conn, ("first", 30), ("second", 30), ("third", 20))
        assert answers["first"][0] == NONE
        assert answers["second"][0] == POLICY_VIOLATION
        assert "max.partitions.per.request (50)" in answers["second"][1]
        assert answers["third"][0] == NONE  # 30 + 20 fit
        assert not [d for d in partition_dirs(small_broker) if d.startswith("second-")]


def test_a_broker_hosts_at_most_max_partitions_per_broker_replicas_and_validate_only_says_so_first(small_broker):
    with connect(small_broker) as conn:
        hosted = sum(1 for d in partition_dirs(small_broker) if d[-1].isdigit())
        room = 90 - hosted
        code, message = create(conn, ("over", room + 1), validate_only=True)["over"]
        assert code == POLICY_VIOLATION and "max.partitions.per.broker (90)" in message
        assert create(conn, ("fits", room), validate_only=True)["fits"][0] == NONE
        assert "fits-0" not in partition_dirs(small_broker)  # validate_only made nothing
        assert create(conn, ("over", room + 1))["over"][0] == POLICY_VIOLATION
        assert create(conn, ("fits", room))["fits"][0] == NONE
        code, message = create(conn, ("one-more", 1))["one-more"]
        assert code == POLICY_VIOLATION and "broker 0 hosts 90 partition replicas" in message


def test_auto_creation_respects_the_partition_limits(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1, config={
            "num.partitions": 3, "max.partitions.per.broker": 4}) as broker, connect(broker) as conn:
        first = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "a"}]))
        assert first.topics[0].error_code == NONE
        second = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "b"}]))
        assert second.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
        deadline = time.monotonic() + 10
        while not any("not auto-creating 'b'" in line and "max.partitions.per.broker" in line
                      for line in broker.log_lines):
            assert time.monotonic() < deadline, broker.log_lines[-5:]
            time.sleep(0.05)


# ------------------------------------------------------------ all or nothing, and the descriptor budget


def test_a_creation_that_runs_out_of_descriptors_leaves_nothing_and_the_next_one_works(tmp_path):
    # The budget is set far above what the limit allows, so that creating runs out of descriptors.
    with LimitedBroker(tmp_path / "data", processors=1, nofile=1024,
                       config={"log.max.open.partitions": 100_000}) as broker, connect(broker) as conn:
        code, message = create(conn, ("wide", 1500))["wide"]  # a descriptor each: more than 1,024
        assert code == KAFKA_STORAGE_ERROR
        assert "Too many open files" in message and "nothing was created" in message
        assert not [d for d in partition_dirs(broker) if d.startswith("wide-")]
        assert create(conn, ("narrow", 1))["narrow"][0] == NONE
        meta = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=None))
        assert sorted(t.name for t in meta.topics) == ["narrow"]
        assert partition_dirs(broker) == ["narrow-0"]


def test_the_main_process_keeps_few_partitions_open_so_large_creations_fit_a_small_descriptor_limit(tmp_path):
    with LimitedBroker(tmp_path / "data", processors=1, nofile=1024) as broker, connect(broker) as conn:
        assert any("max_open=768" in line for line in broker.log_lines)  # 1024 less a quarter, one each
        assert create(conn, ("wide", 1000))["wide"][0] == NONE
        assert create(conn, ("wider", 2000))["wider"][0] == NONE
        assert descriptors(broker.pid) < 768 + 100
        assert len([d for d in partition_dirs(broker) if d.startswith("wide")]) == 3000
        assert create(conn, ("narrow", 1))["narrow"][0] == NONE
    # Stopped cleanly: every partition, closed or open, was marked clean, so no recovery now.
    with LimitedBroker(tmp_path / "data", processors=1, nofile=1024) as broker:
        assert any("loaded partitions=3001 recovered=0" in line for line in broker.log_lines), broker.log_lines[-5:]


# ------------------------------------------------------------ auto-creation stays out of the way


def _heartbeat_until_told(broker, go, stop, answered, out) -> None:
    """A group member in a process of its own (so the test's own work cannot delay it): join, then
    heartbeat every 20 ms until `stop`, counting the answers in `answered`; put every answer's code on `out`."""
    member = RawMember(broker, "steady", session_ms=6000)
    assert member.join().error_code == NONE
    assert member.sync({member.member_id: b""}).error_code == NONE
    go.set()
    codes = []
    while not stop.is_set():
        codes.append(member.heartbeat())
        with answered.get_lock():
            answered.value += 1
        time.sleep(0.02)
    member.close()
    out.put(codes)


def test_two_thousand_auto_created_topics_do_not_stall_heartbeats(tmp_path):
    """The coordinator answers heartbeats while Metadata auto-creates topics (paced, so it takes several
    rounds): heartbeats are answered between the rounds, and every one keeps the member (none is late
    enough for its session to lapse). How long a heartbeat waits meanwhile is tools/bench_auto_create.py's."""
    with EmbeddedBroker(tmp_path / "data", processors=2, config={
            **FAST_GROUPS, "auto.create.topics.max.per.second": 500}) as broker:
        ctx = multiprocessing.get_context("fork")
        go, stop, out, answered = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Value("l", 0)
        beating = ctx.Process(target=_heartbeat_until_told, args=(broker, go, stop, answered, out), daemon=True)
        beating.start()
        assert go.wait(30), "the member did not join"
        names = [f"auto-{i:04d}" for i in range(2000)]
        answers = {NONE: 0, LEADER_NOT_AVAILABLE: 0}
        answered_at_round = []  # heartbeats answered when each Metadata round was sent
        try:
            with connect(broker) as conn:
                deadline = time.monotonic() + 120
                wanted = list(names)
                while wanted:
                    assert time.monotonic() < deadline, f"{len(wanted)} topics still missing"
                    answered_at_round.append(answered.value)
                    r = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": n} for n in wanted]))
                    for t in r.topics:
                        answers[t.error_code] = answers.get(t.error_code, 0) + 1
                    wanted = [t.name for t in r.topics if t.error_code != NONE]
                    if wanted:
                        time.sleep(0.1)  # as clients back off before asking again
        finally:
            stop.set()
            codes = out.get(timeout=30)
            beating.join(10)
        print(f"\n2000 topics in {len(answered_at_round)} Metadata rounds, {answers}; {len(codes)} heartbeats")
        assert answers[LEADER_NOT_AVAILABLE] > 0 and set(answers) == {NONE, LEADER_NOT_AVAILABLE}
        assert len(answered_at_round) > 2
        # Answered while topics were still being created, not held until the creation was over.
        assert answered_at_round[-1] > answered_at_round[1], answered_at_round
        assert codes and set(codes) == {NONE}, collections.Counter(codes)
        assert descriptors(broker.pid) < 20_000 // 2 + 500  # the budget: half the limit, not 8 per topic
        with connect(broker) as conn:
            assert create(conn, ("after", 1))["after"][0] == NONE
            meta = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=None))
            assert len(meta.topics) == 2001


def test_a_processor_serves_more_partitions_than_its_descriptor_limit_could_hold_open(tmp_path):
    # 900 one-segment partitions need 900 descriptors open at once; under a limit of 1,024 each processor
    # keeps 768 open (1024 less a quarter, one each) and reopens the others as they are used (a Fetch of
    # all of them holds a file each for its slices: more than ~1,000 at once would not fit the limit).
    n = 900
    with LimitedBroker(tmp_path / "data", processors=1, nofile=1024) as broker, connect(broker) as conn:
        assert create(conn, ("wide", n))["wide"][0] == NONE
        (processor,) = broker.processor_pids()
        for rounds in range(2):  # the second round reopens every partition the first one let go of
            assert produce_to_each(conn, "wide", n, lambda p: b"%d" % p) == [(p, NONE, rounds) for p in range(n)]
            assert descriptors(processor) < 768 + 100
        assert fetch_from_each(conn, "wide", n, 0) == {p: (NONE, [b"%d" % p] * 2) for p in range(n)}
        assert descriptors(processor) < 768 + 100


def test_partitions_of_many_segments_fit_the_same_descriptor_budget(tmp_path):
    # 100 partitions of 6 segments: a processor that opened every segment of the 64 partitions it keeps
    # open would need 64 * (8 + 5 * 5) = 2,112 descriptors under a limit of 1,024. It opens the active
    # segment, and of the older ones only the one it reads.
    n, segments = 100, 6
    config = {"log.segment.bytes": 1024}
    with LimitedBroker(tmp_path / "data", processors=1, nofile=1024, config=config) as broker, \
            connect(broker) as conn:
        assert create(conn, ("deep", n))["deep"][0] == NONE
        (processor,) = broker.processor_pids()
        value = lambda p, i: b"%d:%d:" % (p, i) + b"." * 700  # noqa: E731 - 700 bytes a batch: a segment each
        for i in range(segments):
            assert produce_to_each(conn, "deep", n, lambda p: value(p, i)) == [(p, NONE, i) for p in range(n)]
        assert len([e for e in os.listdir(broker.data_dir / "deep-7") if e.endswith(".log")]) == segments
        for offset in (0, 3):  # the oldest segment of each, then one in the middle
            first = {p: (code, values[:1]) for p, (code, values) in fetch_from_each(conn, "deep", n, offset).items()}
            assert first == {p: (NONE, [value(p, offset)]) for p in range(n)}
            assert descriptors(processor) < 1024 - 100


# ------------------------------------------------------------ more partitions than a process keeps open


def test_partitions_closed_to_stay_within_the_open_budget_are_counted_and_warned_of_at_start(tmp_path):
    from mmlog.testing.scrape import scrape
    from tests.client.consumer_tools import create_topic, produce, values

    config = {"metrics.listen": "127.0.0.1:0", "log.max.open.partitions": 8}
    with EmbeddedBroker(tmp_path / "data", processors=1, config=config) as broker:
        assert not any("partitions hosted" in line for line in broker.log_lines)
        create_topic(broker, "wide", 20)  # the main process creates 20 and keeps 8 open
        for p in range(20):  # the processor opens all 20 in turn and keeps 8
            produce(broker, "wide", p, values(1))
        assert scrape(broker).get("mmlog_log_partition_evictions_total") >= 12 + 12
    with EmbeddedBroker(tmp_path / "data", processors=1, config=config) as broker:
        assert any("20 partitions hosted, but each process keeps at most 8 open" in line
                   for line in broker.log_lines), broker.log_lines[-5:]

"""tools/bench_peers.py --paired and --paired-latency: client libraries taking turns against real servers,
each record awaited, or paced through a producer to a long-polling consumer."""

import shutil

import pytest

from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker
from tools.bench import frames_driver, kafka_driver, latency, mmlog_driver, paired
from tools.bench.relay import RelayServer
from tools.bench.servers import RedisServer, group_pids
from tools.bench_peers import parse

SLICES, PER_SLICE, WARM = 4, 30, 5
ROUNDS, RATE, WINDOW = 4, 500, 0.2  # 100 paced records a window


def test_each_client_library_taking_turns_sends_every_record_and_each_server_is_timed_per_slice(tmp_path):
    with EmbeddedBroker(tmp_path / "mmlog", processors=1) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        pids = tuple(group_pids(broker.pid))
        servers = [paired.Server("librdkafka", host, int(port), pids, "librdkafka", stream="rdk"),
                   paired.Server("own client", host, int(port), pids, "mmlog", stream="own")]
        redis = RedisServer(tmp_path) if shutil.which("redis-server") else None
        if redis is not None:
            redis.start()
            servers.append(paired.Server("redis-py", *redis.address, tuple(redis.pids()), "redis-py", stream="s"))
        try:
            tallies = paired.interleaved(servers, SLICES, PER_SLICE, WARM)
            sent = 1 + WARM + SLICES * PER_SLICE  # each sender's own warm-up record, the warm-up, the slices
            with Admin(broker.bootstrap) as admin:
                assert admin.latest_offsets("rdk") == admin.latest_offsets("own") == {0: sent}
            if redis is not None:
                import redis as redis_py

                assert redis_py.Redis(*redis.address).xlen("s") == sent
        finally:
            if redis is not None:
                redis.stop()
    assert [t.requests for t in tallies] == [SLICES * PER_SLICE] * len(servers)
    assert all(len(t.slices_rate) == SLICES and min(t.slices_rate) > 0 and t.cpu_ns > 0 for t in tallies)
    lines = paired.table(tallies, [t.name for t in tallies[1:]])
    assert lines[-len(servers) + 1].startswith("| own client |")  # librdkafka over each of the others


def test_paired_needs_four_rounds_and_a_slice():
    cfg, _, record = parse(["--paired", "8", "--slice", "50"])
    assert (cfg.paired, cfg.slice, record) == (8, 50, True)
    for argv in (["--paired", "3"], ["--paired", "8", "--slice", "0"]):
        with pytest.raises(SystemExit):
            parse(argv)


def test_latency_windows_taking_turns_measure_every_paced_record_each_in_a_fresh_topic(tmp_path):
    with EmbeddedBroker(tmp_path / "mmlog", processors=1) as broker:
        systems = [("librdkafka", kafka_driver, broker.bootstrap, "rdk"),
                   ("own client", mmlog_driver, broker.bootstrap, "own")]
        turns = latency.taking_turns(systems, ROUNDS, RATE, WINDOW, log=lambda line: None)
        with Admin(broker.bootstrap) as admin:
            for prefix in ("rdk", "own"):
                for r in range(ROUNDS):  # the stamp-0 record, then the paced ones
                    assert admin.latest_offsets(f"{prefix}-lat-{r}") == {0: 1 + int(RATE * WINDOW)}
    assert [t.name for t in turns] == ["librdkafka", "own client"]
    for t in turns:
        assert [len(ms) for ms in t.windows] == [int(RATE * WINDOW)] * ROUNDS
        assert all(ms.min() > 0 and ms.max() < 10_000 for ms in t.windows)  # milliseconds, from send to receipt
        assert len(t.achieved) == ROUNDS and min(t.achieved) > 0
    lines = latency.turns_table(turns, RATE)
    assert lines[2].startswith("| librdkafka | 4 | 400 |") and lines[3].startswith("| own client | 4 | 400 |")
    assert lines[-1].startswith("| own client |")  # its p50 and p99 over librdkafka's, pooled and round by round


def test_paired_latency_windows_are_two_seconds_unless_told_and_need_four_rounds():
    cfg, _, _ = parse(["--paired-latency", "6", "--latency-rate", "5000"])
    assert (cfg.paired_latency, cfg.latency_rate, cfg.latency_seconds, cfg.paired) == (6, 5000, 2.0, None)
    assert parse(["--paired-latency", "6", "--latency-seconds", "5"])[0].latency_seconds == 5
    for argv in (["--paired-latency", "3"], ["--paired-latency", "6", "--paired", "6"]):
        with pytest.raises(SystemExit):
            parse(argv)


def test_the_relay_floor_hands_every_paced_message_from_producer_to_consumer_and_keeps_what_came_first(tmp_path):
    """The producer sends its stamp-0 message before the consumer connects (as with every system's clients):
    the relay keeps it, then passes the paced ones on as they come."""
    with RelayServer(tmp_path) as relay:
        turns = latency.taking_turns([("relay", *paired.driver(paired.Server("relay", *relay.address, (), "relay")),
                                       "floor")], ROUNDS, RATE, WINDOW, log=lambda line: None)
    [t] = turns
    assert [len(ms) for ms in t.windows] == [int(RATE * WINDOW)] * ROUNDS
    assert all(ms.min() > 0 and ms.max() < 10_000 for ms in t.windows)


def test_bare_kafka_frames_measure_every_paced_record_through_the_broker(tmp_path):
    """The frames driver's producer creates its topic and appends each tick's records as one batch; its
    consumer long-polls from offset 0 and sees every one of them."""
    with EmbeddedBroker(tmp_path / "mmlog", processors=1) as broker:
        turns = latency.taking_turns([("frames", frames_driver, broker.bootstrap, "bare")], ROUNDS, RATE, WINDOW,
                                     log=lambda line: None)
        with Admin(broker.bootstrap) as admin:
            for r in range(ROUNDS):
                assert admin.latest_offsets(f"bare-lat-{r}") == {0: 1 + int(RATE * WINDOW)}
    [t] = turns
    assert [len(ms) for ms in t.windows] == [int(RATE * WINDOW)] * ROUNDS
    assert all(ms.min() > 0 and ms.max() < 10_000 for ms in t.windows)


def test_frames_and_the_relay_are_latency_clients_only():
    cfg, _, _ = parse(["--paired-latency", "4", "--systems", "librdkafka,frames,relay"])
    assert cfg.systems == ["librdkafka", "frames", "relay"]
    for argv in (["--systems", "librdkafka,relay"], ["--paired", "4", "--systems", "relay"],
                 ["--systems", "frames"], ["--paired", "4", "--systems", "frames"]):
        with pytest.raises(SystemExit):
            parse(argv)

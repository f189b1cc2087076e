"""tools/bench_peers.py --paired: client libraries taking turns against real servers, each record awaited."""

import shutil

import pytest

from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker
from tools.bench import paired
from tools.bench.servers import RedisServer, group_pids
from tools.bench_peers import parse

SLICES, PER_SLICE, WARM = 4, 30, 5


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

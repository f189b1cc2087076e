"""tools/bench_peers.py's own arithmetic, without starting any server.

The benchmark itself (servers, clients) is a tool run by hand; these check what it computes
from its measurements: the per-record and per-request CPU, mmlog's ratios, the arguments,
and the /proc reading it takes CPU seconds from (its page section: test_bench_page.py).
"""

import os

import pytest

from tools import bench_peers
from tools.bench.latency import Latency
from tools.bench.servers import cpu_seconds, group_pids
from tools.bench_peers import Row, parse, ratio, tables


def test_a_rows_cpu_is_per_million_records_and_per_request_of_its_batch():
    row = Row("nats", "produce50", 50, messages=200_000, seconds=4.0, cpu=3.0)
    assert row.rate == 50_000
    assert row.cpu_per_million == pytest.approx(15.0)
    assert row.cpu_per_request_us == pytest.approx(750.0)  # 4,000 requests of 50
    assert Row("redis", "consume", None, 10, 1.0, 0.1).cpu_per_request_us is None


def test_ratio_is_text_and_a_dash_when_a_side_is_missing_or_zero():
    assert ratio(300.0, 100.0) == "3.00x"
    assert ratio(None, 100.0) == ratio(300.0, 0.0) == "-"


def test_every_peer_row_carries_mmlogs_ratios_with_its_own_client_and_librdkafka():
    rows = [Row("mmlog", "produce50", 50, 1_000_000, 2.0, 2.0), Row("librdkafka", "produce50", 50, 1_000_000, 4.0, 3.0),
            Row("nats", "produce50", 50, 100_000, 1.0, 2.0)]
    lat = {"mmlog": Latency("mmlog", "", 2000, 20000, 2000, 1.0, 2.0, 3.0, 4.0),
           "nats": Latency("nats", "", 2000, 20000, 2000, 3.0, 10.0, 11.0, 12.0), "librdkafka": None}
    (title, header, body), (lat_title, _, lat_body) = tables(rows, lat)
    assert title.startswith("Produce, batch 50")
    mmlog, rdk, nats = body
    assert mmlog[-2:] == rdk[-2:] == ["-", "-"]
    assert nats[:3] == ["NATS JetStream", "nats-py", "100,000"]
    assert nats[-2] == "5.00x / 2.50x"  # 500,000 and 250,000 msg/s over 100,000
    assert nats[-1] == "10.00x / 6.67x"  # 20 s per million over 2 and 3
    assert lat_title == "End-to-end latency"
    assert lat_body[1][-1] == "5.00x / -"  # p99 10 ms over mmlog's 2; librdkafka's latency failed
    assert lat_body[1][5] == "11.00"  # its p99.9, reported beside
    assert lat_body[2][2] == "failed"


def test_quick_writes_nothing_and_the_default_run_records():
    cfg, _, record = parse(["--quick"])
    assert (cfg.messages, cfg.batch1_messages, record) == (100_000, 2_000, False)
    cfg, _, record = parse([])
    assert (cfg.messages, cfg.batch1_messages, record) == (1_000_000, 20_000, True)
    assert parse(["--quick", "--record", "--systems", "nats,redis"])[2] is True


@pytest.mark.parametrize("argv", [["--systems", "kafka"], ["--messages", "0"], ["--latency-rate", "-1"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        parse(argv)
    assert "error" in capsys.readouterr().err


def test_a_missing_server_is_one_line_saying_what_to_install(monkeypatch):
    monkeypatch.setattr("tools.bench.servers._present", lambda thing: False)
    why = bench_peers.missing("nats")
    assert why == "skipping nats: its server is not installed (apt-get install -y nats-server)"
    assert bench_peers.missing("mmlog") is None


def test_cpu_seconds_are_read_from_proc_for_a_process_group():
    pids = group_pids(os.getpgrp())
    assert os.getpid() in pids
    before = cpu_seconds([os.getpid()])
    sum(i * i for i in range(2_000_000))  # some CPU of our own
    assert cpu_seconds([os.getpid()]) >= before
    assert cpu_seconds([2**22 + 1]) == 0  # a pid that does not exist counts nothing

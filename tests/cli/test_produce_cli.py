"""`mmlog produce` (stdin lines -> records) and `mmlog perf produce`."""

import io
import socket
import subprocess
import sys

import pytest

from mmlog.cli import main as cli
from mmlog.client.connection import BrokerConnection
from mmlog.protocol.messages import fetch
from mmlog.protocol.records import decode_records, iter_batches
from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2, config={"num.partitions": 3}) as b:
        yield b


def read(bootstrap, topic, partition):
    data = fetch_raw(bootstrap, topic, partition)
    return [r for pos, _ in iter_batches(data) for r in decode_records(data, pos)]


def fetch_raw(bootstrap, topic, partition):
    """The partition's record batches from offset 0, as the broker sends them."""
    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
            max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
            topics=[{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0,
                                                      "partition_max_bytes": 8 << 20}]}]))
    return body.responses[0].partitions[0].records


def run_cli(argv, stdin=b"", monkeypatch=None):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    return cli.main(argv)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lines_become_records_with_keys_split_at_the_separator(broker, monkeypatch, capsys):
    lines = b"user-1:hello\nno separator here\nuser-2:a:b:c\n:empty key\r\nlast line without newline"
    status = run_cli(["produce", "lines", "--bootstrap", broker.bootstrap, "--key-separator", ":",
                      "--partition", "1"], lines, monkeypatch)
    assert status == 0
    got = read(broker.bootstrap, "lines", 1)
    assert [(r.key, r.value) for r in got] == [
        (b"user-1", b"hello"), (None, b"no separator here"), (b"user-2", b"a:b:c"), (b"", b"empty key"),
        (None, b"last line without newline")]
    assert capsys.readouterr().err == ""


def test_keys_choose_partitions_with_murmur2(broker, monkeypatch):
    from mmlog.client.partitioner import partition_for_key_py

    keys = [b"alpha", b"bravo", b"charlie", b"delta", b"echo"]
    stdin = b"".join(k + b"=" + k.upper() + b"\n" for k in keys)
    assert run_cli(["produce", "keyed", "--bootstrap", broker.bootstrap, "--key-separator", "=",
                    "--acks", "all"], stdin, monkeypatch) == 0
    for p in range(3):
        stored = [r.key for r in read(broker.bootstrap, "keyed", p)]
        assert stored == [k for k in keys if partition_for_key_py(k, 3) == p]


def test_bad_arguments_are_one_line_and_status_2(broker, monkeypatch, capsys):
    for argv in (["produce", "t", "--partition", "-1"], ["produce", "t", "--acks", "2"],
                 ["produce", "t", "--bootstrap", "nonsense"], ["produce"]):
        assert run_cli(argv, b"x\n", monkeypatch) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("mmlog: error: ") and err.count("\n") == 1, err


def test_a_partition_the_topic_lacks_is_one_line_and_status_1(broker, monkeypatch, capsys):
    assert run_cli(["produce", "lines2", "--bootstrap", broker.bootstrap, "--partition", "7"], b"x\n",
                   monkeypatch) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmlog: error: UnknownTopicOrPartition") and err.count("\n") == 1


def test_unreachable_broker_exits_non_zero_with_one_line_in_bounded_time():
    proc = subprocess.run([sys.executable, "-m", "mmlog", "produce", "t", "--bootstrap",
                           f"127.0.0.1:{free_port()}", "--timeout", "1"],
                          input=b"hello\n", capture_output=True, timeout=60)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert err.startswith("mmlog: error: ConnectionClosed: no broker reachable") and err.count("\n") == 1, err


@pytest.mark.parametrize("api", ["send", "send_many"])
def test_perf_produce_reports_rates_and_latency(broker, capsys, api):
    status = cli.main(["perf", "produce", "--topic", f"perf-{api}", "--records", "3000", "--record-size", "100",
                       "--batch-size", "50", "--api", api, "--chunk", "700", "--bootstrap", broker.bootstrap])
    assert status == 0
    captured = capsys.readouterr()
    assert "produce: 3,000 records, 0.3 MB" in captured.out
    assert "msg/s" in captured.out and "MB/s" in captured.out and "latency ms: p50" in captured.out
    assert "msg/s" in captured.err  # the live progress line
    stored = sum(len(read(broker.bootstrap, f"perf-{api}", p)) for p in range(3))
    assert stored == 3001  # and the warm-up record


def test_perf_produce_batch_one_at_a_rate(broker, capsys):
    status = cli.main(["perf", "produce", "--topic", "perf-rate", "--records", "300", "--batch-size", "1",
                       "--rate", "1000", "--acks", "0", "--bootstrap", broker.bootstrap, "--quiet"])
    assert status == 0
    # Paced, as the records' own timestamps (taken at each send) say: 300 records at 1000/s span 0.3 s.
    stamps = sorted(r.timestamp for p in range(3) for r in read(broker.bootstrap, "perf-rate", p))[-300:]
    assert stamps[-1] - stamps[0] >= 250, stamps[-1] - stamps[0]
    out = capsys.readouterr().out
    assert "batch 1 records" in out and "acks 0" in out and "latency" not in out  # acks=0: no acknowledgements to time
    # nothing acknowledges acks=0 records: perf checks the log got every one
    assert "acks 0: all 300 records reached the log (end offsets grew by 300;" in out


def test_perf_produce_each_awaited_sends_one_record_a_request(broker, capsys):
    status = cli.main(["perf", "produce", "--topic", "perf-awaited", "--records", "200", "--batch-size", "1",
                       "--await-each", "--partition", "0", "--bootstrap", broker.bootstrap, "--quiet"])
    assert status == 0
    out = capsys.readouterr().out
    assert "api send, each awaited, batch 1 records" in out and "linger 0 ms" in out and "latency ms: p50" in out
    data = fetch_raw(broker.bootstrap, "perf-awaited", 0)
    # the warm-up's and every awaited record's batch: one record each, so one a request
    assert [len(decode_records(data, pos)) for pos, _ in iter_batches(data)] == [1] * 201


def test_perf_produce_bad_arguments(capsys):
    assert cli.main(["perf", "produce", "--topic", "t", "--records", "0"]) == 2
    assert capsys.readouterr().err.startswith("mmlog: error: --records must be >= 1")
    assert cli.main(["perf", "produce", "--topic", "t", "--await-each", "--api", "send_many"]) == 2
    assert capsys.readouterr().err.startswith("mmlog: error: --await-each takes --api send")

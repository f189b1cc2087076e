"""`mmlog consume` and `mmlog perf consume` against a real broker."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from mmlog.cli.main import main
from mmlog.testing import EmbeddedBroker
from tests.client.consumer_tools import create_topic, produce, values


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        create_topic(b, "lines", partitions=2)
        produce(b, "lines", 0, [(b"k%d" % i, b"line %d" % i) for i in range(5)])
        produce(b, "lines", 1, [(None, b"other"), (b"nv", None)])
        create_topic(b, "perf")
        for start in range(0, 2000, 500):
            produce(b, "perf", 0, values(500, start, prefix=b"x" * 190))
        yield b


def consume(capsysbinary, *args) -> tuple[int, bytes, str]:
    status = main(["consume", *args])
    out = capsysbinary.readouterr()
    return status, out.out, out.err.decode()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prints_values_from_the_beginning(broker, capsysbinary):
    status, out, err = consume(capsysbinary, "lines", "--bootstrap", broker.bootstrap, "--from-beginning",
                               "--partition", "0", "--max-messages", "3")
    assert status == 0
    assert out == b"line 0\nline 1\nline 2\n"
    assert "Processed a total of 3 messages" in err


def test_print_key_with_a_separator_and_nulls(broker, capsysbinary):
    status, out, _ = consume(capsysbinary, "lines", "--bootstrap", broker.bootstrap, "--from-beginning",
                             "--partition", "1", "--print-key", "--key-separator", " => ", "--timeout-ms", "1000")
    assert status == 0
    assert out == b"null => other\nnv => null\n"


def test_all_partitions_until_idle(broker, capsysbinary):
    status, out, err = consume(capsysbinary, "lines", "--bootstrap", broker.bootstrap, "--from-beginning",
                               "--timeout-ms", "700")
    assert status == 0
    assert sorted(out.splitlines()) == sorted([b"line %d" % i for i in range(5)] + [b"other", b"null"])
    assert "Processed a total of 7 messages" in err  # and it returned: idle for --timeout-ms, it stops


def test_from_the_end_by_default(broker, capsysbinary):
    status, out, _ = consume(capsysbinary, "lines", "--bootstrap", broker.bootstrap, "--timeout-ms", "500")
    assert status == 0 and out == b""


@pytest.mark.parametrize("args, message", [
    (["--group", "g", "--partition", "0"], "--group and --partition do not mix"),
    (["--partition", "7"], "has no partition 7"),
    (["--max-messages", "-1"], "--max-messages must be >= 0"),
    (["--bootstrap", "nohostport"], "bad bootstrap address"),
])
def test_bad_arguments_are_one_line(broker, capsysbinary, args, message):
    args = ["--bootstrap", broker.bootstrap] + args
    status, out, err = consume(capsysbinary, "lines", *args)
    assert status != 0
    assert err.count("\n") == 1 and err.startswith("mmlog: error: ") and message in err, err


def test_unknown_topic_is_one_line(broker, capsysbinary):
    status, _, err = consume(capsysbinary, "no-such-topic", "--bootstrap", broker.bootstrap)
    assert status == 1
    assert err.count("\n") == 1 and "no-such-topic" in err and "does not exist" in err, err


def test_unreachable_broker_is_one_line_after_a_bounded_wait():
    """End to end, in a process of its own: exit status, and exactly one line on stderr."""
    port = closed_port()
    proc = subprocess.run([sys.executable, "-m", "mmlog", "consume", "t", "--bootstrap", f"127.0.0.1:{port}",
                           "--request-timeout-ms", "1000"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("mmlog: error: ConnectionClosed: no broker reachable at 127.0.0.1:")


@pytest.mark.parametrize("api", ["iter", "bulk"])
def test_perf_consume(broker, capsys, api):
    status = main(["perf", "consume", "--topic", "perf", "--bootstrap", broker.bootstrap, "--api", api])
    out = capsys.readouterr()
    assert status == 0
    assert f"consumed ({api}): 2,000 records, 0.4 MB" in out.out
    assert "msg/s" in out.out and "MB/s" in out.out
    assert f"consume {api}: 2,000 records" in out.err  # the final progress line


def test_perf_consume_of_an_empty_topic_is_an_error(broker, capsys):
    create_topic(broker, "empty")
    assert main(["perf", "consume", "--topic", "empty", "--bootstrap", broker.bootstrap]) == 1
    assert "is empty" in capsys.readouterr().err

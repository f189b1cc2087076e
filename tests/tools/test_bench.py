"""tools/bench: the raw RESP codec against known bytes, and the whole harness for mmlog at a tiny size.

Neither needs Redis or RabbitMQ installed; the figures are checked when matplotlib is.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench.resp import BulkReplyCounter, RespError, encode_command

ROOT = Path(__file__).resolve().parents[2]

# (command arguments, exact bytes)
COMMANDS = [
    (("PING",), b"*1\r\n$4\r\nPING\r\n"),
    (("XADD", "s", "*", "v", b"ab"), b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nv\r\n$2\r\nab\r\n"),
    (("SET", "k", b"a\r\nb", 12), b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$2\r\n12\r\n"),
    (("SET", "k", b""), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"),
]

REPLIES = b"$15\r\n1700000000000-0\r\n$15\r\n1700000000000-1\r\n$16\r\n1700000000001-10\r\n"
REPLY_ENDS = (22, 44, 67)


@pytest.mark.parametrize("args, expected", COMMANDS)
def test_encode_command(args, expected):
    assert encode_command(*args) == expected


@pytest.mark.parametrize("cut", range(len(REPLIES) + 1))
def test_reply_counter_in_every_two_chunk_split(cut):
    counter = BulkReplyCounter()
    got = [counter.feed(REPLIES[:cut]), counter.feed(REPLIES[cut:])]
    assert sum(got) == counter.count == 3
    assert counter.last == b"1700000000001-10"
    assert got[0] == sum(cut >= end for end in REPLY_ENDS)


def test_reply_counter_byte_by_byte():
    counter = BulkReplyCounter()
    assert sum(counter.feed(REPLIES[i : i + 1]) for i in range(len(REPLIES))) == 3


@pytest.mark.parametrize("stream", [b"-OOM command not allowed\r\n",
                                    b"$15\r\n1700000000000-0\r\n-OOM command not allowed\r\n"])
@pytest.mark.parametrize("cut", [0, 3, 19, 21, 22, 23])
def test_reply_counter_raises_on_an_error_reply(stream, cut):
    counter = BulkReplyCounter()
    with pytest.raises(RespError, match="OOM command not allowed"):
        counter.feed(stream[:cut])
        counter.feed(stream[cut:])


def test_harness_for_mmlog_at_a_tiny_size(tmp_path):
    figures = importlib.util.find_spec("matplotlib") is not None
    out, page = tmp_path / "bench", tmp_path / "benchmarks.md"
    args = ["--systems", "mmlog", "--messages", "10000", "--batch1-messages", "1000", "--latency-rate", "2000",
            "--latency-seconds", "0.5", "--out", str(out), "--markdown", str(page), "--workdir", str(tmp_path)]
    args += [] if figures else ["--no-figures"]
    others = "\n## Peers\n\n<!-- bench_peers: begin -->\npeers' tables\n<!-- bench_peers: end -->\n\n## Notes\n"
    page.write_text("<!-- bench: begin -->\n# Benchmarks\n\nan old run\n<!-- bench: end -->\n" + others)
    proc = subprocess.run([sys.executable, "-m", "tools.bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout
    for row in ("send(), batch 1, acks=1", "send(), batch 1, acks=0 (the paper's)", "send(), batch 50, acks=1",
                "send(), batch 50, acks=0 (the paper's)", "send_many(), batch 50", "iterator", "poll_batch() bulk",
                "raw appends", "loopback os.sendfile", "end-to-end latency"):
        assert row in table
    results = json.loads((out / "results.json").read_text())
    command = "python -m tools.bench " + " ".join(args)
    assert results["command"] == command
    assert len(results["results"]) == 9
    for r in results["results"]:
        assert r["messages"] >= (1000 if r["batch"] == 1 else 10000) and r["seconds"] > 0 and r["nbytes"] > 0, r
    [lat] = results["latency"]
    assert lat["count"] == 1000 and 0 < lat["p50"] <= lat["p99"] <= lat["p999"]
    text = page.read_text()
    assert "## Producer" in text and "## Consumer" in text and "## End-to-end latency" in text
    assert f"(`{command}`, " in text  # the run the page's figures come from
    assert "an old run" not in text and text.count("<!-- bench: begin -->") == 1
    assert text.endswith("\n<!-- bench: end -->\n" + others)  # the other benchmarks' sections are kept
    if figures:
        for png in ("producer.png", "consumer.png"):
            assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"]({out.name}/{png})" in text
    assert not list(tmp_path.glob("mmlog-bench-*")), "the run's data directory is removed"

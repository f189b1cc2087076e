"""kcat (librdkafka 2.0.x, Debian's package): produce lines, consume them back."""

import subprocess

from tests.interop.conftest import require


def test_kcat_produces_then_consumes_the_same_lines(broker):
    kcat = require("kcat")
    lines = [f"line {i} " + "x" * (i % 50) for i in range(500)]
    subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", "kcat-roundtrip", "-K:"],
                   input="\n".join(f"key{i}:{v}" for i, v in enumerate(lines)) + "\n",
                   text=True, check=True, timeout=60)
    out = subprocess.run([kcat, "-C", "-b", broker.bootstrap, "-t", "kcat-roundtrip", "-o", "beginning", "-e",
                          "-f", "%k=%s\\n"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == [f"key{i}={v}" for i, v in enumerate(lines)]


def test_kcat_reads_from_an_offset_and_reports_the_end(broker):
    kcat = require("kcat")
    subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", "kcat-offsets"], input="a\nb\nc\nd\n",
                   text=True, check=True, timeout=60)
    out = subprocess.run([kcat, "-C", "-b", broker.bootstrap, "-t", "kcat-offsets", "-o", "2", "-e",
                          "-f", "%o:%s\\n"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == ["2:c", "3:d"]

"""The README's Python examples run, in order, against a real broker."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mmlog.testing import EmbeddedBroker

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"group.initial.rebalance.delay.ms": 100}
    with EmbeddedBroker(tmp_path_factory.mktemp("readme"), processors=2, config=config) as b:
        yield b


def test_the_readme_python_examples_run(broker, capsys):
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 5
    namespace: dict = {}
    for i, block in enumerate(blocks):
        code = block.replace("127.0.0.1:9092", broker.bootstrap)
        if "EmbeddedBroker()" in code:
            continue  # starts a broker of its own: covered by tests/test_testing.py
        if "mmlog.spark" in code:
            continue  # needs the Spark session: tests/spark/test_readme_spark.py runs it
        exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)
    assert namespace["seen"] == 1001
    assert namespace["total"] >= 1001
    assert namespace["replayed"] and min(r.offset for r in namespace["replayed"]) == 0
    out = capsys.readouterr().out
    assert "RecordMetadata(topic='clicks'" in out


def test_the_readme_command_line_examples_run(tmp_path):
    """The block of `mmlog` commands under 'Running a broker', against a broker of its own."""
    text = README.read_text()
    after = text.index("and so do mmlog's command-line tools")
    block = re.search(r"```sh\n(.*?)```", text[after:], flags=re.S).group(1)
    assert "mmlog topics create" in block and "mmlog perf consume" in block
    shim = tmp_path / "bin" / "mmlog"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m mmlog \"$@\"\n")
    shim.chmod(0o755)
    with EmbeddedBroker(tmp_path / "data", processors=2, config={"group.initial.rebalance.delay.ms": 100}) as broker:
        env = dict(os.environ, MMLOG_BOOTSTRAP=broker.bootstrap, PATH=f"{shim.parent}:{os.environ['PATH']}")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True, text=True,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    assert "created topic clicks" in done.stdout
    assert "home\ncart\n" in done.stdout  # consumed back, once as a plain consumer and once as a group member
    assert "Group: reporting" in done.stdout and "msg/s" in done.stdout

"""The README's Python examples run, in order, against a real broker (its `mmlog` commands: test_readme_cli.py)."""

import re
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

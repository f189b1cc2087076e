"""The README's Python examples run, in order, against a real broker, and then docs/clients.md's, which go on
from them (the README's `mmlog` commands: test_readme_cli.py; its Spark example: tests/spark/test_readme_spark.py)."""

import re
from pathlib import Path

import pytest

from mmlog.testing import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLIENTS = ROOT / "docs" / "clients.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def is_spark(block: str) -> bool:
    """A Spark example: it needs the Spark session, so tests/spark/ runs it."""
    return "mmlog.spark" in block


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"group.initial.rebalance.delay.ms": 100, "schema.registry.listeners": "http://127.0.0.1:0"}
    with EmbeddedBroker(tmp_path_factory.mktemp("readme"), processors=2, config=config) as b:
        yield b


def run_blocks(page: Path, blocks: list[str], bootstrap: str, registry: str = "") -> dict:
    """Run a page's examples in order in one namespace, the README's addresses made the test broker's."""
    namespace: dict = {}
    for i, block in enumerate(blocks):
        code = block.replace("127.0.0.1:9092", bootstrap).replace("http://127.0.0.1:8081", registry)
        exec(compile(code, f"{page.name} python block {i + 1}", "exec"), namespace)
    return namespace


def test_the_readme_and_clients_page_python_examples_run(broker, capsys):
    blocks = python_blocks(README.read_text())
    assert [b for b in blocks if is_spark(b)] and len(blocks) >= 4
    readme = run_blocks(README, [b for b in blocks if not is_spark(b)], broker.bootstrap, broker.registry_urls[0])
    assert readme["seen"] == 1001
    assert readme["payments"] == [{"id": i, "amount": i * 2.5} for i in range(10)]
    assert readme["replayed"] and min(r.offset for r in readme["replayed"]) == 0
    out = capsys.readouterr().out
    assert "RecordMetadata(topic='clicks'" in out
    assert "RecordMetadata(topic='greetings'" in out  # the EmbeddedBroker example's own broker

    blocks = python_blocks(CLIENTS.read_text())
    assert len(blocks) >= 5 and not any(map(is_spark, blocks))
    clients = run_blocks(CLIENTS, blocks, broker.bootstrap)
    assert clients["total"] >= 1001
    assert clients["records"], "the transaction example consumed nothing"

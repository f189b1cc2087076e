"""The control channel's catalogue (`mmlog/ipc/control_ops.py`) is the whole of it: every op the control
plane serves is in it, every op a processor sends is in it by its constant, and every op in it is both
served and sent."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mmlog
from mmlog.ipc import control_ops

PROCESSORS = Path(mmlog.__file__).parent / "processors"
CONSTANTS = {name: value for name, value in vars(control_ops).items()
             if name.isupper() and isinstance(value, str) and value in control_ops.OPS}


def sent_ops() -> dict[str, set[str]]:
    """{op name: the processor modules that send it}, from every forward/forward_txn/control.call."""
    sent: dict[str, set[str]] = {}
    for path in PROCESSORS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and n.module == "mmlog.ipc.control_ops" for a in n.names}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Name) and func.id in ("forward", "forward_txn"):
                op = call.args[2] if len(call.args) > 2 else None
            elif (isinstance(func, ast.Attribute) and func.attr == "call" and isinstance(func.value, ast.Attribute)
                  and func.value.attr == "control"):
                op = call.args[0]
            else:
                continue
            where = f"{path.relative_to(PROCESSORS)}:{call.lineno}"
            if path.name == "_common.py" and isinstance(op, ast.Name) and op.id == "op":
                continue  # forward and forward_txn passing on their caller's op
            assert isinstance(op, ast.Name) and op.id in imported, f"{where}: op not named by a control_ops constant"
            sent.setdefault(CONSTANTS[op.id], set()).add(where)
    return sent


@pytest.fixture
def served(tmp_path) -> set[str]:
    """The ops a control plane serves (one built on an empty data dir, never started)."""
    from mmlog.acceptor.control import ControlPlane
    from mmlog.cluster.embedded_store import EmbeddedStore
    from mmlog.config.broker import BrokerConfig
    from mmlog.log.manager import LogManager

    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path)})
    manager = LogManager(tmp_path)
    plane = ControlPlane(config, manager, EmbeddedStore(tmp_path, 0))
    try:
        yield set(plane.server.handlers)
    finally:
        plane.stop()
        manager.close()


def test_every_served_op_is_catalogued_and_every_catalogued_op_served(served):
    assert served == set(control_ops.OPS)


def test_processors_send_catalogued_ops_only_and_all_of_them():
    sent = sent_ops()
    assert set(sent) <= set(control_ops.OPS)
    assert set(control_ops.OPS) - set(sent) == set(), "ops no processor sends"


def test_each_op_is_named_once_and_documented():
    assert sorted(CONSTANTS.values()) == sorted(control_ops.OPS)  # one constant per op, no two alike
    for name, op in control_ops.OPS.items():
        assert op.name == name and op.doc

"""`HandlerContext` (mmlog/processors/handler_context.py) lists what handlers use of their processor: every
`ctx.<name>` under the handlers is a member of it, and both implementations, the processor and the
in-process one of mmlog.testing, provide every member. No broker: source scans and a LogManager."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import mmlog
from mmlog.log.manager import LogManager
from mmlog.processors import handler_context, worker
from mmlog.testing import LocalHandlerContext

PROCESSORS = Path(mmlog.__file__).parent / "processors"
# What gets the processor as `ctx`: the handlers, and dispatch and the request that hand it to them.
USERS = [*sorted((PROCESSORS / "handlers").glob("*.py")), PROCESSORS / "dispatch.py", PROCESSORS / "request.py"]
MEMBERS = handler_context.members()


def used_members(path: Path) -> dict[str, int]:
    """{name: a line} of every `ctx.name` (and `self.ctx.name`) in a module."""
    used = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "ctx") or (
                    isinstance(base, ast.Attribute) and base.attr == "ctx"):
                used.setdefault(node.attr, node.lineno)
    return used


def test_handlers_use_only_members_of_the_protocol():
    strangers = [f"{path.relative_to(PROCESSORS)}:{line}: ctx.{name}"
                 for path in USERS for name, line in used_members(path).items() if name not in MEMBERS]
    assert not strangers, "not in HandlerContext: " + ", ".join(strangers)


def test_every_member_is_used_and_documented():
    used = set().union(*(used_members(path) for path in USERS))
    assert MEMBERS - used == set(), "members no handler uses"
    source = inspect.getsource(handler_context.HandlerContext)
    tree = ast.parse(source).body[0]
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.AnnAssign):  # an attribute: its doc is the string after it
            after = tree.body[i + 1]
            assert isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant), node.target.id
        elif isinstance(node, ast.FunctionDef):
            assert ast.get_docstring(node), node.name


def assigned_attributes(cls) -> set[str]:
    """Names a class and its bases set on `self` anywhere in their methods, and the methods themselves."""
    names = set()
    for klass in cls.__mro__[:-1]:
        for node in ast.walk(ast.parse(inspect.getsource(klass))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return names | {name for name in dir(cls) if callable(getattr(cls, name))}


def test_the_processor_provides_every_member():
    assert MEMBERS - assigned_attributes(worker.Processor) == set()
    for name in MEMBERS & {n for n, v in vars(handler_context.HandlerContext).items() if callable(v)}:
        ours = inspect.signature(getattr(handler_context.HandlerContext, name))
        assert list(inspect.signature(getattr(worker.Processor, name)).parameters) == list(ours.parameters), name


def test_the_local_context_provides_every_member(tmp_path):
    manager = LogManager(tmp_path)
    try:
        ctx = LocalHandlerContext(manager)
        assert {name for name in MEMBERS if not hasattr(ctx, name)} == set()
    finally:
        manager.close()

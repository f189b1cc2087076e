"""The package's imports point one way, down the layers that docs/architecture.md draws, and no module
imports itself back through others: every import of every module under mmlog/, lazy ones inside functions
included. Every package must be placed here: a new one fails the test until it is."""

from __future__ import annotations

import ast
from pathlib import Path

import mmlog

ROOT = Path(mmlog.__file__).parent

# The broker's layers, bottom to top: a package may import its own layer and those before it, never one
# after. Packages in one tuple are side by side and may not import each other.
LAYERS = [
    ("mmlog.system", "mmlog.errors", "mmlog.config"),  # the operating system's services; errors; settings
    ("mmlog.protocol", "mmlog.schemas"),  # the Kafka wire format; the registry's schema types; both sans-IO
    ("mmlog.security",),  # TLS, SASL/SCRAM, ACLs and users
    ("mmlog.log",),  # the storage engine: partitions, segments, indexes, recovery, the cleaner
    ("mmlog.ipc",),  # what the broker's processes share: channels, shared memory, the cluster view
    ("mmlog.replication",),  # followers fetching from leaders, throttles, the election rules
    # the data plane (one epoll loop per processor) and the main process's services
    ("mmlog.processors", "mmlog.coordinator", "mmlog.transactions", "mmlog.metrics"),
    ("mmlog.cluster",),  # the metadata stores (embedded, ZooKeeper), the controller, assignment
    ("mmlog.web",),  # the broker's HTTP server, its authentication and answers
    ("mmlog.registry",),  # the schema registry: its view of _schemas, the writer, the REST API
    ("mmlog.console",),  # the web console: sessions, its JSON API, the pages
    ("mmlog.acceptor",),  # the main process: accept loop, supervision, control plane, boot
]
# Beside the broker: the client speaks the protocol; Spark sits on the client.
SIDE = {"mmlog.client": ("mmlog.system", "mmlog.errors", "mmlog.config", "mmlog.security", "mmlog.protocol",
                         "mmlog.schemas"),
        "mmlog.spark": ("mmlog.system", "mmlog.errors", "mmlog.config", "mmlog.security", "mmlog.protocol",
                        "mmlog.schemas", "mmlog.client")}
# Beyond its layer: the registry is a client of its own cluster (it reads and writes _schemas through
# mmlog.client, as Confluent's registry does through Kafka's client), never of the broker's internals.
# The console is a client of its own cluster too: each session's Admin, Consumer and Producer act as the
# logged-in user, so the broker's ACLs decide every read and action exactly as for the Kafka API.
ALSO = {"mmlog.registry": ("mmlog.client",), "mmlog.console": ("mmlog.client",)}
# On top, each over everything before it: a test broker and cluster; the CLI's commands; `python -m mmlog`.
TOP = ["mmlog.testing", "mmlog.cli", "mmlog.__main__"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every mmlog module this file imports, anywhere in it (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{alias.name}" for alias in node.names}  # resolve() falls back to base
    return {m for m in found if m == "mmlog" or m.startswith("mmlog.")}


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def resolve(target: str) -> str | None:
    """The module a dotted import name lands on (`from x import name` may name a function)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


GRAPH = {m: {t for t in map(resolve, imports_of(p)) if t and t != m} for m, p in MODULES.items()}


def top(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def allowed(src: str) -> set[str]:
    if src in SIDE:
        return set(SIDE[src]) | {src}
    if src in TOP:
        return {p for layer in LAYERS for p in layer} | set(SIDE) | set(TOP[: TOP.index(src) + 1])
    for i, layer in enumerate(LAYERS):
        if src in layer:
            return {src, *(p for below in LAYERS[:i] for p in below), *ALSO.get(src, ())}
    raise AssertionError(f"{src} is in no layer: add it to tests/test_layering.py")


def test_imports_point_down_the_layers():
    wrong = sorted(f"{m} imports {t}" for m, targets in GRAPH.items() for t in targets
                   if m != "mmlog" and t != "mmlog" and top(t) not in allowed(top(m)))
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_back():
    """Tarjan's strongly connected components over the module graph: every one is a single module."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, cycles


def test_every_package_has_a_layer():
    packages = {top(m) for m in MODULES if m != "mmlog"}
    placed = {p for layer in LAYERS for p in layer} | set(SIDE) | set(TOP)
    assert packages <= placed, sorted(packages - placed)


def test_the_checker_sees_lazy_and_relative_imports():
    assert "mmlog.cluster.zookeeper_store" in GRAPH["mmlog.acceptor.main"]  # imported inside a function
    assert "mmlog.protocol.schema" in GRAPH["mmlog.protocol.messages"]  # `from ..schema import`

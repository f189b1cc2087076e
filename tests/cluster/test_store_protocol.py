"""Both metadata stores provide every member of `MetadataStore` (the control plane, the boot, the
transaction coordinator and the metrics use them), with signatures the protocol's callers can call:
checked on the classes with `inspect`, no broker or ZooKeeper needed."""

from __future__ import annotations

import inspect

import pytest

from mmlog.cluster.embedded_store import EmbeddedStore
from mmlog.cluster.store import MetadataStore
from mmlog.cluster.zookeeper_store import ZooKeeperStore


def attributes(protocol: type) -> set[str]:
    """The protocol's data members (annotated, not methods)."""
    return set(inspect.get_annotations(protocol))


def methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")}


def declares(cls: type, name: str) -> bool:
    """A class attribute, or an attribute annotated in the class or a base (set in __init__)."""
    return hasattr(cls, name) or any(name in inspect.get_annotations(k) for k in cls.__mro__)


def callable_as(want: inspect.Signature, got: inspect.Signature) -> str | None:
    """Why a call the protocol's signature allows could fail on `got`, or None: the same parameters in
    the same order and kinds, defaults where the protocol has them, any extra ones optional."""
    want_params = [p for p in want.parameters.values() if p.name != "self"]
    got_params = [p for p in got.parameters.values() if p.name != "self"]
    for i, w in enumerate(want_params):
        if i >= len(got_params):
            return f"no parameter {w.name!r}"
        g = got_params[i]
        if g.name != w.name or g.kind != w.kind:
            return f"parameter {i} is {g.name!r} ({g.kind.description}), not {w.name!r} ({w.kind.description})"
        if w.default is not inspect.Parameter.empty and g.default is inspect.Parameter.empty:
            return f"parameter {w.name!r} has no default"
    for g in got_params[len(want_params):]:
        if g.default is inspect.Parameter.empty and g.kind not in (g.VAR_POSITIONAL, g.VAR_KEYWORD):
            return f"extra parameter {g.name!r} has no default"
    return None


def problems(cls: type, protocol: type = MetadataStore) -> list[str]:
    out = [f"{cls.__name__} lacks attribute {name}" for name in sorted(attributes(protocol))
           if not declares(cls, name)]
    for name in sorted(methods(protocol)):
        impl = inspect.getattr_static(cls, name, None)
        if impl is None or not callable(impl):
            out.append(f"{cls.__name__} lacks method {name}")
            continue
        why = callable_as(inspect.signature(getattr(protocol, name)), inspect.signature(getattr(cls, name)))
        if why:
            out.append(f"{cls.__name__}.{name}: {why}")
    return out


def test_the_protocol_names_what_the_broker_uses():
    assert {"cluster_id", "clustered", "is_controller", "states", "replicas", "wake"} <= attributes(MetadataStore)
    assert {"start", "create_topic", "next_producer_id", "marker_address", "close"} <= methods(MetadataStore)
    undocumented = [name for name in methods(MetadataStore) if not inspect.getdoc(getattr(MetadataStore, name))]
    assert not undocumented


@pytest.mark.parametrize("store", [EmbeddedStore, ZooKeeperStore])
def test_every_store_provides_the_protocol(store):
    assert problems(store) == []


def test_the_check_fails_on_a_missing_member_or_an_incompatible_signature():
    without_close = type("WithoutClose", (), {k: v for k, v in vars(EmbeddedStore).items() if k != "close"})
    assert problems(without_close) == ["WithoutClose lacks method close"]

    without_wake = type("WithoutWake", (), {**{k: v for k, v in vars(EmbeddedStore).items()
                                               if k != "__annotations__"},
                                            "__annotations__": {"cluster_id": str}})
    assert problems(without_wake) == ["WithoutWake lacks attribute wake"]

    class Renamed(EmbeddedStore):
        def delete_topic(self, manager, topic):  # the protocol calls it `name`
            pass

        def list_reassignments(self, manager, keys):  # the protocol's keys is optional
            return {}

        def live_brokers(self, rack):  # a parameter no caller passes
            return 1

    assert problems(Renamed) == [
        "Renamed.delete_topic: parameter 1 is 'topic' (positional or keyword), not 'name' (positional or keyword)",
        "Renamed.list_reassignments: parameter 'keys' has no default",
        "Renamed.live_brokers: extra parameter 'rack' has no default",
    ]

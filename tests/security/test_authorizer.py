"""The processors' authoriser: off it allows everything; on, decisions are cached per connection until the ACLs change."""

from __future__ import annotations

import os
from types import SimpleNamespace

from mmlog.config.broker import BrokerConfig
from mmlog.security.authorizer import Authorizer
from mmlog.security import acls
from mmlog.security.acls import ALLOW, LITERAL, READ, TOPIC, WRITE, Binding

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def connection(principal="User:alice"):
    return SimpleNamespace(principal=principal, peer=("127.0.0.1", 5000), acl_cache=None)


def authorizer(tmp_path, **settings) -> Authorizer:
    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path), **settings})
    a = Authorizer.from_config(config, tmp_path)
    a.refresh()
    return a


def grant(tmp_path, *bindings) -> None:
    acls.save(acls.path_in(tmp_path), bindings)
    st = os.stat(acls.path_in(tmp_path))
    os.utime(acls.path_in(tmp_path), ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a new stamp even within a tick


def test_without_an_authoriser_everything_is_allowed_and_nothing_is_cached(tmp_path):
    a, conn = authorizer(tmp_path), connection()
    assert a.allowed(conn, WRITE, TOPIC, "t") and conn.acl_cache is None


def test_decisions_are_cached_per_connection_until_the_acl_file_changes(tmp_path):
    a, conn = authorizer(tmp_path, **{"authorizer.class.name": AUTHORIZER}), connection()
    assert not a.allowed(conn, READ, TOPIC, "t")
    assert conn.acl_cache[1] == {(READ, TOPIC, "t"): False}
    grant(tmp_path, Binding(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW))
    assert not a.allowed(conn, READ, TOPIC, "t")  # not re-read yet: the processor loop refreshes
    a.refresh()
    assert a.allowed(conn, READ, TOPIC, "t")
    assert not a.allowed(connection("User:bob"), READ, TOPIC, "t")


def test_super_users_are_allowed_everything(tmp_path):
    a = authorizer(tmp_path, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:admin; User:CN=broker"})
    assert a.allowed(connection("User:admin"), WRITE, TOPIC, "t")
    assert a.allowed(connection("User:CN=broker"), WRITE, TOPIC, "t")
    assert not a.allowed(connection("User:alice"), WRITE, TOPIC, "t")


def test_an_unknown_authorizer_class_stops_the_broker_at_start(tmp_path):
    import pytest

    from mmlog.config.settings import ConfigError

    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig.load(overrides={"log.dirs": str(tmp_path), "authorizer.class.name": "com.example.Custom"})


def test_an_acl_file_that_does_not_parse_keeps_the_previous_acls(tmp_path):
    a, conn = authorizer(tmp_path, **{"authorizer.class.name": AUTHORIZER}), connection()
    grant(tmp_path, Binding(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW))
    a.refresh()
    acls.path_in(tmp_path).write_text('{"acls": [{"principal": "User:alice"}]}')  # an entry without its fields
    a.refresh()
    assert a.allowed(conn, READ, TOPIC, "t")

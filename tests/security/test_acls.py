"""Kafka's ACL rules (security/acls.py): which bindings apply, deny beats allow, implied operations, filters."""

from __future__ import annotations

import pytest

from mmlog.security import acls
from mmlog.security.acls import (ALL, ALLOW, ALTER, ALTER_CONFIGS, ANY, CLUSTER, DELETE, DENY, DESCRIBE,
                                 DESCRIBE_CONFIGS, GROUP, LITERAL, MATCH, PREFIXED, READ, TOPIC, WRITE, Acls,
                                 Binding, Filter, InvalidAcl)

ALICE, HOST = "User:alice", "10.0.0.1"


def rule(name="t", operation=READ, permission=ALLOW, principal=ALICE, host="*", pattern=LITERAL, kind=TOPIC):
    return Binding(kind, name, pattern, principal, host, operation, permission)


def allows(bindings, operation=READ, name="t", principal=ALICE, host=HOST, kind=TOPIC, allow_if_none=False):
    return Acls(bindings).allows(principal, host, operation, kind, name, allow_if_none)


def test_a_resource_no_acl_names_is_open_only_with_allow_everyone_if_no_acl_found():
    assert not allows([])
    assert allows([], allow_if_none=True)
    assert not allows([rule(principal="User:bob")], allow_if_none=True)  # some ACL names it: the ACLs decide


def test_an_allow_acl_matches_its_principal_host_operation_and_resource_only():
    acl = [rule(host=HOST)]
    assert allows(acl)
    assert not allows(acl, principal="User:bob")
    assert not allows(acl, host="10.0.0.2")
    assert not allows(acl, operation=WRITE)
    assert not allows(acl, name="other")


def test_wildcards_match_every_principal_host_and_resource_name():
    assert allows([rule(principal="User:*")], principal="User:anyone")
    assert allows([rule(name="*")], name="whatever")
    assert allows([rule(host="*")], host="192.168.1.1")


def test_a_prefixed_acl_applies_to_the_names_it_starts():
    acl = [rule(name="orders.", pattern=PREFIXED)]
    assert allows(acl, name="orders.eu") and allows(acl, name="orders.")
    assert not allows(acl, name="order")


def test_deny_beats_allow_whatever_the_patterns():
    assert not allows([rule(name="*", operation=ALL), rule(operation=READ, permission=DENY)])
    assert not allows([rule(operation=READ), rule(name="t", pattern=PREFIXED, operation=ALL, permission=DENY)])
    assert not allows([rule(operation=READ), rule(principal="User:*", operation=READ, permission=DENY)])
    assert allows([rule(operation=READ), rule(operation=WRITE, permission=DENY)])  # a deny of another operation


@pytest.mark.parametrize("granted", [READ, WRITE, DELETE, ALTER, DESCRIBE, ALL])
def test_read_write_delete_and_alter_imply_describe(granted):
    assert allows([rule(operation=granted)], operation=DESCRIBE)


def test_alter_configs_implies_describe_configs_and_nothing_implies_more_than_kafka_says():
    assert allows([rule(operation=ALTER_CONFIGS)], operation=DESCRIBE_CONFIGS)
    assert not allows([rule(operation=DESCRIBE_CONFIGS)], operation=ALTER_CONFIGS)
    assert not allows([rule(operation=WRITE)], operation=READ)
    assert not allows([rule(operation=DESCRIBE)], operation=READ)
    assert not allows([rule(operation=DESCRIBE, permission=DENY), rule(operation=READ)], operation=DESCRIBE)


def test_allowed_on_some_resource_of_a_type_is_kafkas_authorize_by_resource_type():
    assert Acls([rule(name="a", operation=WRITE)]).allows_any(ALICE, HOST, WRITE, TOPIC, False)
    assert not Acls([rule(name="a", operation=READ)]).allows_any(ALICE, HOST, WRITE, TOPIC, False)
    assert not Acls([rule(name="a", operation=WRITE), rule(name="a", operation=WRITE, permission=DENY)]) \
        .allows_any(ALICE, HOST, WRITE, TOPIC, False)
    assert not Acls([rule(name="a", operation=WRITE), rule(name="*", operation=WRITE, permission=DENY)]) \
        .allows_any(ALICE, HOST, WRITE, TOPIC, False)
    assert Acls([rule(kind=GROUP)]).allows_any(ALICE, HOST, WRITE, TOPIC, True)  # no topic ACL at all


def test_filters_match_as_kafkas_acl_binding_filter():
    literal, prefixed, wildcard = rule(name="orders"), rule(name="ord", pattern=PREFIXED), rule(name="*")
    every = Filter(ANY, None, ANY, None, None, ANY, ANY)
    assert all(every.matches(b) for b in (literal, prefixed, wildcard))
    match = Filter(TOPIC, "orders", MATCH, None, None, ANY, ANY)
    assert [match.matches(b) for b in (literal, prefixed, wildcard, rule(name="other"))] == [True, True, True, False]
    exact = Filter(TOPIC, "ord", PREFIXED, None, None, ANY, ANY)
    assert [exact.matches(b) for b in (literal, prefixed)] == [False, True]
    assert not Filter(ANY, None, ANY, "User:bob", None, ANY, ANY).matches(literal)
    assert not Filter(ANY, None, ANY, None, None, WRITE, ANY).matches(literal)
    assert not Filter(ANY, None, ANY, None, None, ANY, DENY).matches(literal)


@pytest.mark.parametrize("bad, why", [
    (rule(kind=1), "resource type"), (rule(kind=6), "DelegationToken"), (rule(pattern=MATCH), "pattern type"),
    (rule(name=""), "empty"), (rule(kind=CLUSTER, name="c"), "kafka-cluster"), (rule(operation=ANY), "operation"),
    (rule(permission=ANY), "permission"), (rule(principal="alice"), "Type:name"), (rule(host=""), "host"),
])
def test_a_binding_kafka_would_refuse_is_invalid(bad, why):
    with pytest.raises(InvalidAcl, match=why):
        bad.check()


def test_bindings_round_trip_through_the_store_files_kafka_names(tmp_path):
    bindings = {rule(), rule(kind=CLUSTER, name="kafka-cluster", operation=ALTER, permission=DENY),
                rule(kind=GROUP, name="g.", pattern=PREFIXED, operation=ALL)}
    acls.save(acls.path_in(tmp_path), bindings)
    assert acls.load(acls.path_in(tmp_path)).bindings == bindings
    assert rule().to_json() == {"resourceType": "Topic", "patternType": "LITERAL", "name": "t",
                                "principal": ALICE, "permissionType": "Allow", "operation": "Read", "host": "*"}

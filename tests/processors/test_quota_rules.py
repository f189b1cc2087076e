"""Which quota applies to a client, and what AlterClientQuotas accepts: Kafka's rules (mmlog/config/quotas.py)."""

import pytest

from mmlog.config.quotas import QuotaError, altered, entity_path, matches, resolve

P = "producer_byte_rate"


@pytest.mark.parametrize("stored, found", [
    ({"users/ANONYMOUS/clients/c": 1, "users/ANONYMOUS/clients/<default>": 2, "clients/c": 7}, (1, "ANONYMOUS:c")),
    ({"users/ANONYMOUS/clients/<default>": 2, "users/ANONYMOUS": 3}, (2, "ANONYMOUS:c")),
    ({"users/ANONYMOUS": 3, "users/<default>/clients/c": 4}, (3, "ANONYMOUS:")),
    ({"users/<default>/clients/c": 4, "users/<default>/clients/<default>": 5}, (4, "ANONYMOUS:c")),
    ({"users/<default>/clients/<default>": 5, "users/<default>": 6}, (5, "ANONYMOUS:c")),
    ({"users/<default>": 6, "clients/c": 7}, (6, "ANONYMOUS:")),
    ({"clients/c": 7, "clients/<default>": 8}, (7, ":c")),
    ({"clients/<default>": 8}, (8, ":c")),
    ({"clients/other": 9}, None),
])
def test_the_first_match_in_kafkas_order_wins(stored, found):
    hit = resolve({k: {P: v} for k, v in stored.items()}, "ANONYMOUS", "c", P)
    assert hit == (None if found is None else (float(found[0]), f"{P}:{found[1]}"))


def test_each_quota_key_resolves_on_its_own():
    quotas = {"users/<default>": {"consumer_byte_rate": 10}, "clients/c": {P: 20}}
    assert resolve(quotas, "ANONYMOUS", "c", P) == (20.0, f"{P}::c")
    assert resolve(quotas, "ANONYMOUS", "c", "consumer_byte_rate") == (10.0, "consumer_byte_rate:ANONYMOUS:")


def test_entities_map_to_kafkas_paths_with_names_percent_encoded():
    assert entity_path([("client-id", "a/b")]) == "clients/a%2Fb"
    assert entity_path([("user", None), ("client-id", "c")]) == "users/<default>/clients/c"
    assert entity_path([("user", "alice")]) == "users/alice"


def test_byte_rates_are_whole_numbers_and_removal_drops_the_key():
    assert altered({P: 5}, [(P, 7.0, False), ("request_percentage", 12.5, False)]) == {P: 7, "request_percentage": 12.5}
    assert altered({P: 5}, [(P, 0.0, True)]) == {}
    with pytest.raises(QuotaError, match="must be a LONG value"):
        altered({}, [(P, 7.5, False)])


def test_a_strict_filter_leaves_out_entities_with_other_types():
    entity = {"user": "alice", "client-id": "c"}
    assert matches(entity, [("user", 0, "alice")], strict=False)
    assert not matches(entity, [("user", 0, "alice")], strict=True)
    assert matches({"client-id": None}, [("client-id", 1, None)], strict=True)
    assert not matches({"client-id": "c"}, [("client-id", 1, None)], strict=True)

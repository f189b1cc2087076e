"""The Groups page's API against a real broker: a searchable page of groups with their lag, a group's members,
offsets and lag, its lag history falling as its consumer catches up, and resets: a dry run, then applied;
refused while the group has members, and refused by the broker to a user who may not commit for it."""

from __future__ import annotations

import time

import pytest

from mmlog.client import Consumer, Producer
from mmlog.client.admin import Admin
from mmlog.client.records import TopicPartition
from tests.console.secured_console import ApiError, ConsoleSession, kafka_options, secured_broker

TOPIC, RECORDS = "orders-groups", 100


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("groups") / "data") as broker:
        with Admin(broker.bootstrap, **kafka_options("admin")) as admin:
            admin.create_topic(TOPIC, 2)
            for n in range(30):
                admin.alter_group_offsets(f"shop-{n:03d}", {TopicPartition(TOPIC, 0): 0})
        produce(broker, TOPIC, RECORDS, partition=0)
        yield broker


@pytest.fixture(scope="module")
def admin(broker):
    with Admin(broker.bootstrap, **kafka_options("admin")) as admin:
        yield admin


def produce(broker, topic: str, n: int, partition: int = 0) -> None:
    producer = Producer(broker.bootstrap, **kafka_options("admin"))
    try:
        for i in range(n):
            producer.send(topic, value=b"x%d" % i, partition=partition)
        producer.flush(30)
    finally:
        producer.close()


def member(broker, group: str, topic: str, user: str = "alice") -> Consumer:
    consumer = Consumer(broker.bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000,
                        heartbeat_interval_ms=200, **kafka_options(user))
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.1)
    return consumer


def console(broker, user: str) -> ConsoleSession:
    return ConsoleSession(broker.console_urls[0], user)


def test_a_page_of_groups_is_searched_on_the_server_and_shows_each_ones_lag(broker):
    alice = console(broker, "alice")
    found = alice.get("/groups?q=shop-01&size=4&page=2")
    assert (found["total"], found["page"], found["size"]) == (10, 2, 4)
    assert [g["group"] for g in found["items"]] == ["shop-014", "shop-015", "shop-016", "shop-017"]
    assert all(g["lag"] == RECORDS and g["state"] == "Empty" and g["topics"] == [TOPIC] for g in found["items"])


def test_a_groups_page_shows_its_members_assignments_offsets_and_lag(broker):
    alice = console(broker, "alice")
    consumer = member(broker, "shop-live", TOPIC)
    try:
        consumer.commit({(TOPIC, 0): 40})
        detail = alice.get("/groups/shop-live")
    finally:
        consumer.close()
    assert (detail["state"], detail["protocol_type"], detail["lag"]) == ("Stable", "consumer", RECORDS - 40)
    [only] = detail["members"]
    assert sorted(map(tuple, only["assignment"])) == [(TOPIC, 0), (TOPIC, 1)]
    assert detail["partitions"] == [
        {"topic": TOPIC, "partition": 0, "committed": 40, "end": RECORDS, "lag": RECORDS - 40,
         "member": only["member_id"]},
        {"topic": TOPIC, "partition": 1, "committed": None, "end": 0, "lag": None, "member": only["member_id"]}]


def test_the_lag_history_shows_the_lag_falling_as_the_consumer_catches_up(broker):
    alice = console(broker, "alice")
    consumer = member(broker, "lag-catching-up", TOPIC)
    try:
        for done in range(0, RECORDS + 1, 25):
            consumer.commit({(TOPIC, 0): done})
            assert alice.get("/groups/lag-catching-up")["lag"] == RECORDS - done
            time.sleep(1.05)  # the history keeps a point a second at most
    finally:
        consumer.close()
    points = alice.get("/groups/lag-catching-up/lag")["points"]
    lags = [lag for _, lag in points]
    assert lags[0] == RECORDS and lags[-1] == 0 and {100, 75, 50, 25, 0} <= set(lags)
    assert lags == sorted(lags, reverse=True)  # the sampler's own points between views agree
    assert [t for t, _ in points] == sorted(t for t, _ in points)


def test_a_reset_shows_its_new_offsets_in_a_dry_run_then_applies_them(broker, admin):
    admin.alter_group_offsets("shop-reset", {TopicPartition(TOPIC, 0): 90})
    alice = console(broker, "alice")
    plan = alice.post("/groups/shop-reset/reset/plan", {"target": "offset", "value": 30})
    assert plan["partitions"] == [{"topic": TOPIC, "partition": 0, "current": 90, "new": 30}]
    assert admin.committed_offsets("shop-reset") == {TopicPartition(TOPIC, 0): 90}  # a dry run changes nothing
    earliest = alice.post("/groups/shop-reset/reset/plan", {"target": "earliest", "topics": [TOPIC]})
    assert [p["new"] for p in earliest["partitions"]] == [0]
    alice.post("/groups/shop-reset/reset/apply", {"offsets": plan["partitions"]})
    assert admin.committed_offsets("shop-reset") == {TopicPartition(TOPIC, 0): 30}
    assert alice.get("/groups/shop-reset")["lag"] == RECORDS - 30


def test_a_reset_to_a_timestamp_takes_the_first_offset_at_or_after_it(broker, admin):
    admin.alter_group_offsets("shop-time", {TopicPartition(TOPIC, 0): 0})
    alice = console(broker, "alice")
    future = alice.post("/groups/shop-time/reset/plan", {"target": "timestamp", "value": int(time.time() * 1000) + 3_600_000})
    past = alice.post("/groups/shop-time/reset/plan", {"target": "timestamp", "value": 0})
    assert [p["new"] for p in future["partitions"]] == [RECORDS]  # nothing after it: the end
    assert [p["new"] for p in past["partitions"]] == [0]


def test_a_group_with_active_members_is_not_reset(broker, admin):
    alice = console(broker, "alice")
    consumer = member(broker, "shop-busy", TOPIC)
    try:
        consumer.commit({(TOPIC, 0): 10})
        plan = alice.post("/groups/shop-busy/reset/plan", {"target": "latest"})
        assert plan["active_members"] == 1
        with pytest.raises(ApiError) as refused:
            alice.post("/groups/shop-busy/reset/apply", {"offsets": plan["partitions"]})
    finally:
        consumer.close()
    assert (refused.value.status, refused.value.name) == (409, "NON_EMPTY_GROUP")
    assert "active member" in refused.value.body["message"]
    assert admin.committed_offsets("shop-busy")[TopicPartition(TOPIC, 0)] == 10


def test_a_user_who_may_only_describe_the_group_is_refused_a_reset_by_the_broker(broker, admin):
    admin.alter_group_offsets("shop-guarded", {TopicPartition(TOPIC, 0): 70})
    bob = console(broker, "bob")
    assert bob.get("/groups/shop-guarded")["lag"] == RECORDS - 70  # he may look
    plan = bob.post("/groups/shop-guarded/reset/plan", {"target": "earliest"})
    with pytest.raises(ApiError) as refused:
        bob.post("/groups/shop-guarded/reset/apply", {"offsets": plan["partitions"]})
    assert (refused.value.status, refused.value.name) == (403, "GROUP_AUTHORIZATION_FAILED")
    assert admin.committed_offsets("shop-guarded") == {TopicPartition(TOPIC, 0): 70}


def test_a_reset_needs_the_sessions_csrf_token(broker):
    alice = console(broker, "alice")
    alice.csrf = "forged"
    with pytest.raises(ApiError) as refused:
        alice.post("/groups/shop-000/reset/apply", {"offsets": [{"topic": TOPIC, "partition": 0, "new": 0}]})
    assert refused.value.status == 403


def test_the_broker_samples_a_viewed_groups_lag_between_views(broker, admin):
    admin.alter_group_offsets("lag-sampled", {TopicPartition(TOPIC, 0): 10})
    alice = console(broker, "alice")
    assert alice.get("/groups/lag-sampled")["lag"] == RECORDS - 10  # viewed: the sampler follows it now
    admin.alter_group_offsets("lag-sampled", {TopicPartition(TOPIC, 0): 60})
    deadline = time.monotonic() + 20
    while [lag for _, lag in alice.get("/groups/lag-sampled/lag")["points"]][-1] != RECORDS - 60:
        assert time.monotonic() < deadline, "the sampler recorded no point after the commit"
        time.sleep(0.5)
    assert [lag for _, lag in alice.get("/groups/lag-sampled/lag")["points"]] == [RECORDS - 10, RECORDS - 60]

"""The range and roundrobin assignors: hand-computed tables, and the same answers as kafka-python's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlog.client.assignors import ASSIGNORS, member_order, range_assign, roundrobin_assign
from mmlog.client.records import TopicPartition


def short(assignment: dict) -> dict[str, str]:
    """{member: "t0-0 t0-1 t1-0"}: tables that read like the Javadoc's."""
    return {m: " ".join(f"{tp.topic}-{tp.partition}" for tp in tps) for m, tps in assignment.items()}


# (subscriptions, partition counts, expected range, expected roundrobin), computed by hand
TABLES = [
    pytest.param(  # the example of Kafka's RangeAssignor and RoundRobinAssignor Javadoc
        {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3},
        {"C0": "t0-0 t0-1 t1-0 t1-1", "C1": "t0-2 t1-2"},
        {"C0": "t0-0 t0-2 t1-1", "C1": "t0-1 t1-0 t1-2"}, id="javadoc"),
    pytest.param(  # the paper's case: 6 partitions, 3 consumers, 2 each
        {"c": ["t"], "a": ["t"], "b": ["t"]}, {"t": 6},
        {"a": "t-0 t-1", "b": "t-2 t-3", "c": "t-4 t-5"},
        {"a": "t-0 t-3", "b": "t-1 t-4", "c": "t-2 t-5"}, id="six-over-three"),
    pytest.param(  # n % k = 2: the first two get one extra
        {"m1": ["t"], "m2": ["t"], "m3": ["t"]}, {"t": 8},
        {"m1": "t-0 t-1 t-2", "m2": "t-3 t-4 t-5", "m3": "t-6 t-7"},
        {"m1": "t-0 t-3 t-6", "m2": "t-1 t-4 t-7", "m3": "t-2 t-5"}, id="eight-over-three"),
    pytest.param(  # more members than partitions: the last ones get nothing
        {"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 2},
        {"a": "t-0", "b": "t-1", "c": ""},
        {"a": "t-0", "b": "t-1", "c": ""}, id="more-members-than-partitions"),
    pytest.param(  # Kafka's RoundRobinAssignor Javadoc, second example: unequal subscriptions
        {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}, {"t0": 1, "t1": 2, "t2": 3},
        {"C0": "t0-0", "C1": "t1-0", "C2": "t1-1 t2-0 t2-1 t2-2"},
        {"C0": "t0-0", "C1": "t1-0", "C2": "t1-1 t2-0 t2-1 t2-2"}, id="javadoc-unequal"),
    pytest.param(  # per topic: range gives the first member the extra partition of every topic
        {"x": ["a", "b"], "y": ["a", "b"]}, {"a": 3, "b": 1},
        {"x": "a-0 a-1 b-0", "y": "a-2"},
        {"x": "a-0 a-2", "y": "a-1 b-0"}, id="per-topic-skew"),
    pytest.param(  # a topic without metadata (not created yet) is skipped; its subscriber gets nothing
        {"a": ["t", "ghost"], "b": ["ghost"]}, {"t": 2},
        {"a": "t-0 t-1", "b": ""},
        {"a": "t-0 t-1", "b": ""}, id="missing-topic"),
    pytest.param({}, {"t": 3}, {}, {}, id="no-members"),
]


@pytest.mark.parametrize("subscriptions, partitions, expected_range, expected_roundrobin", TABLES)
def test_hand_computed_tables(subscriptions, partitions, expected_range, expected_roundrobin):
    assert short(range_assign(subscriptions, partitions)) == expected_range
    assert short(roundrobin_assign(subscriptions, partitions)) == expected_roundrobin


def test_every_member_appears_and_every_partition_goes_to_exactly_one_subscriber():
    subs = {"a": ["t", "u"], "b": ["u"], "c": ["v"]}
    counts = {"t": 5, "u": 4, "v": 0}
    for assign in ASSIGNORS.values():
        result = assign(subs, counts)
        assert set(result) == {"a", "b", "c"}
        every = [tp for tps in result.values() for tp in tps]
        assert sorted(every) == [TopicPartition(t, p) for t in ("t", "u") for p in range(counts[t])]
        for member, tps in result.items():
            assert all(tp.topic in subs[member] for tp in tps)
            assert tps == sorted(tps)


def test_static_members_come_first_by_instance_id():
    """Java's MemberInfo order: a restarted static member (new member id) keeps its partitions."""
    assert member_order(["m-b", "m-a", "zz", "aa"], {"zz": "i-1", "aa": "i-2"}) == ["zz", "aa", "m-a", "m-b"]
    before = range_assign({"zz-1": ["t"], "aa": ["t"]}, {"t": 4}, {"zz-1": "inst-1"})
    after = range_assign({"00-2": ["t"], "aa": ["t"]}, {"t": 4}, {"00-2": "inst-1"})  # same instance, new id
    assert short(before) == {"zz-1": "t-0 t-1", "aa": "t-2 t-3"}
    assert short(after) == {"00-2": "t-0 t-1", "aa": "t-2 t-3"}


# ------------------------------------------------------------------ against kafka-python's assignors

kafka_assignors = pytest.importorskip("kafka.coordinator.assignors.range")
from kafka.coordinator.assignors.range import RangePartitionAssignor  # noqa: E402
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor  # noqa: E402
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription  # noqa: E402


class _Cluster:
    def __init__(self, partitions):
        self.partitions = partitions

    def partitions_for_topic(self, topic):
        n = self.partitions.get(topic)
        return None if not n else set(range(n))


class _Member:
    def __init__(self, member_id, topics):
        self.member_id = member_id
        self.group_instance_id = None
        self.metadata = ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=b"")


def kafka_python(assignor, subscriptions, partitions) -> dict[str, list[TopicPartition]]:
    members = [_Member(m, ts) for m, ts in subscriptions.items()]
    result = assignor.assign(_Cluster(partitions), members)
    return {m: sorted(TopicPartition(t, p) for t, ps in a.assigned_partitions for p in ps) for m, a in result.items()}


def same_topics(subscriptions) -> bool:
    return len({frozenset(ts) for ts in subscriptions.values()}) <= 1


@pytest.mark.parametrize("subscriptions, partitions, expected_range, expected_roundrobin", TABLES)
def test_the_tables_agree_with_kafka_python(subscriptions, partitions, expected_range, expected_roundrobin):
    assert kafka_python(RangePartitionAssignor, subscriptions, partitions) == range_assign(subscriptions, partitions)
    if same_topics(subscriptions):
        # kafka-python 3.0.12's RoundRobinPartitionAssignor raises KeyError as soon as it must skip a
        # member not subscribed to a topic (it looks a (instance id, member id) pair up by member id);
        # for unequal subscriptions the hand-computed table above, Java's answer, is the reference.
        assert kafka_python(RoundRobinPartitionAssignor, subscriptions, partitions) == roundrobin_assign(
            subscriptions, partitions)


TOPICS = ["a", "b", "c", "d"]
member_ids = st.text(alphabet="mnxyz-0123456789", min_size=1, max_size=8)
topic_lists = st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)
partition_counts = st.fixed_dictionaries({t: st.integers(0, 13) for t in TOPICS})


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(member_ids, topic_lists, min_size=1, max_size=7), partition_counts)
def test_range_gives_kafka_pythons_answer(subscriptions, partitions):
    assert range_assign(subscriptions, partitions) == kafka_python(RangePartitionAssignor, subscriptions, partitions)


@settings(max_examples=200, deadline=None)
@given(st.lists(member_ids, min_size=1, max_size=7, unique=True), topic_lists, partition_counts)
def test_roundrobin_gives_kafka_pythons_answer_for_equal_subscriptions(members, topics, partitions):
    subscriptions = {m: topics for m in members}
    assert roundrobin_assign(subscriptions, partitions) == kafka_python(
        RoundRobinPartitionAssignor, subscriptions, partitions)

"""A processor's encoded Metadata topic entries (processors/metadata_cache.py): reused only while unchanged.

Every answer here comes over one connection, so from one processor and its cache: an entry
encoded for an earlier request is what a later one gets unless something it was made from changed.
"""

from __future__ import annotations

import uuid

from mmlog.client.admin import Admin
from mmlog.ipc.cluster_view import ClusterView, Endpoint
from mmlog.log.topic_info import TopicInfo
from mmlog.processors.metadata_cache import TopicEntries
from mmlog.protocol import RequestHeader, encode_request, response_header_version
from mmlog.protocol.messages import metadata
from mmlog.testing.connections import connect


def raw_metadata(conn, version: int, names: list[str] | None = None) -> bytes:
    """The body bytes of a Metadata answer (every topic when `names` is None), as the broker encoded them."""
    topics = [] if names is None and version == 0 else None if names is None else [{"name": n} for n in names]
    conn.send_raw(encode_request(RequestHeader(metadata.API_KEY, version, 7, "cache-test"),
                                 metadata.REQUEST(topics=topics, allow_auto_topic_creation=False)))
    frame = bytes(conn.receive_frame())
    return frame[4 + response_header_version(metadata.API_KEY, version):]  # the correlation id (and tags, v9+)


def decoded(conn, version: int, names: list[str] | None = None):
    return metadata.RESPONSE.decode(raw_metadata(conn, version, names), version)


def partition_counts(body) -> dict[str, int]:
    return {t.name: len(t.partitions) for t in body.topics}


def test_every_version_asked_in_turn_on_one_connection_is_the_codecs_own_encoding_of_its_answer(broker):
    with Admin(broker.bootstrap) as admin:
        admin.create_topics({"cached-a": (3, {}), "cached-b": (1, {})})
    with connect(broker) as conn:
        first = {}
        for version in [12, 0, 9, 1, 12, 5, 10, 0, 7, 11, 9, 3, 8, 2, 4, 6, 1, 5]:  # each version twice, interleaved
            body = raw_metadata(conn, version)
            value = metadata.RESPONSE.decode(body, version)
            assert {"cached-a": 3, "cached-b": 1}.items() <= partition_counts(value).items()
            assert bytes(metadata.RESPONSE.encode(value, version)) == body, f"v{version}"
            assert first.setdefault(version, body) == body, f"v{version} asked again"
        named = raw_metadata(conn, 12, ["cached-b"])  # asked by name: the same entry, reused
        assert bytes(metadata.RESPONSE.encode(metadata.RESPONSE.decode(named, 12), 12)) == named
        assert partition_counts(metadata.RESPONSE.decode(named, 12)) == {"cached-b": 1}


def test_partitions_added_to_a_topic_are_answered_at_once(broker):
    with Admin(broker.bootstrap) as admin, connect(broker) as conn:
        admin.create_topic("growing", 2)
        assert partition_counts(decoded(conn, 12))["growing"] == 2
        assert partition_counts(decoded(conn, 12))["growing"] == 2
        admin.create_partitions({"growing": 5})
        grown = decoded(conn, 12)
        assert [p.partition_index for t in grown.topics if t.name == "growing" for p in t.partitions] == [0, 1, 2, 3, 4]
        assert partition_counts(decoded(conn, 1, ["growing"])) == {"growing": 5}


def test_a_topic_deleted_and_made_again_under_its_name_answers_its_new_id_and_partitions(broker):
    with Admin(broker.bootstrap) as admin, connect(broker) as conn:
        admin.create_topic("reborn", 1)
        [old] = [t for t in decoded(conn, 12).topics if t.name == "reborn"]
        admin.delete_topic("reborn")
        assert "reborn" not in partition_counts(decoded(conn, 12))
        assert decoded(conn, 12, ["reborn"]).topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        admin.create_topic("reborn", 4)
        [new] = [t for t in decoded(conn, 12).topics if t.name == "reborn"]
        assert new.topic_id != old.topic_id and len(new.partitions) == 4
        assert decoded(conn, 12, ["reborn"]).topics[0].topic_id == new.topic_id


# --- the cache alone, on the catalogue's and the view's own types ---------------------------------------------------

def entries_made(cache, info, view, offline=(), version=12) -> int:
    """How many times the cache encoded the entry while answering once (0: reused)."""
    made = []
    cache.entry(info.name, info, view, offline, version, lambda: made.append(1) or metadata.RESPONSE.encode_item(
        "topics", {"name": info.name, "partitions": []}, version))
    return len(made)


def three_broker_view(states) -> ClusterView:
    return ClusterView({i: Endpoint(i, "127.0.0.1", 9092 + i) for i in range(3)}, 0, {"t": states})


def test_an_entry_is_encoded_again_exactly_when_what_it_is_made_from_changes():
    cache = TopicEntries()
    info = TopicInfo("t", 2, topic_id=uuid.uuid4().hex, assignment=[[0, 1], [1, 2]])
    view = three_broker_view([[0, 3, [0, 1]], [1, 3, [1, 2]]])
    assert entries_made(cache, info, view) == 1
    assert entries_made(cache, info, view) == 0
    assert entries_made(cache, info, view, version=1) == 1  # per version
    assert entries_made(cache, info, three_broker_view([[0, 3, [0, 1]], [1, 3, [1, 2]]])) == 0  # re-read, same
    assert entries_made(cache, info, three_broker_view([[0, 4, [0, 1]], [1, 3, [1, 2]]])) == 1  # leader epoch
    assert entries_made(cache, info, three_broker_view([[0, 4, [0]], [1, 3, [1, 2]]])) == 1  # ISR
    view = three_broker_view([[1, 5, [1]], [1, 3, [1, 2]]])
    assert entries_made(cache, info, view) == 1  # leader
    fewer = ClusterView({i: Endpoint(i, "127.0.0.1", 9092 + i) for i in (1, 2)}, 1, view.partitions)
    assert entries_made(cache, info, fewer) == 1  # a broker died: its replicas are offline
    assert entries_made(cache, info, fewer, offline=(0,)) == 1  # a log dir here went offline
    info.assignment[1] = [1, 0]  # the owner's catalogue changes in place
    assert entries_made(cache, info, fewer, offline=(0,)) == 1
    info.partitions = 3
    assert entries_made(cache, info, fewer, offline=(0,)) == 1
    assert entries_made(cache, TopicInfo("t", 3, topic_id=uuid.uuid4().hex, assignment=info.assignment),
                        fewer, offline=(0,)) == 1  # deleted and made again: a new id


def test_the_cache_never_holds_more_topics_than_the_catalogue_names():
    cache = TopicEntries()
    view = ClusterView.standalone(Endpoint(0, "127.0.0.1", 9092))
    catalogue = {f"t{i}": TopicInfo(f"t{i}", 1) for i in range(5)}
    for info in catalogue.values():
        entries_made(cache, info, view)
    cache.prune(catalogue)
    assert len(cache) == 5
    del catalogue["t1"], catalogue["t3"]
    cache.prune(catalogue)
    assert len(cache) == 3


def test_confluent_kafka_and_kafka_python_list_topics_asked_again_and_again(broker):
    import pytest
    from confluent_kafka.admin import AdminClient

    with Admin(broker.bootstrap) as admin:
        admin.create_topics({"listed-a": (2, {}), "listed-b": (3, {})})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    for _ in range(3):
        topics = client.list_topics(timeout=10).topics
        assert (len(topics["listed-a"].partitions), len(topics["listed-b"].partitions)) == (2, 3)
    kafka = pytest.importorskip("kafka")
    kp = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        for _ in range(2):
            assert {"listed-a", "listed-b"} <= set(kp.list_topics())
        described = {t["name"]: len(t["partitions"]) for t in kp.describe_topics(["listed-a", "listed-b"])}
        assert described == {"listed-a": 2, "listed-b": 3}
    finally:
        kp.close()

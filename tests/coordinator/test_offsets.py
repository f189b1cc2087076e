"""OffsetCommit and OffsetFetch over the wire, and committed offsets surviving SIGTERM and SIGKILL."""

import threading

import pytest

from mmlog.protocol.messages import delete_topics
from mmlog.testing import EmbeddedBroker
from tests.coordinator.conftest import (
    FAST_GROUPS,
    ILLEGAL_GENERATION,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    RawMember,
    commit,
    committed,
    connect,
    create_topic,
    fetch_offsets,
)
from mmlog.testing.wait import wait_for


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_a_simple_commit_with_generation_minus_one_and_no_member_is_stored(broker, version):
    """What librdkafka and kafka-python assign() consumers send."""
    topic, group = f"simple-v{version}", f"assign-v{version}"
    create_topic(broker, topic, 3)
    with connect(broker) as conn:
        codes = commit(conn, group, {(topic, 0): (10, 4, "meta"), (topic, 2): (20, -1, None)}, version=version)
        assert codes == {(topic, 0): NONE, (topic, 2): NONE}
        error, parts = fetch_offsets(conn, group, {topic: [0, 1, 2]})
        assert error == NONE
        got = {p: (d.committed_offset, d.committed_leader_epoch, d.metadata, d.error_code)
               for (_, p), d in parts.items()}
        epoch = 4 if version >= 6 else -1  # the leader epoch travels from OffsetCommit v6
        assert got == {0: (10, epoch, "meta", NONE), 1: (-1, -1, "", NONE), 2: (20, -1, "", NONE)}


def test_offset_fetch_null_topics_means_every_committed_partition_and_unknown_ones_answer_minus_one(broker):
    create_topic(broker, "fetch-a", 2)
    create_topic(broker, "fetch-b", 1)
    with connect(broker) as conn:
        commit(conn, "fetcher", {("fetch-a", 1): 7, ("fetch-b", 0): 8})
        for version in (2, 3, 4, 5):
            error, parts = fetch_offsets(conn, "fetcher", None, version)
            assert (error, {k: p.committed_offset for k, p in parts.items()}) == (
                NONE, {("fetch-a", 1): 7, ("fetch-b", 0): 8})
        assert committed(conn, "fetcher", {"fetch-a": [0, 1], "no-such-topic": [3]}) == {
            ("fetch-a", 0): -1, ("fetch-a", 1): 7, ("no-such-topic", 3): -1}
        assert fetch_offsets(conn, "nobody-committed", None) == (NONE, {})
        # v1: no top-level error, no leader epoch; still the same offsets.
        assert {k: p.committed_offset for k, p in fetch_offsets(conn, "fetcher", {"fetch-b": [0]}, 1)[1].items()} == {
            ("fetch-b", 0): 8}


def test_commits_are_validated_like_kafka(broker):
    create_topic(broker, "validated", 2)
    with connect(broker) as conn:
        codes = commit(conn, "validation", {("validated", 0): (1, -1, "x" * 4096),
                                            ("validated", 1): (1, -1, "x" * 4097),
                                            ("validated", 2): 1, ("not-a-topic", 0): 1})
        assert codes == {("validated", 0): NONE, ("validated", 1): OFFSET_METADATA_TOO_LARGE,
                         ("validated", 2): UNKNOWN_TOPIC_OR_PARTITION, ("not-a-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(conn, "never-seen", {("validated", 0): 5}, generation=3, member_id="m") == {
            ("validated", 0): ILLEGAL_GENERATION}

    member = RawMember(broker, "managed")
    member.join()
    with connect(broker) as conn:
        # While the group has members, a simple commit is refused: generation -1 matches no member.
        assert commit(conn, "managed", {("validated", 0): 5}) == {("validated", 0): UNKNOWN_MEMBER_ID}
    assert member.commit({("validated", 0): 5}) == {("validated", 0): REBALANCE_IN_PROGRESS}  # before its SyncGroup
    member.sync({member.member_id: b""})
    assert member.commit({("validated", 0): 6}) == {("validated", 0): NONE}
    assert member.commit({("validated", 0): 7}, generation=member.generation + 1) == {
        ("validated", 0): ILLEGAL_GENERATION}
    assert member.commit({("validated", 0): 7}, member_id="someone-else") == {("validated", 0): UNKNOWN_MEMBER_ID}
    with connect(broker) as conn:
        assert committed(conn, "managed") == {("validated", 0): 6}
    member.leave()
    with connect(broker) as conn:  # the group is empty again: simple commits are welcome
        assert commit(conn, "managed", {("validated", 0): 9}) == {("validated", 0): NONE}
    member.close()


def test_deleting_a_topic_deletes_its_committed_offsets(broker):
    create_topic(broker, "doomed", 2)
    create_topic(broker, "kept", 1)
    with connect(broker) as conn:
        commit(conn, "g1", {("doomed", 0): 3, ("doomed", 1): 4, ("kept", 0): 5})
        commit(conn, "g2", {("doomed", 1): 6})
        r = conn.request(delete_topics.API_KEY, 3, topic_names=["doomed"], timeout_ms=10_000)
        assert r.responses[0].error_code == NONE
        assert committed(conn, "g1") == {("kept", 0): 5}
        assert committed(conn, "g2") == {}
    create_topic(broker, "doomed", 2)  # re-created: starts with no commits
    with connect(broker) as conn:
        assert committed(conn, "g1", {"doomed": [0, 1]}) == {("doomed", 0): -1, ("doomed", 1): -1}


def test_committed_offsets_and_generations_survive_sigterm_and_sigkill(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=2, config=FAST_GROUPS) as broker:
        create_topic(broker, "durable", 4)
        member = RawMember(broker, "durable-group")
        member.join()
        member.sync({member.member_id: b""})
        assert member.commit({("durable", p): (100 + p, 0, f"m{p}") for p in range(4)}) == {
            ("durable", p): NONE for p in range(4)}
        generation = member.generation
        member.close()
        with connect(broker) as conn:
            commit(conn, "simple-group", {("durable", 0): 42})

        broker.stop()
        broker.start()
        with connect(broker) as conn:
            assert committed(conn, "durable-group") == {("durable", p): 100 + p for p in range(4)}
            assert fetch_offsets(conn, "durable-group", {"durable": [3]})[1][("durable", 3)].metadata == "m3"
            assert committed(conn, "simple-group") == {("durable", 0): 42}
            groups = {g.group_id for g in conn.request(16, 2).groups}
            assert {"durable-group", "simple-group"} <= groups
            commit(conn, "simple-group", {("durable", 0): 43, ("durable", 1): 44})

        broker.kill()  # SIGKILL: nothing flushed, nothing closed
        broker.start()
        with connect(broker) as conn:
            assert committed(conn, "simple-group") == {("durable", 0): 43, ("durable", 1): 44}
            assert committed(conn, "durable-group") == {("durable", p): 100 + p for p in range(4)}
        again = RawMember(broker, "durable-group")
        assert again.join().generation_id > generation  # a generation number never repeats
        again.close()


def test_a_sigkill_during_a_stream_of_commits_loses_no_acknowledged_commit(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=2, config=FAST_GROUPS) as broker:
        create_topic(broker, "stream", 8)
        acked: dict[tuple[str, int], int] = {}
        stop = threading.Event()
        lock = threading.Lock()

        def committer(partition: int) -> None:
            offset = 0
            try:
                with connect(broker) as conn:
                    while not stop.is_set():
                        offset += 1
                        if commit(conn, "stream-group", {("stream", partition): offset}) == {
                                ("stream", partition): NONE}:
                            with lock:
                                acked[("stream", partition)] = offset
            except Exception:  # noqa: BLE001 - the broker died under us, as intended
                pass

        threads = [threading.Thread(target=committer, args=(p,), daemon=True) for p in range(8)]
        for t in threads:
            t.start()
        wait_for(lambda: sum(acked.values()) >= 2000, what="2000 commits acknowledged", interval=0.01)
        broker.kill()
        stop.set()
        for t in threads:
            t.join(10)
        with lock:
            last_acked = dict(acked)
        broker.start()
        with connect(broker) as conn:
            found = committed(conn, "stream-group")
        # Each partition's commits only grow: what is there is at least what was acknowledged
        # (one more may have been written but not answered before the kill).
        for key, offset in last_acked.items():
            assert offset <= found[key] <= offset + 1, (key, offset, found[key])

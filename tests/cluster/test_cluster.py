"""Cluster mode: three real brokers on a real ZooKeeper.

Brokers register and elect a controller; topics are spread round-robin over the
live brokers and served only where they live; a broker that dies leaves Metadata
when its session expires while the others keep serving, and comes back with all
it had; one live broker coordinates each group, and another takes over (with the
committed offsets) when it dies.
"""

from __future__ import annotations

import collections
import functools
import json
import subprocess
import sys
import time

import confluent_kafka
import pytest

from mmlog import Admin, Consumer, Producer
from mmlog.protocol.messages import fetch, find_coordinator, init_producer_id, metadata, offset_commit, produce
from mmlog.protocol import records as rec
from mmlog.testing import BrokerFailed, EmbeddedBroker, connections
from mmlog.testing.cluster import SESSION_MS, cluster_broker, leaders, live_brokers
from mmlog.testing.wait import wait_for

NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16


connect = functools.partial(connections.connect, timeout=30, client_id="cluster-tests")


def node_doc(zk, path: str) -> dict:
    """A ZooKeeper node's JSON."""
    return json.loads(zk.get(path)[0])


def by_id(cluster, node_id: int):
    return next(b for b in cluster if b.config["broker.id"] == node_id)


def produce_to(producer: Producer, topic: str, partitions, n: int, tag: str) -> set[bytes]:
    """n acknowledged records to each partition; their values."""
    futures, sent = [], set()
    for p in partitions:
        for i in range(n):
            value = f"{tag}-{p}-{i}".encode()
            futures.append(producer.send(topic, value, partition=p))
            sent.add(value)
    producer.flush()
    for f in futures:
        f.result(10)
    return sent


def consume_all(bootstrap: str, topic: str, partitions, expected: int, timeout: float = 30.0) -> list:
    """Every record of these partitions from the beginning (at least `expected` of them)."""
    consumer = Consumer(bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([(topic, p) for p in partitions])
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(0.5)
        return got
    finally:
        consumer.close()


# ------------------------------------------------------------------ registry and topics


def test_brokers_register_elect_one_controller_and_agree_on_the_cluster(cluster, zk):
    assert sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"]
    controller = node_doc(zk, "/controller")["brokerid"]
    assert controller in (0, 1, 2)
    cluster_id = node_doc(zk, "/cluster/id")["id"]
    views = []
    for b in cluster:
        with connect(b) as conn:
            body = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[]))
        views.append((sorted((x.node_id, x.port) for x in body.brokers), body.controller_id, body.cluster_id))
    assert all(v == views[0] for v in views)
    assert views[0][1] == controller and views[0][2] == cluster_id
    assert [port for _, port in views[0][0]] == [by_id(cluster, i).port for i in range(3)]


def test_a_topic_is_spread_over_every_broker_and_each_partition_is_served_where_it_lives(cluster, zk):
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("spread", 6)
    placed = wait_for(lambda: all(leaders(b.bootstrap, "spread") == leaders(cluster[0].bootstrap, "spread")
                                  for b in cluster) and leaders(cluster[0].bootstrap, "spread"), what="metadata")
    assert collections.Counter(placed) == {0: 2, 1: 2, 2: 2}  # round-robin over the live brokers
    assert b'"topic_id"' in zk.get("/brokers/topics/spread")[0]
    for p, node in enumerate(placed):
        assert node_doc(zk, f"/brokers/topics/spread/partitions/{p}/state")["leader"] == node
    for b in cluster:  # each broker holds the directories of its own partitions only
        mine = sorted(p for p, node in enumerate(placed) if node == b.config["broker.id"])
        assert sorted(int(d.name.rsplit("-", 1)[1]) for d in b.data_dir.glob("spread-*")) == mine

    # mmlog's producer and consumer, each bootstrapped from one broker, reach all of them.
    with Producer(cluster[1].bootstrap) as producer:
        futures = [producer.send("spread", b"v%d" % i, key=b"k%d" % i) for i in range(3000)]
        producer.flush()
        written = [f.result(10) for f in futures]
    assert collections.Counter(m.partition for m in written).keys() == set(range(6))
    got = consume_all(cluster[2].bootstrap, "spread", range(6), 3000)
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(3000))
    assert {(r.key, r.partition) for r in got} == {(b"k%d" % i, m.partition) for i, m in enumerate(written)}

    # A broker asked for a partition it does not hold says NOT_LEADER_OR_FOLLOWER.
    p, node = next((p, node) for p, node in enumerate(placed) if node != 0)
    with connect(by_id(cluster, 0)) as conn:
        body = conn.request(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=5000, topic_data=[
            {"name": "spread", "partition_data": [{"index": p, "records": rec.build_batch([(None, b"x")])}]}]))
        assert body.responses[0].partition_responses[0].error_code == NOT_LEADER_OR_FOLLOWER
        body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            {"topic": "spread", "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]))
        assert body.responses[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER


def test_confluent_kafka_follows_metadata_to_every_broker(cluster):
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("librdkafka", 6)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster[2].bootstrap, "linger.ms": 5})
    failures = []
    for i in range(2000):
        producer.produce("librdkafka", b"v%d" % i, key=b"k%d" % i,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(30) == 0 and not failures
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster[1].bootstrap, "group.id": "librdkafka-group",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["librdkafka"])
        got = []
        deadline = time.monotonic() + 40
        while len(got) < 2000 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append((msg.key(), msg.value(), msg.partition()))
        assert sorted(v for _, v, _ in got) == sorted(b"v%d" % i for i in range(2000))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    with Admin(cluster[0].bootstrap) as admin:
        offsets = admin.group_offsets("librdkafka-group")
    assert sum(o.committed for o in offsets.values()) == 2000


def test_auto_created_topics_and_producer_ids_are_cluster_wide(cluster):
    with Producer(cluster[1].bootstrap) as producer:  # auto-created through broker 1, num.partitions=1
        producer.send("made-on-send", b"x").result(20)
    assert set(leaders(cluster[0].bootstrap, "made-on-send")) <= {0, 1, 2}
    ids = set()
    for b in cluster:
        with connect(b) as conn:
            for _ in range(3):
                body = conn.request(init_producer_id.API_KEY, 1, init_producer_id.REQUEST(
                    transactional_id=None, transaction_timeout_ms=60000))
                assert body.error_code == 0
                ids.add(body.producer_id)
    assert len(ids) == 9  # no two brokers hand out the same producer id


# ------------------------------------------------------------------ a broker dies and returns


def test_a_killed_broker_leaves_metadata_the_others_keep_serving_and_it_returns_with_everything(cluster, zk):
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("survive", 6)
    placed = wait_for(lambda: leaders(cluster[1].bootstrap, "survive"), what="metadata")
    with Producer(cluster[0].bootstrap) as producer:
        sent = produce_to(producer, "survive", range(6), 200, "before")

    victim = by_id(cluster, 2)
    victim.kill()
    wait_for(lambda: sorted(live_brokers(cluster[0].bootstrap)) == [0, 1], timeout=SESSION_MS / 1000 + 30,
             what="the dead broker leaving Metadata")
    gone = [p for p, node in enumerate(placed) if node == 2]
    live = [p for p, node in enumerate(placed) if node != 2]
    now = wait_for(lambda: (lambda ls: ls if all(ls[p] == -1 for p in gone) else None)(
        leaders(cluster[1].bootstrap, "survive")), what="its partitions leaderless")
    assert [now[p] for p in live] == [placed[p] for p in live]
    # The controller (re-elected if it was the victim) marks them leaderless in ZooKeeper too.
    wait_for(lambda: all(node_doc(zk, f"/brokers/topics/survive/partitions/{p}/state")["leader"] == -1
                         for p in gone), what="partition states with leader -1")
    assert node_doc(zk, "/controller")["brokerid"] in (0, 1)

    # The live brokers keep serving their partitions, to producers and consumers.
    with Producer(cluster[1].bootstrap) as producer:
        during = produce_to(producer, "survive", live, 100, "during")
    got = consume_all(cluster[0].bootstrap, "survive", live, 300 * len(live))
    assert {r.value for r in got} == {v for v in sent | during if int(v.split(b"-")[1]) in live}

    # It comes back: registers again, leads its partitions again, and has everything it acknowledged.
    victim.start()
    wait_for(lambda: leaders(cluster[0].bootstrap, "survive") == placed, timeout=30, what="leaders restored")
    wait_for(lambda: all(node_doc(zk, f"/brokers/topics/survive/partitions/{p}/state")["leader"] == placed[p]
                         for p in gone), what="partition states restored")
    with Producer(cluster[2].bootstrap) as producer:
        after = produce_to(producer, "survive", range(6), 50, "after")
    got = consume_all(cluster[1].bootstrap, "survive", range(6), len(sent | during | after))
    assert sorted(r.value for r in got) == sorted(sent | during | after)  # nothing lost, nothing twice


def test_null_keyed_records_go_around_a_dead_brokers_partitions(cluster):
    """As Kafka's sticky partitioner: with a broker down, records without a key go to partitions
    that have a leader, and are all acknowledged at once instead of waiting out the delivery timeout."""
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("around", 6)
    placed = wait_for(lambda: leaders(cluster[1].bootstrap, "around"), what="metadata")
    by_id(cluster, 2).kill()
    gone = {p for p, node in enumerate(placed) if node == 2}
    wait_for(lambda: (lambda ls: all(ls[p] == -1 for p in gone))(leaders(cluster[0].bootstrap, "around")),
             timeout=SESSION_MS / 1000 + 10, what="its partitions leaderless")

    with Producer(cluster[0].bootstrap, max_batch_records=10, delivery_timeout_ms=120_000) as producer:
        futures = [producer.send("around", f"one-{i}".encode()) for i in range(600)]
        bulk = producer.send_many("around", [f"many-{i}".encode() for i in range(600)])
        # Done within flush's 60 s (else ProducerTimeout): nothing waited out the 120 s delivery timeout for
        # the dead broker's partitions.
        producer.flush(60)
    partitions = collections.Counter(f.result(0).partition for f in futures)
    partitions.update(bulk.result(0).partitions.tolist())
    assert sum(partitions.values()) == 1200
    assert set(partitions) == set(range(6)) - gone  # every live partition, none of the dead ones


def test_a_broker_deleted_topic_while_down_is_deleted_when_it_returns(cluster):
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("doomed", 3)
        wait_for(lambda: leaders(cluster[2].bootstrap, "doomed"), what="metadata")
        absent = by_id(cluster, 2)
        absent.stop()
        admin.delete_topic("doomed")
        wait_for(lambda: "doomed" not in Admin(cluster[1].bootstrap).list_topics(), what="deletion")
        absent.start()
        assert not list(absent.data_dir.glob("doomed-*"))
        admin.create_topic("doomed", 6)  # the name is free again, everywhere
        placed = wait_for(lambda: leaders(absent.bootstrap, "doomed"), what="the new topic")
        assert len(placed) == 6


# ------------------------------------------------------------------ group coordination


def coordinator_of(broker, group: str) -> int:
    with connect(broker) as conn:
        body = conn.request(find_coordinator.API_KEY, 2, find_coordinator.REQUEST(key=group, key_type=0))
    assert body.error_code == 0, body
    return body.node_id


def commit(broker, group: str, topic: str, offsets: dict[int, int]) -> list[int]:
    with connect(broker) as conn:
        body = conn.request(offset_commit.API_KEY, 7, offset_commit.REQUEST(
            group_id=group, generation_id=-1, member_id="", group_instance_id=None, topics=[
                {"name": topic, "partitions": [{"partition_index": p, "committed_offset": o,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}
                                               for p, o in offsets.items()]}]))
    return [p.error_code for t in body.topics for p in t.partitions]


def committed(bootstrap: str, group: str) -> dict[int, int]:
    with Admin(bootstrap) as admin:
        return {tp.partition: o.committed for tp, o in admin.group_offsets(group).items() if o.committed is not None}


def test_one_live_broker_coordinates_a_group_and_another_takes_over_with_its_offsets(cluster):
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("coordinated", 3)
    group = "failover-group"
    node = coordinator_of(cluster[0], group)
    assert all(coordinator_of(b, group) == node for b in cluster)
    coordinator = by_id(cluster, node)
    others = [b for b in cluster if b is not coordinator]
    assert commit(others[0], group, "coordinated", {0: 5}) == [NOT_COORDINATOR]
    assert commit(coordinator, group, "coordinated", {0: 10, 1: 11, 2: 12}) == [0, 0, 0]

    coordinator.kill()
    [successor] = wait_for(lambda: [n for n in [coordinator_of(others[0], group)] if n != node],
                           timeout=SESSION_MS / 1000 + 10, what="a new coordinator")
    assert coordinator_of(others[1], group) == successor
    assert committed(others[0].bootstrap, group) == {0: 10, 1: 11, 2: 12}  # loaded from ZooKeeper
    assert commit(by_id(cluster, successor), group, "coordinated", {0: 20}) == [0]

    # The first coordinator returns and wins the group back: it reads the commit made meanwhile.
    coordinator.start()
    wait_for(lambda: coordinator_of(others[0], group) == node, timeout=30, what="the group moving back")
    assert committed(coordinator.bootstrap, group) == {0: 20, 1: 11, 2: 12}


def test_a_coordinator_that_only_looked_at_a_group_reads_it_again_when_it_wins_it_back(cluster):
    """An OffsetFetch loads a group that has no members and no commits into its coordinator's store.
    When the group moves away, that load is forgotten too, so winning it back reads what was committed
    meanwhile instead of answering from the stale (empty) view."""
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("looked-at", 1)
    group = "looked-at-group"
    node = coordinator_of(cluster[0], group)
    first = by_id(cluster, node)
    watcher = next(b for b in cluster if b is not first)
    first.kill()
    successor = wait_for(lambda: (lambda n: n if n != node else None)(coordinator_of(watcher, group)),
                         timeout=SESSION_MS / 1000 + 10, what="a new coordinator")
    assert committed(watcher.bootstrap, group) == {}  # looked at, on the successor: nothing yet

    first.start()
    wait_for(lambda: coordinator_of(watcher, group) == node, timeout=30, what="the group moving back")
    assert commit(first, group, "looked-at", {0: 7}) == [0]
    first.kill()
    wait_for(lambda: coordinator_of(watcher, group) == successor, timeout=SESSION_MS / 1000 + 10,
             what="the successor again")
    assert committed(watcher.bootstrap, group) == {0: 7}


def test_a_consumer_group_lives_through_its_coordinators_death(cluster):
    """A member keeps consuming the live brokers' partitions after the coordinator's broker dies, resuming
    from the committed offsets with the new coordinator."""
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("grouped", 6)
    placed = wait_for(lambda: leaders(cluster[0].bootstrap, "grouped"), what="metadata")
    group = "survivors"
    node = coordinator_of(cluster[0], group)
    live = [p for p, n in enumerate(placed) if n != node]
    with Producer(cluster[0].bootstrap) as producer:
        first = produce_to(producer, "grouped", live, 50, "first")
    bootstrap = ",".join(b.bootstrap for b in cluster)
    consumer = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                        session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        consumer.subscribe(["grouped"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(first) and time.monotonic() < deadline:
            got += consumer.poll(0.5)
        assert {r.value for r in got} == first
        consumer.commit()
        by_id(cluster, node).kill()
        with Producer(next(b for b in cluster if b.config["broker.id"] != node).bootstrap) as producer:
            second = produce_to(producer, "grouped", live, 50, "second")
        more = []
        deadline = time.monotonic() + SESSION_MS / 1000 + 40
        while {r.value for r in more} < second and time.monotonic() < deadline:
            more += consumer.poll(0.5)
        assert {r.value for r in more} >= second
        assert not {r.value for r in more} & first  # resumed after the commit, not from the start
    finally:
        consumer.close()


def test_committed_offsets_survive_restarting_every_broker(cluster):
    with Admin(cluster[0].bootstrap) as admin:
        admin.create_topic("durable", 2)
    assert commit(by_id(cluster, coordinator_of(cluster[0], "durable-group")), "durable-group", "durable",
                  {0: 7, 1: 9}) == [0, 0]
    for b in cluster:
        b.stop()
    for b in cluster:
        b.start()
    wait_for(lambda: len(live_brokers(cluster[0].bootstrap)) == 3, what="three brokers again")
    assert committed(cluster[1].bootstrap, "durable-group") == {0: 7, 1: 9}


# ------------------------------------------------------------------ refusals


def test_a_second_broker_with_a_registered_id_is_refused(cluster, tmp_path, zk_connect):
    twin = cluster_broker(tmp_path / "twin", zk_connect, 1, **{"zookeeper.session.timeout.ms": 1000})
    with pytest.raises(BrokerFailed, match="broker.id 1 is registered by another live broker"):
        twin.start()


def test_an_unreachable_zookeeper_is_one_line_and_exit_1(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mmlog", "broker", "--data-dir", str(tmp_path), "--listen", "127.0.0.1:0",
         "--zookeeper", "127.0.0.1:1", "--override", "zookeeper.connection.timeout.ms=1000"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == \
        "mmlog: error: ZooKeeperUnavailable: cannot reach ZooKeeper at 127.0.0.1:1 within 1000 ms"


def test_a_standalone_data_dir_is_not_adopted_by_a_cluster(tmp_path, zk_connect):
    with EmbeddedBroker(tmp_path / "alone") as alone:
        with Admin(alone.bootstrap) as admin:
            admin.create_topic("mine", 1)
    joining = cluster_broker(tmp_path, zk_connect, 0)
    joining.data_dir = tmp_path / "alone"
    with pytest.raises(BrokerFailed, match="standalone topics"):
        joining.start()


def test_a_broker_paused_past_its_session_registers_again_and_keeps_watching(cluster, zk):
    """SIGSTOP (a long GC pause, a frozen VM) for longer than the session: ZooKeeper expires it and the
    others drop the broker; once it runs again it gets a new session, registers again, and its watches
    still follow the cluster."""
    import os
    import signal

    paused = by_id(cluster, 1)
    os.killpg(paused.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: sorted(live_brokers(cluster[0].bootstrap)) == [0, 2], timeout=SESSION_MS / 1000 + 10,
                 what="the paused broker's session to expire")
    finally:
        os.killpg(paused.pid, signal.SIGCONT)
    wait_for(lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"], timeout=20,
             what="registration again")
    wait_for(lambda: sorted(live_brokers(cluster[2].bootstrap)) == [0, 1, 2], what="three brokers in Metadata")
    by_id(cluster, 2).kill()
    wait_for(lambda: sorted(live_brokers(paused.bootstrap)) == [0, 1], timeout=SESSION_MS / 1000 + 10,
             what="the resumed broker seeing another one leave")

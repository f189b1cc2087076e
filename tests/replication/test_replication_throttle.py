"""Replication throttling as Kafka does it, on three real brokers: the follower.replication.throttled.rate /
leader.replication.throttled.rate dynamic broker configs bound the replicas the topics'
follower/leader.replication.throttled.replicas name, and only those, while they catch up; bad values are
INVALID_CONFIG; DescribeConfigs tells where each value comes from.

Each case moves two partitions at once onto a broker that has neither: one whose replica the topic config
names, one whose does not. The throttled one copies no more than the rate allows over the time from the
move's start to the end of its copy, plus a first burst (the leader's rate over clock-aligned windows
counts a new sender's bytes over at least W-1 windows, twice in a row when it starts late in one; the
follower's bucket starts full); the free one is done first. What the throttled copy's rate comes to is
tools/bench_throttles.py's to measure. Batches are 16 KiB, so a fetch's first batch (always sent whole)
overshoots little.
"""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka
import pytest

from mmlog.client.admin import Admin
from mmlog.client.connection import BrokerConnection
from mmlog.client.records import TopicPartition
from mmlog.errors import InvalidConfig
from mmlog.protocol.messages import describe_configs
from mmlog.testing import EmbeddedBroker
from mmlog.testing.cluster import REPLICATION, partition_state, three_brokers
from mmlog.testing.scrape import METRICS_ON, processors_caught_up
from mmlog.testing.cluster import by_id, moved_to
from mmlog.testing.wait import wait_for

RATE = 512 << 10  # bytes/s
SIZE = 3 << 20  # bytes of each partition moved
TOPIC_RESOURCE = 2  # DescribeConfigs resource type
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


@pytest.fixture
def cluster(tmp_path, zk_connect):  # noqa: F811
    """Three brokers with short replication timeouts; quota windows of 2 x 1 s (the leader's rate is sampled
    in them: with Kafka's 11, a first burst would be ten seconds' worth)."""
    with three_brokers(tmp_path, zk_connect, **REPLICATION, **METRICS_ON, **{"quota.window.num": 2}) as brokers:
        yield brokers


def _log_size(broker, topic: str) -> int:
    return sum(f.stat().st_size for f in (Path(broker.data_dir) / f"{topic}-0").glob("*.log"))


def fill(bootstrap: str, topic: str, size: int) -> None:
    """About `size` bytes of 1 KiB values in partition 0, in batches of 16 KiB."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20,
                                         "batch.size": 16384})
    for i in range(size // 1024):
        producer.produce(topic, b"%1024d" % i, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _topics_and_target(brokers, admin, names):
    """Create each topic on one broker, fill it; (leader of each, a broker holding none of them)."""
    leaders = {}
    for name in names:
        admin.create_topic(name, 1, replication_factor=1)
        fill(brokers[0].bootstrap, name, SIZE)
        leaders[name] = partition_state(brokers[0].bootstrap, name)[0]
    target = next(b.broker_id for b in brokers if b.broker_id not in leaders.values())
    return leaders, target


def topic_config_of(broker, topic: str) -> dict[str, str]:
    """The topic's config as this broker has it (DescribeConfigs asked of it: its own catalogue)."""
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        body = conn.request(describe_configs.API_KEY, 1, describe_configs.REQUEST(
            resources=[{"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}]))
    return {c.name: c.value for c in body.results[0].configs}


def allowed(rate: int, seconds: float) -> float:
    """Bytes a replication throttle of `rate` lets through in `seconds`: 10% over, for the windows' edges,
    plus a first burst of two windows' worth (or the follower's full bucket) and a quarter second's fetch."""
    return 1.1 * rate * seconds + 2.25 * rate + 64 * 1024


def _copies(brokers, admin, leaders: dict, target: int) -> tuple[dict[str, int], dict[str, float]]:
    """Add `target` as a replica of every topic at once; the bytes of each copy, and the seconds from the
    move's start until its copy was seen whole, in the order the copies were done."""
    sizes = {t: _log_size(by_id(brokers, leader), t) for t, leader in leaders.items()}
    follower = by_id(brokers, target)
    done: dict[str, float] = {}
    started = time.monotonic()
    admin.alter_partition_reassignments({TopicPartition(t, 0): [leader, target] for t, leader in leaders.items()})

    def all_copied():
        for t in sizes.keys() - done.keys():
            if (Path(follower.data_dir) / f"{t}-0").is_dir() and _log_size(follower, t) >= sizes[t]:
                done[t] = time.monotonic() - started  # read after the size: the copy took no longer
        return len(done) == len(sizes)

    wait_for(all_copied, timeout=120, what="every copy", show=lambda: (done, sizes))
    for t, leader in leaders.items():
        moved_to(brokers, t, [leader, target])
    return sizes, done


@pytest.mark.parametrize("side, rate, replicas", [("follower", FOLLOWER_RATE, FOLLOWER_REPLICAS),
                                                  ("leader", LEADER_RATE, LEADER_REPLICAS)])
def test_a_throttle_slows_the_out_of_sync_replica_its_topic_config_names_and_not_the_other(cluster, side, rate,
                                                                                          replicas):
    """The follower side names the replica catching up (the new one), the leader side the replica it
    copies from (the leader)."""
    with Admin(cluster[0].bootstrap) as admin:
        leaders, target = _topics_and_target(cluster, admin, [f"{side}-slow", f"{side}-free"])
        admin.alter_broker_config(None, set={rate: RATE})
        named = target if side == "follower" else leaders[f"{side}-slow"]
        admin.alter_topic_config(f"{side}-slow", set={replicas: f"0:{named}"})
        for b in cluster:  # every broker has the configs (ZooKeeper watches), and its processors too
            wait_for(lambda: admin.broker_config(b.broker_id)[rate][0] == str(RATE), what=f"{rate} on {b.broker_id}")
            wait_for(lambda: topic_config_of(b, f"{side}-slow")[replicas] == f"0:{named}",
                     what=f"{replicas} on broker {b.broker_id}")
            processors_caught_up(b)
        sizes, done = _copies(cluster, admin, leaders, target)
    slow, free = f"{side}-slow", f"{side}-free"
    print(f"{side} throttle at {RATE} B/s: {sizes[slow]} B copied in {done[slow]:.1f} s throttled, "
          f"{sizes[free]} B in {done[free]:.1f} s free")
    assert sizes[slow] <= allowed(RATE, done[slow]), (sizes, done)
    assert list(done) == [free, slow], done  # the free copy was not held back: done first
def test_mmlog_reassign_names_the_moving_replicas_and_clears_them_when_done(cluster, capsys):
    """`mmlog reassign --execute --throttle` sets both rates and the moving partition's topic configs, as
    kafka-reassign-partitions.sh does; `--verify` after the move removes them all."""
    from mmlog.cli import reassign

    bootstrap = cluster[0].bootstrap
    with Admin(bootstrap) as admin:
        leaders, target = _topics_and_target(cluster, admin, ["r-moved"])
    leader = leaders["r-moved"]
    plan = {TopicPartition("r-moved", 0): [leader, target]}
    with Admin(bootstrap) as admin:
        reassign.execute(admin, plan, RATE)
        config, overridden = admin.topic_config("r-moved")
        assert (config[LEADER_REPLICAS], config[FOLLOWER_REPLICAS]) == (f"0:{leader}", f"0:{target}")
        assert {LEADER_REPLICAS, FOLLOWER_REPLICAS} <= overridden
        # The rates are dynamic broker configs: the target has them once its ZooKeeper watch fired.
        wait_for(lambda: {admin.broker_config(target)[n][0] for n in (LEADER_RATE, FOLLOWER_RATE)} == {str(RATE)},
                 what=f"both rates on broker {target}")
        moved_to(cluster, "r-moved", [leader, target])
        reassign.verify(admin, plan)
        config, overridden = admin.topic_config("r-moved")
        assert (config[LEADER_REPLICAS], config[FOLLOWER_REPLICAS]) == ("", "")
        assert not {LEADER_REPLICAS, FOLLOWER_REPLICAS} & overridden
        wait_for(lambda: admin.broker_config(target)[FOLLOWER_RATE][1] == 5,  # back to the built-in default
                 what=f"the follower rate's default on broker {target}")
    assert "Throttle was removed." in capsys.readouterr().out


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("throttle-configs"), processors=1,
                        config={"follower.replication.throttled.rate": 5_000_000}) as b:
        with Admin(b.bootstrap) as admin:
            admin.create_topic("lists", 1)
        yield b


@pytest.mark.parametrize("value", ["0-1", "0:1,x", "*,0:1", "1:", ":2", "0:1:2", "-1:0"])
def test_a_bad_replica_list_is_invalid_config_and_changes_nothing(broker, value):
    with Admin(broker.bootstrap) as admin:
        admin.alter_topic_config("lists", set={LEADER_REPLICAS: "0:0"})
        for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
            with pytest.raises(InvalidConfig, match="must be the literal '\\*' or a list of replicas"):
                admin.alter_topic_config("lists", set={name: value})
        assert admin.topic_config("lists")[0][LEADER_REPLICAS] == "0:0"


@pytest.mark.parametrize("value", ["-1", "0", "fast", "1.5"])
def test_a_bad_replication_rate_is_invalid_config_and_changes_nothing(broker, value):
    with Admin(broker.bootstrap) as admin:
        for name in (LEADER_RATE, FOLLOWER_RATE):
            with pytest.raises(InvalidConfig, match=name):
                admin.alter_broker_config(None, set={name: value})
            with pytest.raises(InvalidConfig, match=name):
                admin.alter_broker_config(broker.broker_id, set={name: value})
        assert admin.broker_config(broker.broker_id)[LEADER_RATE] == (str(2**63 - 1), 5)


def test_describe_configs_shows_where_each_throttle_setting_comes_from(broker):
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("described", 1)
        admin.alter_topic_config("described", set={FOLLOWER_REPLICAS: "*"})
        config, overridden = admin.topic_config("described")
        assert config[FOLLOWER_REPLICAS] == "*" and FOLLOWER_REPLICAS in overridden
        assert config[LEADER_REPLICAS] == "" and LEADER_REPLICAS not in overridden
        admin.alter_topic_config("described", set={LEADER_REPLICAS: "0:0"}, delete=[FOLLOWER_REPLICAS])
        config, overridden = admin.topic_config("described")
        assert (config[LEADER_REPLICAS], config[FOLLOWER_REPLICAS]) == ("0:0", "") and overridden == {LEADER_REPLICAS}
        admin.alter_broker_config(None, set={LEADER_RATE: 2_000_000})
        described = admin.broker_config(broker.broker_id)
        assert described[LEADER_RATE] == ("2000000", 3)  # the cluster default's dynamic config
        assert described[FOLLOWER_RATE] == ("5000000", 4)  # server.properties
        admin.alter_broker_config(None, delete=[LEADER_RATE])
        assert admin.broker_config(broker.broker_id)[LEADER_RATE] == (str(2**63 - 1), 5)

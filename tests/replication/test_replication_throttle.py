"""Replication throttling as Kafka does it, on three real brokers: the follower.replication.throttled.rate /
leader.replication.throttled.rate dynamic broker configs bound the replicas the topics'
follower/leader.replication.throttled.replicas name, and only those, while they catch up; bad values are
INVALID_CONFIG; DescribeConfigs tells where each value comes from.

Each case moves two partitions at once onto a broker that has neither: one whose replica the topic config
names, one whose does not. The throttled one's copy rate is measured once it has copied two seconds' worth
(that much may come at first: the leader's rate over clock-aligned windows counts a new sender's bytes over
at least W-1 windows, twice in a row when it starts late in one; the follower's bucket starts full), the
free one's over its whole copy. Batches are 16 KiB, so a fetch's first batch (always sent whole)
overshoots little.
"""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka
import pytest

from mmlog.client.admin import Admin
from mmlog.client.records import TopicPartition
from mmlog.errors import InvalidConfig
from mmlog.testing import EmbeddedBroker
from mmlog.testing.cluster import REPLICATION, partition_state, three_brokers
from tests.replication.test_reassignment import by_id, moved_to

RATE = 512 << 10  # bytes/s
SIZE = 3 << 20  # bytes of each partition moved
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


@pytest.fixture
def cluster(tmp_path, zk_connect):  # noqa: F811
    """Three brokers with short replication timeouts; quota windows of 2 x 1 s (the leader's rate is sampled
    in them: with Kafka's 11, a first burst would be ten seconds' worth)."""
    with three_brokers(tmp_path, zk_connect, **REPLICATION, **{"quota.window.num": 2}) as brokers:
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


def _copy_rates(brokers, admin, leaders: dict, target: int) -> dict[str, tuple[float, float]]:
    """Add `target` as a replica of every topic at once; (bytes/s measured, seconds) of each copy."""
    sizes = {t: _log_size(by_id(brokers, leader), t) for t, leader in leaders.items()}
    admin.alter_partition_reassignments({TopicPartition(t, 0): [leader, target] for t, leader in leaders.items()})
    follower = by_id(brokers, target)
    samples: dict[str, list[tuple[float, int]]] = {t: [] for t in leaders}
    deadline = time.monotonic() + 60
    while any(not s or s[-1][1] < sizes[t] for t, s in samples.items()) and time.monotonic() < deadline:
        now = time.monotonic()
        for t, s in samples.items():
            if not s or s[-1][1] < sizes[t]:
                copied = _log_size(follower, t) if (Path(follower.data_dir) / f"{t}-0").is_dir() else 0
                if copied or s:
                    s.append((now, copied))
        time.sleep(0.05)
    rates = {}
    for t, s in samples.items():
        assert s and s[-1][1] >= sizes[t], f"{t} was not copied in time: {s[-1:]} of {sizes[t]}"
        start, end = s[0][0], s[-1][0]
        later = [(at, n) for at, n in s if n >= 2 * RATE]
        # Past the first window's burst, over at least a second: a copy done in a few 50 ms samples (an
        # unthrottled one) is measured whole instead, as two samples taken near its end say nothing.
        if len(later) > 1 and later[-1][0] - later[0][0] >= 1.0:
            rates[t] = ((later[-1][1] - later[0][1]) / (later[-1][0] - later[0][0]), end - start)
        else:
            rates[t] = (sizes[t] / max(end - start, 0.05), end - start)
    for t, leader in leaders.items():
        moved_to(brokers, t, [leader, target])
    return rates


def _report(side: str, rates) -> str:
    return f"{side}: " + ", ".join(f"{t} {r / 1e6:.2f} MB/s over {s:.1f} s" for t, (r, s) in rates.items())


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
        time.sleep(1.5)  # every broker has the configs (ZooKeeper watches) and its processors too (0.5 s)
        rates = _copy_rates(cluster, admin, leaders, target)
    print(_report(f"{side} throttle", rates))
    slow, free = rates[f"{side}-slow"], rates[f"{side}-free"]
    assert 0.6 * RATE <= slow[0] <= 1.4 * RATE
    assert free[0] > 2.5 * RATE and free[1] < slow[1] / 2


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
        assert {admin.broker_config(target)[n][0] for n in (LEADER_RATE, FOLLOWER_RATE)} == {str(RATE)}
        moved_to(cluster, "r-moved", [leader, target])
        reassign.verify(admin, plan)
        config, overridden = admin.topic_config("r-moved")
        assert (config[LEADER_REPLICAS], config[FOLLOWER_REPLICAS]) == ("", "")
        assert not {LEADER_REPLICAS, FOLLOWER_REPLICAS} & overridden
        assert admin.broker_config(target)[FOLLOWER_RATE][1] == 5  # back to the built-in default
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

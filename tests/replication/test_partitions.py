"""Network partitions: brokers that keep running while some links are cut, on a real ZooKeeper.

Three brokers, each its own system user, ZooKeeper and the clients as root, all on 127.0.0.1; an
nftables table of the test's own cuts and heals links (`partitions.py`). Unlike SIGSTOP, a
partitioned broker goes on acting on what it last believed: a leader cut from ZooKeeper still
answers clients, a follower cut from its leader still holds a session. The ZooKeeper session is
3 s and replica.lag.time.max.ms 2 s, so every cut here outlasts both within seconds.

Skipped, with the reason, unless run as root with nft and setpriv (`.ci/run` installs nftables).
"""

from __future__ import annotations

import time

import pytest

from mmlog.acceptor.zookeeper import paths
from mmlog.acceptor.zookeeper.paths import LeaderAndIsr
from mmlog.client.admin import Admin
from mmlog.errors import KafkaError
from mmlog.protocol.messages import list_groups
from tests.processors.test_bad_input import connect
from tests.replication.conftest import REPLICATION, three_brokers, wait_for
from tests.replication.partitions import ZK, Network, broker_user, skip_unless_root
from tests.replication.test_failover import full_isr, leader_of


@pytest.fixture
def split(tmp_path, zookeeper, zk_connect):
    """Three brokers as users mmlog-b0..2 and the Network that cuts their links (healed at the end)."""
    skip_unless_root()
    users = {i: broker_user(i) for i in range(3)}
    with three_brokers(tmp_path, zk_connect, users=users, **REPLICATION) as brokers:
        with Network(zookeeper.port, brokers) as net:
            yield brokers, net


def zk_state(zk, topic: str, p: int = 0) -> LeaderAndIsr:
    """A partition's state node as ZooKeeper holds it (read by the test's own session, never cut)."""
    return LeaderAndIsr.parse(*zk.get(paths.partition_state(topic, p)))


def create_topic(brokers, topic: str, partitions: int = 1) -> None:
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(topic, partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(brokers, topic, partitions)


# ---------------------------------------------------------------- defects a partition found


def test_a_leader_cut_from_zookeeper_and_its_followers_keeps_its_control_thread_serving(split):
    """A leader cut from ZooKeeper and its followers wants to shrink its ISR. The ZooKeeper write cannot be
    made, and must not be waited for: the control thread (HW checkpoints, flushes, rolls, producer ids,
    admin and group requests) goes on serving, the session's loss is one line, not an error, and the
    broker, back as a follower, announces no ISR change for a partition it no longer leads."""
    brokers, net = split
    create_topic(brokers, "frozen")
    leader = leader_of(brokers, "frozen")
    others = [b for b in brokers if b is not leader]
    since = len(leader.log_lines)
    waits = []
    net.isolate(leader.broker_id, ZK, *[b.broker_id for b in others])
    cut_at = time.monotonic()
    try:
        with connect(leader) as conn:  # the clients still reach it: ListGroups is served by the control thread
            while time.monotonic() - cut_at < 9:  # past the session (3 s) and the lag time (2 s)
                started = time.monotonic()
                try:
                    conn.request(list_groups.API_KEY, 2, list_groups.REQUEST())
                except (OSError, KafkaError):  # timed out: the control thread never answered
                    waits.append(time.monotonic() - started)
                    break
                waits.append(time.monotonic() - started)
                time.sleep(0.2)
        new = leader_of(others, "frozen")
        assert new is not leader
    finally:
        net.heal()
    full_isr(brokers, "frozen", 1)
    assert max(waits) < 2.5, f"ListGroups waited {max(waits):.1f} s during the cut: {[round(w, 2) for w in waits]}"
    log = leader.log_lines[since:]
    assert not [line for line in log if "level=ERROR" in line or "Traceback" in line], "\n".join(log[-40:])
    assert any("ZooKeeper session lost" in line for line in log)
    assert not [line for line in log if "leaves the ISR" in line], "an ISR change it could not have made"


def test_a_follower_without_a_zookeeper_session_stays_out_of_the_isr_until_it_registers(split, zk):
    """Only registered brokers join an ISR (Kafka's KIP-841). A follower cut from ZooKeeper alone still
    fetches and is caught up, but once its session ended the controller counts it dead and removes it
    from the ISR: its leader must not take it back (min.insync.replicas would count a broker the
    controller considers dead) until it has registered again."""
    brokers, net = split
    create_topic(brokers, "registered")
    leader = leader_of(brokers, "registered")
    follower = next(b for b in brokers if b is not leader and b.broker_id != 0)  # broker 0 is the controller
    fid = follower.broker_id
    net.cut((fid, ZK))
    try:
        wait_for(lambda: not zk.exists(paths.broker(fid)), timeout=20, what="the follower's session to end")
        wait_for(lambda: fid not in zk_state(zk, "registered").isr, timeout=10, what="the controller removing it")
        readmitted = []
        until = time.monotonic() + 4  # 16 ISR checks of its leader, the follower fetching all along
        while time.monotonic() < until:
            if fid in (isr := zk_state(zk, "registered").isr):
                readmitted.append(isr)
            time.sleep(0.05)
    finally:
        net.heal()
    deadline = time.monotonic() + 30
    registered_when_back = None  # read after the ISR that has it back: missing then, missing when it was written
    while registered_when_back is None and time.monotonic() < deadline:
        if fid in zk_state(zk, "registered").isr:
            registered_when_back = zk.exists(paths.broker(fid)) is not None
        time.sleep(0.02)
    assert not readmitted, f"broker {fid} taken back into the ISR without a session: {readmitted[:3]}"
    assert registered_when_back is not None, "not back in the ISR after the heal"
    assert registered_when_back, "back in the ISR before it registered again"

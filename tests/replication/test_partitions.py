"""Network partitions: brokers that keep running while some links are cut, on a real ZooKeeper.

Three brokers, each its own system user, ZooKeeper and the clients as root, all on 127.0.0.1; an
nftables table of the test's own cuts and heals links (`mmlog/testing/network.py`). Unlike SIGSTOP, a
partitioned broker goes on acting on what it last believed: a leader cut from ZooKeeper still
answers clients, a follower cut from its leader still holds a session. The ZooKeeper session is
3 s and replica.lag.time.max.ms 2 s, so every cut here outlasts both within seconds.

Skipped, with the reason, unless run as root with nft and setpriv (`.ci/run` installs nftables).
"""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from mmlog.cluster import paths
from mmlog.client.admin import Admin
from mmlog.errors import KafkaError
from mmlog.protocol.messages import list_groups
from mmlog.testing.cluster import (REPLICATION, check_replicas_identical, full_isr, leader_of, log_bytes, three_brokers,
                                   zk_state)
from mmlog.testing.wait import wait_for
from mmlog.testing.connections import connect
from mmlog.testing.load import Writer
from mmlog.testing.network import ZK, Network, broker_user, skip_unless_root
from tests.replication.test_failover import read_all


@pytest.fixture
def split(tmp_path, zookeeper, zk_connect):
    """Three brokers as users mmlog-b0..2 and the Network that cuts their links (healed at the end)."""
    skip_unless_root()
    users = {i: broker_user(i) for i in range(3)}
    with three_brokers(tmp_path, zk_connect, users=users, **REPLICATION) as brokers:
        with Network(zookeeper.port, brokers) as net:
            yield brokers, net


def create_topic(brokers, topic: str, partitions: int = 1) -> None:
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(topic, partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(brokers, topic, partitions)


# ---------------------------------------------------------------- defects a partition found


def test_a_leader_cut_from_zookeeper_and_its_followers_keeps_its_control_thread_serving(split, zk):
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
    healed(brokers, zk, "frozen", 1)  # ZooKeeper's word: the old leader's own Metadata is stale until it rejoins
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


# ---------------------------------------------------------------- load and what it saw


class Load:
    """An idempotent acks=all writer (whose acknowledgements the scenarios assert) and an acks=1 writer beside
    it (whose losses they report) on one topic: 3 partitions, replication factor 3, min.insync.replicas 2."""

    def __init__(self, brokers, topic: str, partitions: int = 3) -> None:
        self.brokers, self.topic, self.partitions = brokers, topic, partitions
        create_topic(brokers, topic, partitions)
        self.strict = Writer(brokers, topic, partitions, "all", True, rate=150)
        self.loose = Writer(brokers, topic, partitions, "1", False, rate=60)

    def __enter__(self) -> "Load":
        self.strict.start()
        self.loose.start()
        wait_for(lambda: len(self.strict.snapshot()) > 200 and len(self.loose.snapshot()) > 60, timeout=60,
                 what="a first acknowledged load")
        return self

    def __exit__(self, *exc) -> None:
        self.strict.stop()
        self.loose.stop()

    def resumed(self, since: float, timeout: float = 60) -> None:
        """Wait until every partition has acks=all acknowledgements after `since` (the heal)."""
        wait_for(lambda: all(self.strict.acks_after(p, since) for p in range(self.partitions)), timeout=timeout,
                 what="acks=all acknowledgements on every partition")
        self.resumed_at = time.monotonic()


def healed(brokers, zk, topic: str, partitions: int) -> None:
    """Every replica back in the ISR (ZooKeeper's state nodes) and every broker registered."""
    wait_for(lambda: all(len(zk_state(zk, topic, p).isr) == 3 for p in range(partitions))
             and len(zk.get_children(paths.BROKER_IDS)) == 3, timeout=60, what="the cluster whole again")


def verify(name: str, load: Load, brokers, zk, cut_at: float, note: str = "", logs_from=None) -> dict:
    """After healing: every acknowledged acks=all record exactly once at its acknowledged offset, no two
    acknowledged at one offset, replicas byte-identical, no broker logging an error (since `logs_from`:
    broker id -> its first log line to look at). What acks=1 lost is counted, and printed."""
    topic, partitions = load.topic, load.partitions  # the writers stopped (flushed): the with block ended
    healed(brokers, zk, topic, partitions)
    assert not load.strict.errors, f"acks=all deliveries failed: {load.strict.errors[:3]}"
    with Admin(brokers[0].bootstrap) as admin:
        ends = admin.latest_offsets(topic)
    got = read_all(brokers[0].bootstrap, topic, partitions, ends)
    strict = load.strict.acked
    lost = [(v, p, o) for v, (p, o, _) in strict.items() if got[p].get(o) != v]
    assert not lost, f"{len(lost)} of {len(strict)} acknowledged acks=all records not at their offsets: {lost[:5]}"
    offsets = {(p, o) for p, o, _ in strict.values()}
    assert len(offsets) == len(strict), "two acks=all records acknowledged at one offset"
    stored = Counter(v for p in range(partitions) for v in got[p].values())
    doubled = [v for v in strict if stored[v] != 1]
    assert not doubled, f"acks=all records stored more than once: {doubled[:5]}"
    check_replicas_identical(brokers, topic, partitions)
    errors = broker_errors(brokers, logs_from or {})
    assert not errors, "a partition is an event, not an error:\n" + "\n\n".join(errors[:5])
    loose = load.loose.acked
    loose_lost = [v for v, (p, o, _) in loose.items() if got[p].get(o) != v]
    report = {"acks=all acknowledged": len(strict), "lost": 0, "duplicated": 0,
              "acks=1 acknowledged": len(loose), "acks=1 lost": len(loose_lost),
              "acks=1 failed": len(load.loose.errors), "acks=1 duplicated": sum(stored[v] > 1 for v in loose)}
    report["unavailability s"] = load.strict.longest_gaps(cut_at, load.resumed_at)
    print(f"\n[{name}] {report} {note}")
    report["acks=1 lost values"] = set(loose_lost)
    return report


def broker_errors(brokers, logs_from: dict[int, int]) -> list[str]:
    """Each error a broker logged (since its line `logs_from[id]`), with the lines before and after it: a
    traceback printed outside the logging (an uncaught exception in a thread) starts with a line of its own."""
    out = []
    for b in brokers:
        lines = b.log_lines[logs_from.get(b.broker_id, 0):]
        for i, line in enumerate(lines):
            if "level=ERROR" in line or line.startswith("Traceback"):
                out.append(f"broker {b.broker_id}:\n" + "\n".join(lines[max(0, i - 2):i + 25]))
    return out


def leaders(zk, topic: str, partitions: int) -> dict[int, int]:
    return {p: zk_state(zk, topic, p).leader for p in range(partitions)}


# ---------------------------------------------------------------- scenarios


CUT_S = 7.0  # longer than the session (3 s) plus an election


def test_a_zombie_leader_cut_from_zookeeper_and_its_followers(split, zk):
    """A leader cut from ZooKeeper and its followers, still reachable by clients, for longer than the session.

    Guarantee: no acknowledged acks=all record is lost or duplicated. The zombie cannot acknowledge acks=all
    (its followers fetch nothing, and it cannot shrink the ISR it believes in without ZooKeeper), so there
    is never a second leader accepting acks=all writes; the partitions it led move to a follower within
    the session timeout plus an election, and once healed it truncates what it alone appended (acks=1
    writes it acknowledged: those are lost) and its replica is byte-identical to the others'."""
    brokers, net = split
    with Load(brokers, "zombie") as load:
        before = leaders(zk, "zombie", 3)
        zombie = next(b for b in brokers if b.broker_id == before[0])
        others = [b for b in brokers if b is not zombie]
        cut_at = time.monotonic()
        net.isolate(zombie.broker_id, ZK, *[b.broker_id for b in others])
        try:
            wait_for(lambda: zk_state(zk, "zombie", 0).leader not in (zombie.broker_id, -1), timeout=20,
                     what="a new leader of partition 0")
            time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))
            during = [v for v, (p, _, at) in load.loose.snapshot() if at > cut_at and before[p] == zombie.broker_id]
            led = [p for p in range(3) if before[p] == zombie.broker_id]
            zombie_logs = {p: log_bytes(zombie.data_dir, "zombie", p) for p in led}  # what it alone has, too
        finally:
            net.heal()
            healed_at = time.monotonic()
        load.resumed(healed_at)
    report = verify("zombie leader", load, brokers, zk, cut_at)
    truncated = sum(1 for v in during if v not in report["acks=1 lost values"])
    print(f"[zombie leader] acks=1 acknowledged on the zombie's partitions during the cut: {len(during)}, "
          f"of which lost (the zombie's truncated tail): {len(during) - truncated}")
    healthy = others[0]
    diverged = [p for p in led if not log_bytes(healthy.data_dir, "zombie", p).startswith(zombie_logs[p])]
    assert diverged, "the zombie appended nothing during the cut that the new leaders lack: no tail to truncate"
    # and check_replicas_identical (in verify) saw the zombie's replicas equal to the others': truncated


def test_a_controller_cut_from_zookeeper_only(split, zk):
    """The controller cut from ZooKeeper alone (its followers still fetch from it, the clients reach it).

    Guarantee: another broker becomes controller once the session ends and moves the partitions the old
    controller led (it is dead to the cluster, though it runs); the old controller, whose followers now
    follow others, can acknowledge no acks=all write, and is not taken back into any ISR before it has
    registered again. Nothing acknowledged with acks=all is lost or duplicated."""
    brokers, net = split
    with Load(brokers, "controller") as load:
        old = int(paths.load(zk.get(paths.CONTROLLER)[0])["brokerid"])
        cut_at = time.monotonic()
        with net.partitioned((old, ZK)):
            wait_for(lambda: int(paths.load(zk.get(paths.CONTROLLER)[0])["brokerid"]) != old, timeout=20,
                     what="a new controller")
            time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))
            isrs = [zk_state(zk, "controller", p).isr for p in range(3)]
        healed_at = time.monotonic()
        load.resumed(healed_at)
    assert all(old not in isr for isr in isrs), f"the cut controller still in an ISR: {isrs}"
    verify("controller cut from ZooKeeper", load, brokers, zk, cut_at)


def test_a_follower_cut_from_its_leader_only(split, zk):
    """A follower cut from one leader (both ways: the two brokers fetch nothing from each other), every
    other link up.

    Guarantee: each of the two leaves the ISRs the other leads after replica.lag.time.max.ms (2 s); acks=all
    goes on with the two replicas left (min.insync.replicas 2), during the cut; after the heal both catch up
    and return. Nothing acknowledged with acks=all is lost. (How long acks=all stalls meanwhile is printed,
    not asserted: a loaded machine stretches it.)"""
    brokers, net = split
    with Load(brokers, "follower") as load:
        before = leaders(zk, "follower", 3)
        leader = before[0]
        follower = next(b.broker_id for b in brokers if b.broker_id != leader)
        cut_at = time.monotonic()
        with net.partitioned((follower, leader)):
            wait_for(lambda: follower not in zk_state(zk, "follower", 0).isr, what="the follower out of the ISR")
            shrunk_at = time.monotonic()
            wait_for(lambda: all(load.strict.acks_after(p, shrunk_at) for p in range(3)),
                     what="acks=all on every partition with the replicas left, the cut still on")
            time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))  # the rest of the cut
            end = time.monotonic()
            isr0 = zk_state(zk, "follower", 0).isr
        print(f"longest acks=all stalls per partition during the cut: {load.strict.longest_gaps(cut_at, end)}")
        load.resumed(end)
    assert follower not in isr0 and leader in isr0, f"partition 0's ISR during the cut: {isr0}"
    assert leaders(zk, "follower", 3) == before, "no leader should move"
    verify("follower cut from its leader", load, brokers, zk, cut_at)


def test_a_broker_cut_from_the_clients_only(split, zk):
    """A leader the clients cannot reach, whose links to ZooKeeper and the other brokers are up.

    Guarantee: nothing moves (the cluster sees a healthy broker: Kafka's model has no client-side failure
    detection), so its partitions are unavailable to these clients for the whole cut, and the others are
    not; librdkafka keeps their records and delivers them after the heal. Nothing acknowledged with
    acks=all is lost or duplicated."""
    brokers, net = split
    with Load(brokers, "unreachable") as load:
        before = leaders(zk, "unreachable", 3)
        cut_off = before[0]
        cut_at = time.monotonic()
        with net.partitioned((cut_off, "clients")):
            time.sleep(CUT_S)
            end = time.monotonic()
        gaps = load.strict.longest_gaps(cut_at, end)
        load.resumed(end)
    assert leaders(zk, "unreachable", 3) == before, "a broker only the clients lost must keep its leaderships"
    assert all(gaps[p] > CUT_S - 1.5 for p in range(3) if before[p] == cut_off), gaps
    verify("broker cut from the clients", load, brokers, zk, cut_at)


FLAP_SEED = 20261129
FLAP_S, FLAP_ROUND_S = 30, 3.0


def test_random_links_cut_and_healed_every_few_seconds(split, zk):
    """Seeded random links (a broker and ZooKeeper, two brokers, a broker and the clients) cut one or two at a
    time, healed and cut anew every 3 s for 30 s: sessions that end or survive, leaders that move and come
    back, followers that drop out and catch up.

    Guarantee: every acknowledged acks=all record is present exactly once at its acknowledged offset after
    the heal, replicas are byte-identical, and the cluster returns to full ISRs. The longest time each
    partition went without an acks=all acknowledgement is printed."""
    brokers, net = split
    rng = random.Random(FLAP_SEED)
    ids = [b.broker_id for b in brokers]
    links = [(b, ZK) for b in ids] + [(b, "clients") for b in ids] + [(a, b) for a in ids for b in ids if a < b]
    rounds = []
    with Load(brokers, "flapping") as load:
        start = time.monotonic()
        try:
            while time.monotonic() - start < FLAP_S:
                chosen = rng.sample(links, rng.randint(1, 2))
                rounds.append(chosen)
                net.heal()
                net.cut(*chosen)
                time.sleep(FLAP_ROUND_S)
        finally:
            net.heal()
        end = time.monotonic()
        load.resumed(end)
    verify("flapping links", load, brokers, zk, start, note=f"seed {FLAP_SEED}, {len(rounds)} rounds: {rounds}")

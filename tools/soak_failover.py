"""Soak: three replicated brokers on a real ZooKeeper, killed and hung at random under an idempotent acks=all load.

    python tools/soak_failover.py --rounds 20 [--faults 4] [--partitions 3] [--rate 1000] [--seed 1]
    python tools/soak_failover.py --transactions --rounds 20 [--abort-ratio 0.2]
    python tools/soak_failover.py --pipeline --rounds 10 [--inputs 2000]
    python tools/soak_failover.py --rounds 25 --kinds partitions    (as root: nftables, users of their own)
    python tools/soak_failover.py --rounds 25 --kinds power         (as root: FUSE)

One ZooKeeper and one cluster of three brokers (loopback, temp dirs, the replication
timeouts of mmlog/testing/cluster.py) serve the whole soak. Each round makes a
topic (replication factor 3, min.insync.replicas 2) and produces unique values to it
with librdkafka (enable.idempotence, acks=all) while `--faults` faults, drawn from the
seeded generator, hit the cluster one after another:

  kill-leader      SIGKILL the leader of a partition (its whole process group), restart it
  kill-follower    SIGKILL a broker that does not lead the chosen partition, restart it
  kill-controller  SIGKILL the controller, restart it
  kill-two         SIGKILL two brokers at once (the ISR falls below min.insync.replicas:
                   acks=all is refused until they return), restart both
  hang-leader      SIGSTOP a leader past the lag time and the ZooKeeper session, until
                   another broker leads and the hung one left the ISR, then SIGCONT
  kill-all         SIGKILL all three, restart all three
  hang-controller  SIGSTOP the controller until another broker is the controller, then SIGCONT
  kill-processor   SIGKILL a processor of a partition's leader (its supervisor starts another)
  kill-fetcher     SIGKILL the replica fetcher process of a follower (its supervisor starts another)
  kill-coordinator SIGKILL the transaction coordinator of the round's transactional id, restart it
                   (--transactions and --pipeline)
  kill-worker      SIGKILL the consume-transform-produce worker, start another (--pipeline only)

Faults off the process, drawn only when named in --kinds (each kind, or the groups
`process`, `partitions` and `power`):

  cut-leader-zk     a zombie leader: cut from ZooKeeper and from both other brokers, still
                    reachable by the clients, until another broker leads the partition, then
                    0.5-3 s more; healed
  cut-controller-zk the controller cut from ZooKeeper only, until another broker is the
                    controller, then 0.5-3 s more; healed
  cut-follower      a follower cut from the partition's leader (both ways) for 2.5-6 s, past
                    replica.lag.time.max.ms, then 0.5-3 s more; healed
  cut-clients       the partition's leader cut from the clients (this tool's own sockets and
                    librdkafka's) for 2.5-6 s, then 0.5-3 s more; healed
  flap              3-6 times, every 3 s: heal every link, cut 1-2 links drawn from the nine
                    (each broker with ZooKeeper, with the clients, with each other broker)
  power-leader      SIGKILL the partition's leader and make its file system lose power
                    (names and data drawn as mmlog/testing/lazyfs.py offers), restart it on the
                    same data dir
  power-follower    the same for a broker that does not lead the partition
  power-any         the same for any broker

With a partition kind drawn, each broker runs as a system user of its own and an nftables
table of this process's own cuts their links (mmlog/testing/network.py); with a power
kind drawn, each broker's data dir is on a power-loss file system of its own
(mmlog/testing/lazyfs.py), so that one broker loses power while the others run on. The table
is deleted and the file systems unmounted at the end, whatever happened.

A restart follows after a random 0.2-2 s; after each fault the round waits for every
replica to be back in the ISR and for acknowledgements to move on. Then the producer
flushes, and the round passes when every delivery succeeded, every acknowledged value
is stored at its acknowledged offset, no value is stored twice, each partition holds its
values in the order they were produced, and the three replicas' segment files are
byte-identical. Beside the idempotent acks=all producer an acks=1 producer (`--loose-rate`)
writes to the same topic: what it lost (acknowledged values not at their offsets) is
reported, never a failure. Each fault's unavailability is measured per partition: the
longest time without an acks=all acknowledgement from the fault until the cluster is whole
again and the load has moved on (for a partition whose leader was hit: from the fault to the
first acknowledgement through the new leader). Each round prints its faults, what acks=all
had acknowledged, lost and duplicated, what acks=1 lost, and the unavailabilities; the soak
ends with the totals, the faults by kind, and the unavailabilities' percentiles.

With --transactions the load is librdkafka's transactional producer instead: transactions
of `--txn-size` values spread over the partitions, each committed, or aborted with
probability --abort-ratio, retried and aborted as librdkafka's error classes say (a fatal
error starts a new producer of the same transactional id: that transaction's outcome is
unknown). The round then passes when every partition's last stable offset reaches its
high watermark (no transaction is left hanging), a read_committed reader sees every value
of each committed transaction exactly once and none of an aborted one, a transaction of
unknown outcome is there whole or not at all, transactions appear in each partition in
the order they ran, and the replicas are byte-identical.

With --pipeline the load is exactly-once end to end: `--inputs` values are produced
(acks=all) to an input topic first, then mmlog/testing/ctp_worker.py (librdkafka: read
committed input, write each value with a "!" and commit the input offsets in the same
transaction) copies them to an output topic while the faults hit; a worker that fails or
is killed is replaced. The round passes when a read_committed reader finds every input
in the output exactly once, no transaction hangs, and the replicas are byte-identical.

tests/replication/test_failover.py and test_transaction_coordinator.py run single faults of
these kinds, tests/replication/test_partitions.py and tests/faults/test_power_loss_cluster.py
single partitions and power losses; docs/replication.md records this soak's figures.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.consumer import Consumer  # noqa: E402
from mmlog.testing import BrokerFailed, ZooKeeperServer, lazyfs, network  # noqa: E402
from mmlog.testing.cluster import (REPLICATION, TXN, check_replicas_identical, controller_of,  # noqa: E402
                                   coordinator_of, full_isr, leader_of, partition_state, three_brokers, wait_for)
from mmlog.testing.load import Writer  # noqa: E402
from mmlog.testing.network import CLIENTS, ZK, Network, broker_user  # noqa: E402

FAULTS = ("kill-leader", "kill-follower", "kill-controller", "kill-two", "hang-leader", "kill-all", "kill-processor",
          "kill-fetcher", "hang-controller")
TXN_FAULTS = FAULTS + ("kill-coordinator",)
PIPELINE_FAULTS = TXN_FAULTS + ("kill-worker",)
PARTITION_FAULTS = ("cut-leader-zk", "cut-controller-zk", "cut-follower", "cut-clients", "flap")
POWER_FAULTS = ("power-leader", "power-follower", "power-any")
HOLD_S = (0.5, 3.0)  # how long a cut lasts past what it waits for
FLAP_PERIOD_S = 3.0


@dataclasses.dataclass
class Rig:
    """The soak's cluster: three brokers, and what the faults drawn need beside them: the Network cutting
    their links (each broker a user of its own), and each broker's power-loss file system (by broker id)."""

    brokers: list
    net: Network | None = None
    machines: list | None = None


@contextlib.contextmanager
def cluster(tmp: Path, kinds):
    """ZooKeeper and three brokers for the whole soak, with users of their own and a Network when partitions
    are drawn, each on a power-loss file system of its own when power losses are. Everything stops, the
    nftables table goes and the file systems are unmounted at the end, whatever ended the soak."""
    cuts, power = bool(set(kinds) & set(PARTITION_FAULTS)), bool(set(kinds) & set(POWER_FAULTS))
    with contextlib.ExitStack() as stack:
        zk = stack.enter_context(ZooKeeperServer(tmp / "zk"))
        machines = []
        for i in range(3 if power else 0):
            machines.append(lazyfs.broker_machine(tmp / f"machine-{i}", i))
            stack.callback(machines[-1].stop)
        users = {i: broker_user(i) for i in range(3)} if cuts else None
        homes = lazyfs.homes(machines) if machines else None
        brokers = stack.enter_context(three_brokers(tmp, zk.connect, users=users, homes=homes, **REPLICATION,
                                                    **TXN))
        net = stack.enter_context(Network(zk.port, brokers)) if cuts else None
        yield Rig(brokers, net, machines)


def controller(brokers):
    """The live broker the metadata names as the controller."""
    live = {b.broker_id: b for b in brokers if b.proc.poll() is None}
    return live[wait_for(lambda: (c := controller_of(brokers)) in live and [c], what="a live controller")[0]]


def restart(rng, victims) -> None:
    time.sleep(rng.uniform(0.2, 2.0))
    for b in victims:
        b.start()


def fault(kind: str, rng, rig: Rig, topic: str, partitions: int) -> str:
    """Apply one fault and undo it; a line saying what was hit."""
    brokers = rig.brokers
    partition = rng.randrange(partitions)
    if kind in PARTITION_FAULTS:
        return flap(rng, rig) if kind == "flap" else cut(kind, rng, rig, topic, partition)
    if kind in POWER_FAULTS:
        return power_loss(kind, rng, rig, topic, partition)
    if kind == "kill-leader":
        victims = [leader_of(brokers, topic, partition)]
    elif kind == "kill-follower":
        leader = leader_of(brokers, topic, partition)
        victims = [rng.choice([b for b in brokers if b is not leader])]
    elif kind == "kill-controller":
        victims = [controller(brokers)]
    elif kind == "kill-coordinator":
        victims = [coordinator_of(brokers, topic)]  # the round's transactional id is its topic's name
    elif kind == "kill-worker":
        return "kill-worker"  # the pipeline round kills and replaces its own worker
    elif kind == "kill-two":
        victims = rng.sample(brokers, 2)
    elif kind == "kill-all":
        victims = list(brokers)
    elif kind in ("kill-processor", "kill-fetcher"):
        return kill_child(kind, rng, brokers, topic, partition)
    elif kind == "hang-controller":
        return hang_controller(brokers)
    else:
        return hang(brokers, topic, partition)
    for b in victims:
        b.kill()
    restart(rng, victims)
    return f"{kind} {[b.broker_id for b in victims]}"


def cut(kind: str, rng, rig: Rig, topic: str, partition: int) -> str:
    """Cut a broker's links as `kind` says (the module docstring), hold the cut, heal it."""
    brokers = rig.brokers
    if kind == "cut-controller-zk":
        victim = controller(brokers)
        links, aimed = [(victim.broker_id, ZK)], f"[{victim.broker_id}]"
    else:
        leader = leader_of(brokers, topic, partition)
        others = [b for b in brokers if b is not leader]
        victim, aimed = leader, f"[{leader.broker_id}]"
        if kind == "cut-leader-zk":
            links = [(leader.broker_id, ZK)] + [(leader.broker_id, b.broker_id) for b in others]
        elif kind == "cut-follower":
            victim = rng.choice(others)
            links, aimed = [(victim.broker_id, leader.broker_id)], f"[{victim.broker_id} from {leader.broker_id}]"
        else:
            links = [(leader.broker_id, CLIENTS)]
    witness = next(b for b in brokers if b is not victim)  # one the soak can still ask (the clients reach it)
    with rig.net.partitioned(*links):
        if kind == "cut-leader-zk":
            wait_for(lambda: partition_state(witness.bootstrap, topic, partition)[0] not in (victim.broker_id, -1),
                     timeout=30, what=f"a new leader of {topic}-{partition}")
        elif kind == "cut-controller-zk":
            wait_for(lambda: controller_of(brokers, witness.bootstrap) not in (-1, victim.broker_id), timeout=30,
                     what="another controller")
        else:
            time.sleep(rng.uniform(2.5, 6.0))  # past replica.lag.time.max.ms (2 s)
        time.sleep(rng.uniform(*HOLD_S))
    return f"{kind} {aimed}"


def flap(rng, rig: Rig) -> str:
    """3-6 times, every FLAP_PERIOD_S: heal every link and cut 1-2 of the nine drawn anew; heal at the end."""
    ids = [b.broker_id for b in rig.brokers]
    links = [(b, ZK) for b in ids] + [(b, CLIENTS) for b in ids] + [(a, b) for a in ids for b in ids if a < b]
    drawn = []
    try:
        for _ in range(rng.randint(3, 6)):
            chosen = rng.sample(links, rng.randint(1, 2))
            drawn.append("+".join(f"{a}-{b}" for a, b in chosen))
            rig.net.heal()
            rig.net.cut(*chosen)
            time.sleep(FLAP_PERIOD_S)
    finally:
        rig.net.heal()
    return f"flap [{' '.join(drawn)}]"


def power_loss(kind: str, rng, rig: Rig, topic: str, partition: int) -> str:
    """SIGKILL a broker (the partition's leader, a follower or any, as `kind` says), make its file system
    forget everything unsynced, and restart it on the same data dir."""
    brokers = rig.brokers
    leader = leader_of(brokers, topic, partition)
    if kind == "power-leader":
        victim = leader
    elif kind == "power-follower":
        victim = rng.choice([b for b in brokers if b is not leader])
    else:
        victim = rng.choice(brokers)
    names, data = rng.choice(("synced", "all")), rng.choice(("empty", "zeros"))
    victim.kill()
    rig.machines[victim.broker_id].lose_power(names, data)
    restart(rng, [victim])
    return f"{kind} [{victim.broker_id}: names {names}, data {data}]"


def hang(brokers, topic: str, partition: int) -> str:
    hung = leader_of(brokers, topic, partition)
    hung.pause()
    try:
        alive = next(b for b in brokers if b is not hung)
        wait_for(lambda: (s := partition_state(alive.bootstrap, topic, partition))[0] not in (hung.broker_id, -1)
                 and hung.broker_id not in s[2], timeout=60, what="a new leader, and the hung broker out of the ISR")
    finally:
        hung.resume()
    return f"hang-leader [{hung.broker_id}]"


def kill_child(kind: str, rng, brokers, topic: str, partition: int) -> str:
    """SIGKILL one process of a broker, which its supervisor replaces: a processor of the partition's leader, or
    the replica fetcher of one of its followers."""
    leader = leader_of(brokers, topic, partition)
    if kind == "kill-processor":
        broker, pids = leader, leader.processor_pids()
    else:
        broker = rng.choice([b for b in brokers if b is not leader])
        pids = [pid for pid in [broker.fetcher_pid()] if pid is not None]
    if pids:
        os.kill(rng.choice(pids), signal.SIGKILL)
    return f"{kind} [{broker.broker_id}]" if pids else f"{kind} [{broker.broker_id}: none running]"


def hang_controller(brokers) -> str:
    """SIGSTOP the controller until another broker is the controller (its ZooKeeper session ended), then SIGCONT."""
    hung = controller(brokers)
    hung.pause()
    try:
        alive = next(b for b in brokers if b is not hung)
        wait_for(lambda: controller_of(brokers, alive.bootstrap) not in (-1, hung.broker_id), timeout=60,
                 what="another controller")
    finally:
        hung.resume()
    return f"hang-controller [{hung.broker_id}]"


def read_back(bootstrap: str, topic: str, partitions: int, ends: dict[int, int],
              isolation: str = "read_uncommitted") -> dict[int, dict[int, bytes]]:
    """offset -> value of every record of each partition below `ends[p]` (read_committed: aborted records and
    markers leave gaps, so it reads until its position reaches the end)."""
    got: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    with Consumer(bootstrap, auto_offset_reset="earliest", isolation_level=isolation) as consumer:
        tps = [(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(consumer.position(tp, timeout=30) < ends[tp[1]] for tp in tps):
            for r in consumer.poll(0.5):
                got[r.partition][r.offset] = r.value
    return got


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> dict[int, int]:
    """Each partition's end: the high watermark, or read_committed, the last stable offset."""
    with Consumer(bootstrap, isolation_level=isolation) as consumer:
        ends = consumer.end_offsets([(topic, p) for p in range(partitions)], timeout=30)
    return {tp.partition: end for tp, end in ends.items()}


def misplaced(acked: dict, got: dict[int, dict[int, bytes]]) -> list[tuple]:
    """(value, partition, offset) of every acknowledged value not stored at its acknowledged offset; `acked`:
    value -> (partition, offset, ...)."""
    return [(v, p, o) for v, (p, o, *_) in list(acked.items()) if got[p].get(o) != v]


def stored_twice(values: list[bytes]) -> int:
    return len(values) - len(set(values))


def serial(value: bytes) -> int:
    """The producer's counter in a value (b"v00000012", b"all-00000012": 12)."""
    return int(value[-8:])


def problems(producer, got: dict[int, dict[int, bytes]], partitions: int) -> list[str]:
    """What the round broke: the module docstring's conditions, one line each. `producer`: its `acked` (value ->
    (partition, offset, ...)) and `errors`; `got`: that producer's values as read back."""
    out = []
    if producer.errors:
        out.append(f"{len(producer.errors)} failed deliveries, first {producer.errors[0]}")
    lost = misplaced(producer.acked, got)
    if lost:
        out.append(f"{len(lost)} of {len(producer.acked)} acknowledged values not at their offsets: {lost[:3]}")
    for p in range(partitions):
        values = [got[p][o] for o in sorted(got[p])]
        if stored_twice(values):
            out.append(f"partition {p}: {stored_twice(values)} values stored twice")
        order = [serial(v) for v in values]
        if order != sorted(order):
            out.append(f"partition {p}: values out of the order they were produced in")
    return out


def identical(brokers, topic: str, partitions: int) -> list[str]:
    """[] if the replicas' segment files are byte-identical, else what the wait for it said."""
    try:
        check_replicas_identical(brokers, topic, partitions)
        return []
    except AssertionError as exc:
        return [str(exc)]


def new_topic(brokers, topic: str, partitions: int) -> None:
    """A replication factor 3, min.insync.replicas 2 topic, once every replica is in its ISR."""
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(topic, partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(brokers, topic, partitions)


def hit(rng, rig: Rig, topic: str, args, progress, step: int, tally: Tally, measure=None) -> list[str]:
    """`args.faults` faults, each followed by a full ISR and `step` more of the load's progress(); what was hit.
    `measure(began, undone)`, if given, is called after each (the fault's start and end, monotonic)."""
    wait_for(lambda: progress() > step, timeout=90, what="a first load")
    hits = []
    for _ in range(args.faults):
        kind = rng.choice(args.kinds)
        began = time.monotonic()
        try:
            line = fault(kind, rng, rig, topic, args.partitions)
        except BrokerFailed:
            print(f"  {time.strftime('%H:%M:%S')} {topic}: {kind} failed", flush=True)  # which fault it was
            raise
        tally.kinds[kind] += 1
        undone = time.monotonic()
        hits.append(f"{line} {undone - began:.1f} s")  # how long it lasted, to set its unavailability against
        print(f"  {time.strftime('%H:%M:%S')} {topic}: {hits[-1]}", flush=True)  # a round that fails says its faults
        full_isr(rig.brokers, topic, args.partitions)
        before = progress()
        wait_for(lambda: progress() > before + step, timeout=120, what="progress after the fault")
        if measure:
            measure(began, undone)
    return hits


@dataclasses.dataclass
class Tally:
    """The soak's totals: faults by kind; the idempotent rounds' acks=all and acks=1 counts and every
    (fault, partition) unavailability in seconds."""

    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    loose_acknowledged: int = 0
    loose_lost: int = 0
    gaps: list = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {c}" for k, c in sorted(self.kinds.items()))
        out = [f"faults {sum(self.kinds.values())}: {kinds}"]
        if self.acknowledged:
            out.append(f"acks=all: {self.acknowledged} acknowledged, {self.lost} lost, {self.duplicated} duplicated; "
                       f"acks=1: {self.loose_acknowledged} acknowledged, {self.loose_lost} lost")
        if self.gaps:
            gaps = sorted(self.gaps)
            out.append(f"unavailability per partition over {len(gaps)} (fault, partition): "
                       f"p50 {percentile(gaps, 50):.2f} s, p99 {percentile(gaps, 99):.2f} s, max {gaps[-1]:.2f} s")
        return out


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * q // 100) - 1))]


class Unavailability:
    """Per fault, each partition's longest time without an acks=all acknowledgement, from the fault until
    every partition is acknowledged again after it was undone."""

    def __init__(self, writer: Writer, partitions: int) -> None:
        self.writer, self.partitions = writer, partitions
        self.faults: list[dict[int, float]] = []

    def acked_since(self, t: float) -> bool:
        return {p for p, _, at in (a for _, a in self.writer.snapshot()) if at > t} >= set(range(self.partitions))

    def __call__(self, began: float, undone: float) -> None:
        wait_for(lambda: self.acked_since(undone), timeout=60, what="acks=all acknowledgements on every partition")
        self.faults.append(self.writer.longest_gaps(began, time.monotonic()))


def run_round(n: int, rng, rig: Rig, args, tally: Tally) -> list[str]:
    brokers = rig.brokers
    topic = f"soak-{n}"
    new_topic(brokers, topic, args.partitions)
    strict = Writer(brokers, topic, args.partitions, "all", True, rate=args.rate)  # values b"all-<n>"
    loose = Writer(brokers, topic, args.partitions, "1", False, rate=args.loose_rate)  # values b"one-<n>"
    unavailable = Unavailability(strict, args.partitions)
    strict.start()
    loose.start()
    try:
        hits = hit(rng, rig, topic, args, lambda: len(strict.acked), 300, tally, unavailable)
    finally:
        strict.stop()
        loose.stop()
    ends = end_offsets(brokers[0].bootstrap, topic, args.partitions)
    got = read_back(brokers[0].bootstrap, topic, args.partitions, ends)
    mine = {p: {o: v for o, v in got[p].items() if v.startswith(b"all-")} for p in got}
    found = problems(strict, mine, args.partitions) + identical(brokers, topic, args.partitions)
    lost = len(misplaced(strict.acked, mine))
    twice = sum(stored_twice(list(mine[p].values())) for p in mine)
    loose_lost = len(misplaced(loose.acked, got))
    tally.acknowledged += len(strict.acked)
    tally.lost += lost
    tally.duplicated += twice
    tally.loose_acknowledged += len(loose.acked)
    tally.loose_lost += loose_lost
    tally.gaps += [g for gaps in unavailable.faults for g in gaps.values()]
    gaps = " ".join("/".join(f"{g:.1f}" for g in gaps.values()) for gaps in unavailable.faults)
    print(f"round {n}: {'; '.join(hits)}: acks=all {len(strict.acked)} acknowledged, {lost} lost, {twice} "
          f"duplicated; acks=1 {len(loose.acked)} acknowledged, {loose_lost} lost; unavailable s {gaps}: "
          f"{'ok' if not found else 'FAILED: ' + ' | '.join(found)}", flush=True)
    return found


class TransactionalLoad(threading.Thread):
    """librdkafka's transactional producer running transactions one after another until stopped; keeps each
    transaction's values and outcome ("committed", "aborted" or "unknown")."""

    def __init__(self, brokers, topic: str, partitions: int, size: int, abort_ratio: float, rng) -> None:
        super().__init__(daemon=True)
        self.bootstrap = ",".join(b.bootstrap for b in brokers)
        self.topic, self.partitions, self.size, self.abort_ratio = topic, partitions, size, abort_ratio
        self.rng = random.Random(rng.random())
        self.outcomes: dict[int, str] = {}
        self.values: dict[int, list[bytes]] = {}
        self.fatal: list[str] = []
        self._halt = threading.Event()

    def _producer(self):
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.topic, "linger.ms": 5,
            "message.timeout.ms": 60_000, "transaction.timeout.ms": 60_000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})
        producer.init_transactions(120)
        return producer

    def run(self) -> None:
        producer, n = self._producer(), 0
        while not self._halt.is_set():
            values = self.values[n] = [b"t%06d-%04d" % (n, i) for i in range(self.size)]
            commit = self.rng.random() >= self.abort_ratio
            try:
                producer.begin_transaction()
                for i, value in enumerate(values):
                    producer.produce(self.topic, value, partition=i % self.partitions)
                    producer.poll(0)
                self.outcomes[n] = self._end(producer, commit)
            except confluent_kafka.KafkaException as exc:  # fatal: a new producer fences this one
                self.outcomes[n] = "unknown"
                self.fatal.append(f"transaction {n}: {exc.args[0]}")
                producer = self._producer()
            n += 1

    @staticmethod
    def _end(producer, commit: bool) -> str:
        """Commit (or abort) as librdkafka's error classes say: retry a retriable error, abort an abortable one."""
        while True:
            try:
                if commit:
                    producer.commit_transaction(60)
                    return "committed"
                producer.abort_transaction(60)
                return "aborted"
            except confluent_kafka.KafkaException as exc:
                error = exc.args[0]
                if error.retriable():
                    continue
                if error.txn_requires_abort():
                    commit = False
                    continue
                raise

    def progress(self) -> int:
        return sum(1 for outcome in list(self.outcomes.values()) if outcome == "committed")

    def stop(self) -> None:
        self._halt.set()
        self.join(300)


def stable_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int] | None:
    """Each partition's high watermark once its last stable offset has reached it (None: not yet)."""
    hw = end_offsets(bootstrap, topic, partitions)
    return hw if end_offsets(bootstrap, topic, partitions, "read_committed") == hw else None


def txn_problems(load: TransactionalLoad, got: dict[int, dict[int, bytes]], partitions: int) -> list[str]:
    """What a transactional round broke (the module docstring's conditions), one line each."""
    out = [f"fatal: {line}" for line in load.fatal[:3]]
    seen: dict[bytes, int] = {}
    for p in range(partitions):
        order = []
        for offset in sorted(got[p]):
            value = got[p][offset]
            seen[value] = seen.get(value, 0) + 1
            order.append(int(value[1:7]))
        if order != sorted(order):
            out.append(f"partition {p}: transactions out of the order they ran in")
    twice = [v for v, count in seen.items() if count > 1]
    if twice:
        out.append(f"{len(twice)} values read twice: {twice[:3]}")
    for n, outcome in sorted(load.outcomes.items()):
        present = sum(1 for v in load.values[n] if v in seen)
        if outcome == "committed" and present != len(load.values[n]):
            out.append(f"committed transaction {n}: {present} of {len(load.values[n])} values read")
        elif outcome == "aborted" and present:
            out.append(f"aborted transaction {n}: {present} values read")
        elif outcome == "unknown" and present not in (0, len(load.values[n])):
            out.append(f"transaction {n} of unknown outcome: {present} of {len(load.values[n])} values read")
    known = set(load.outcomes)
    strays = [v for v in seen if int(v[1:7]) not in known]
    if strays:
        out.append(f"{len(strays)} values of a transaction that never ended: {strays[:3]}")
    return out


def run_txn_round(n: int, rng, rig: Rig, args, tally: Tally) -> list[str]:
    brokers = rig.brokers
    topic = f"soak-txn-{n}"
    new_topic(brokers, topic, args.partitions)
    load = TransactionalLoad(brokers, topic, args.partitions, args.txn_size, args.abort_ratio, rng)
    load.start()
    try:
        hits = hit(rng, rig, topic, args, load.progress, 5, tally)
    finally:
        load.stop()
    found = []
    try:
        ends = wait_for(lambda: stable_ends(brokers[0].bootstrap, topic, args.partitions), timeout=60,
                        what="every last stable offset at its high watermark")
        got = read_back(brokers[0].bootstrap, topic, args.partitions, ends, "read_committed")
        found = txn_problems(load, got, args.partitions)
    except AssertionError as exc:
        found.append(str(exc))
    found += identical(brokers, topic, args.partitions)
    counts = {o: sum(1 for v in load.outcomes.values() if v == o) for o in ("committed", "aborted", "unknown")}
    print(f"round {n}: transactions {counts}, {'; '.join(hits)}: "
          f"{'ok' if not found else 'FAILED: ' + ' | '.join(found)}", flush=True)
    return found


class Pipeline:
    """mmlog/testing/ctp_worker.py copying `source` to `sink` in transactions (transactional id `txn_id`),
    replaced whenever it exits or is killed until the sink holds every input."""

    def __init__(self, brokers, source: str, sink: str, txn_id: str, partitions: int) -> None:
        self.args = [sys.executable, "-m", "mmlog.testing.ctp_worker", ",".join(b.bootstrap for b in brokers),
                     source, sink, f"{txn_id}-group", txn_id, str(partitions)]
        self.failures: list[str] = []
        self.worker = self._start()

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen(self.args, cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    def kill(self) -> None:
        self.worker.kill()
        self.worker.wait(30)
        self.worker = self._start()

    def keep_alive(self) -> None:
        """A worker that exited (it stops after 3 s without input, or on any error) is replaced."""
        if self.worker.poll() is not None:
            if self.worker.returncode != 0:
                self.failures.append(self.worker.stderr.read().strip()[-200:])
            self.worker = self._start()

    def stop(self) -> None:
        self.worker.kill()
        self.worker.wait(30)


def committed_values(bootstrap: str, topic: str, partitions: int) -> list[bytes] | None:
    """Every value a read_committed reader finds in the topic, once no transaction is open in it (else None)."""
    ends = stable_ends(bootstrap, topic, partitions)
    if ends is None:
        return None
    got = read_back(bootstrap, topic, partitions, ends, "read_committed")
    return [v for p in range(partitions) for v in got[p].values()]


def run_pipeline_round(n: int, rng, rig: Rig, args, tally: Tally) -> list[str]:
    brokers = rig.brokers
    source, sink = f"soak-in-{n}", f"soak-out-{n}"
    for topic in (source, sink):
        new_topic(brokers, topic, args.partitions)
    inputs = [b"in-%06d" % i for i in range(args.inputs)]
    producer = confluent_kafka.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers), "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5})
    for i, value in enumerate(inputs):
        producer.produce(source, value, partition=i % args.partitions)
        producer.poll(0)
    assert producer.flush(60) == 0, "inputs not all acknowledged"
    bootstrap = brokers[0].bootstrap
    pipeline = Pipeline(brokers, source, sink, sink, args.partitions)  # the transactional id is the sink's name
    hits = []
    try:
        for _ in range(args.faults):
            time.sleep(rng.uniform(0.5, 3.0))
            kind = rng.choice(args.kinds)
            if kind == "kill-worker":
                pipeline.kill()
            hits.append(fault(kind, rng, rig, sink, args.partitions))
            tally.kinds[kind] += 1
            full_isr(brokers, sink, args.partitions)
            pipeline.keep_alive()
        deadline = time.monotonic() + 300
        while True:
            pipeline.keep_alive()
            values = committed_values(bootstrap, sink, args.partitions)
            if values is not None and len(values) >= len(inputs) or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        pipeline.stop()
    found = []
    try:
        values = wait_for(lambda: committed_values(bootstrap, sink, args.partitions), timeout=60,
                          what="every last stable offset of the output at its high watermark")
        counts = collections.Counter(values)
        missing = [v for v in inputs if counts[v + b"!"] == 0]
        twice = [v for v, c in counts.items() if c > 1]
        if missing:
            found.append(f"{len(missing)} of {len(inputs)} inputs missing from the output: {missing[:3]}")
        if twice:
            found.append(f"{len(twice)} outputs written twice: {twice[:3]}")
    except AssertionError as exc:
        found.append(str(exc))
    found += identical(brokers, source, args.partitions) + identical(brokers, sink, args.partitions)
    print(f"round {n}: {len(inputs)} inputs, {len(pipeline.failures)} workers failed, {'; '.join(hits)}: "
          f"{'ok' if not found else 'FAILED: ' + ' | '.join(found)}", flush=True)
    return found


def keep_logs(rig: Rig, n: int) -> Path:
    """Each broker's log so far, written to a directory that outlives the soak (a failed round's evidence)."""
    out = Path(tempfile.mkdtemp(prefix=f"mmlog-soak-round-{n}-logs-"))
    for b in rig.brokers:
        (out / f"broker-{b.broker_id}.log").write_text("\n".join(b.log_lines) + "\n")
    return out


def kinds_of(parser, spec: str | None, process: tuple[str, ...]) -> list[str]:
    """The faults to draw from: `spec` names kinds and the groups process (the mode's own), partitions and
    power; none: the mode's process faults. Refused, with the reason, where a kind's faults cannot be made."""
    groups = {"process": process, "partitions": PARTITION_FAULTS, "power": POWER_FAULTS}
    kinds = [k for word in (spec or "process").split(",") for k in groups.get(word, (word,))]
    known = process + PARTITION_FAULTS + POWER_FAULTS
    unknown = set(kinds) - set(known)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; known: {', '.join(known)}, or {', '.join(groups)}")
    why = [network.unavailable() if set(kinds) & set(PARTITION_FAULTS) else None,
           lazyfs.available() if set(kinds) & set(POWER_FAULTS) else None]
    if any(why):
        parser.error("; ".join(filter(None, why)))
    return kinds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--faults", type=int, default=4, help="faults a round")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=int, default=1000, help="values a second produced")
    parser.add_argument("--loose-rate", type=int, default=200, help="values a second the acks=1 producer sends")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", help="faults to draw from, comma-separated: kinds, or the groups process, "
                                        "partitions, power (default: process)")
    parser.add_argument("--transactions", action="store_true", help="a transactional load instead")
    parser.add_argument("--txn-size", type=int, default=30, help="values a transaction")
    parser.add_argument("--abort-ratio", type=float, default=0.2, help="share of transactions aborted")
    parser.add_argument("--pipeline", action="store_true", help="a consume-transform-produce load instead")
    parser.add_argument("--inputs", type=int, default=2000, help="values the pipeline copies a round")
    args = parser.parse_args(argv)
    args.kinds = kinds_of(parser, args.kinds,
                          PIPELINE_FAULTS if args.pipeline else TXN_FAULTS if args.transactions else FAULTS)
    rng = random.Random(args.seed)
    tally = Tally()
    failed = rounds = 0
    started = time.monotonic()
    print(f"seed {args.seed}, kinds {','.join(args.kinds)}", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="mmlog-soak-") as tmp, cluster(Path(tmp), args.kinds) as rig:
            for n in range(args.rounds):
                rounds += 1
                try:
                    run = run_pipeline_round if args.pipeline else run_txn_round if args.transactions else run_round
                    found = run(n, rng, rig, args, tally)
                    if found:  # the round's checks failed: what the brokers said is the evidence
                        failed += 1
                        print(f"round {n}: brokers' logs in {keep_logs(rig, n)}", flush=True)
                except AssertionError as exc:  # a wait that timed out: the cluster did not recover
                    failed += 1
                    print(f"round {n}: FAILED: {exc}; brokers' logs in {keep_logs(rig, n)}", flush=True)
                except BrokerFailed as exc:  # nothing more to soak: the cluster is short of a broker
                    failed += 1
                    print(f"round {n}: FAILED, and the soak ends: {exc}", flush=True)
                    break
    finally:  # the totals so far, whatever ended the soak (the round that raised counts as begun)
        mode = "pipeline " if args.pipeline else "transactional " if args.transactions else ""
        for line in tally.lines():
            print(line)
        print(f"{rounds} {mode}rounds, {failed} failed, "
              f"{args.faults} faults a round, seed {args.seed}, "
              f"{time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    # SIGTERM ends the soak as Ctrl-C does: through every cleanup (brokers, nftables table, mounts).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())

"""Soak: three replicated brokers on a real ZooKeeper, partitioned at random under idempotent acks=all load.

    python tools/soak_partitions.py --rounds 10 [--faults 10] [--seed 1] [--hold 1,8]

One ZooKeeper and one cluster of three brokers, each run as its own system user, with the
network harness of tests/replication/partitions.py (an nftables table of this process's
own, deleted at the end) and the replication timeouts of tests/replication/conftest.py
(ZooKeeper session 3 s, replica.lag.time.max.ms 2 s) serve the whole soak. Each round makes
a topic (3 partitions, replication factor 3, min.insync.replicas 2) and produces to it with
librdkafka, idempotent acks=all and acks=1 side by side (tests/replication/
test_partitions.py's Load), while `--faults` partitions, drawn from the seeded generator,
hit the cluster one after another, each held for a random time in `--hold` seconds:

  zombie           a partition's leader cut from ZooKeeper and from both other brokers
  controller-zk    the controller cut from ZooKeeper
  broker-zk        a random broker cut from ZooKeeper
  follower-leader  a follower cut from its leader (both ways)
  clients          a random broker cut from the clients
  two-links        two random links of the nine (broker-ZooKeeper, broker-broker, broker-clients)

After each fault the links heal and the round waits for every replica to be back in the
ISR, every broker registered, and acks=all acknowledgements on every partition. The round
then passes when the test module's checks hold (every acknowledged acks=all record exactly
once at its offset, none two at one offset, replicas byte-identical, no broker logging an
error). Printed: each round's figures, and at the end the rounds, faults, acknowledged,
lost and duplicated records, what acks=1 lost, and percentiles of the unavailability (each
partition's longest time without an acks=all acknowledgement, from a cut until every
partition is acknowledged again after its heal). Needs root and nft.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mmlog.acceptor.zookeeper import paths  # noqa: E402
from mmlog.acceptor.zookeeper.session import connect  # noqa: E402
from mmlog.testing import ZooKeeperServer  # noqa: E402
from tests.acceptor.zookeeper.conftest import three_brokers  # noqa: E402
from tests.replication.conftest import REPLICATION  # noqa: E402
from tests.replication.partitions import CLIENTS, ZK, Network, broker_user  # noqa: E402
from tests.replication.test_partitions import Load, healed, longest_gaps, verify, zk_state  # noqa: E402

KINDS = ("zombie", "controller-zk", "broker-zk", "follower-leader", "clients", "two-links")
PARTITIONS = 3


def links_of(kind: str, rng, ids: list[int], zk, topic: str) -> list[tuple]:
    """The links one fault of `kind` cuts, for the cluster as ZooKeeper describes it now."""
    p = rng.randrange(PARTITIONS)
    leader = zk_state(zk, topic, p).leader
    leader = leader if leader in ids else rng.choice(ids)
    if kind == "zombie":
        return [(leader, ZK)] + [(leader, b) for b in ids if b != leader]
    if kind == "controller-zk":
        return [(int(paths.load(zk.get(paths.CONTROLLER)[0])["brokerid"]), ZK)]
    if kind == "broker-zk":
        return [(rng.choice(ids), ZK)]
    if kind == "follower-leader":
        return [(rng.choice([b for b in ids if b != leader]), leader)]
    if kind == "clients":
        return [(rng.choice(ids), CLIENTS)]
    every = [(b, ZK) for b in ids] + [(b, CLIENTS) for b in ids] + [(a, b) for a in ids for b in ids if a < b]
    return rng.sample(every, 2)


def run_round(n: int, rng, brokers, net, zk, args, totals: dict) -> list[str]:
    topic = f"soak-{n}"
    ids = [b.broker_id for b in brokers]
    gaps: list[float] = []
    started = time.monotonic()
    logs_from = {b.broker_id: len(b.log_lines) for b in brokers}
    try:
        with Load(brokers, topic, PARTITIONS) as load:
            for _ in range(args.faults):
                kind = rng.choice(args.kinds)
                links = links_of(kind, rng, ids, zk, topic)
                hold = rng.uniform(*args.hold)
                cut_at = time.monotonic()
                net.cut(*links)
                try:
                    time.sleep(hold)
                finally:
                    net.heal()
                healed_at = time.monotonic()
                healed(brokers, zk, topic, PARTITIONS)
                load.resumed(healed_at)
                fault_gaps = longest_gaps(load, cut_at, load.resumed_at)
                gaps += fault_gaps.values()
                totals["faults"] += 1
                print(f"  round {n}: {kind:<16} {hold:4.1f} s {links} unavailability {fault_gaps}", flush=True)
        report = verify(f"round {n}", load, brokers, zk, started, logs_from=logs_from)
    except AssertionError as exc:  # a check failed, or the cluster did not come back: the round failed
        net.heal()
        return [str(exc) or repr(exc)]
    totals["acknowledged"] += report["acks=all acknowledged"]
    totals["acks=1 acknowledged"] += report["acks=1 acknowledged"]
    totals["acks=1 lost"] += report["acks=1 lost"]
    totals["gaps"] += gaps
    return []


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--faults", type=int, default=10, help="faults a round")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hold", default="1,8", help="min,max seconds a fault lasts")
    parser.add_argument("--kinds", help="faults to draw from, comma-separated (default: all)")
    args = parser.parse_args(argv)
    args.hold = tuple(float(x) for x in args.hold.split(","))
    args.kinds = args.kinds.split(",") if args.kinds else list(KINDS)
    if os.geteuid() != 0 or shutil.which("nft") is None:
        print("needs root and nft (nftables)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    totals = {"faults": 0, "acknowledged": 0, "acks=1 acknowledged": 0, "acks=1 lost": 0, "gaps": []}
    failed = 0
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="mmlog-soak-partitions-"))
    try:
        with contextlib.ExitStack() as stack:
            zookeeper = stack.enter_context(ZooKeeperServer(work / "zookeeper"))
            zk_connect = f"{zookeeper.connect}/soak-{uuid.uuid4().hex[:8]}"
            users = {i: broker_user(i) for i in range(3)}
            brokers = stack.enter_context(three_brokers(work, zk_connect, users=users, **REPLICATION))
            net = stack.enter_context(Network(zookeeper.port, brokers))
            zk = connect(zk_connect, 10_000, 10_000)
            stack.callback(zk.close)
            stack.callback(zk.stop)
            for n in range(args.rounds):
                problems = run_round(n, rng, brokers, net, zk, args, totals)
                failed += bool(problems)
                print(f"round {n}: {'FAILED ' + '; '.join(problems) if problems else 'ok'}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    gaps = totals.pop("gaps")
    print(f"\nseed {args.seed}: {args.rounds} rounds, {totals['faults']} faults, {failed} failed, "
          f"{time.monotonic() - started:.0f} s; acks=all {totals['acknowledged']} acknowledged, 0 lost, "
          f"0 duplicated in the rounds that passed; acks=1 {totals['acks=1 lost']} lost of "
          f"{totals['acks=1 acknowledged']}; unavailability per partition and fault p50 {percentile(gaps, 0.5):.2f} s, "
          f"p90 {percentile(gaps, 0.9):.2f} s, p99 {percentile(gaps, 0.99):.2f} s, max {max(gaps, default=0):.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

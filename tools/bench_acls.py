"""Produce msg/s with the ACL authoriser on (one ALLOW ACL, decisions cached) and off, in one run.

    python tools/bench_acls.py [--records N] [--size BYTES] [--rounds R]

Two standalone brokers (EmbeddedBroker, loopback, 2 processors each), identical but
for `authorizer.class.name`; the authorised one holds a single ACL, ALLOW
User:ANONYMOUS All on the topic prefix `bench-` (written into its store before it
starts). Per round, alternating brokers (and which goes first) so a noisy machine treats them alike,
confluent-kafka produces N records of BYTES into a fresh one-partition topic, acks=1,
two ways: `batched` (linger.ms=5, the usual setting: few large requests) and
`per-record` (batch.num.messages=1: one Produce request per record, where a
per-request cost shows most). Prints the median msg/s of each and the ratio on/off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka as ck  # noqa: E402

from mmlog.security import acls  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402
from tools.bench_security import produce  # noqa: E402

MODES = {"batched": ({}, 1.0),  # bench_security's producer: linger.ms=5, batch.size 1 MiB, acks=1
         "per-record": ({"linger.ms": 0, "batch.num.messages": 1}, 0.2)}  # (settings, share of --records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    value = os.urandom(args.size)
    work = Path(tempfile.mkdtemp(prefix="bench-acls-"))
    (work / "on").mkdir()
    acls.save(acls.path_in(work / "on"), [acls.Binding(acls.TOPIC, "bench-", acls.PREFIXED, "User:ANONYMOUS", "*",
                                                       acls.ALL, acls.ALLOW)])
    on = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    times: dict[tuple[str, str], list[float]] = {}
    with EmbeddedBroker(work / "off", processors=2, ready_timeout=120) as off_broker, \
            EmbeddedBroker(work / "on", processors=2, config=on, ready_timeout=120) as on_broker:
        for round_ in range(args.rounds):
            for mode, (settings, share) in MODES.items():
                pair = (("off", off_broker), ("on", on_broker))
                for label, broker in pair if round_ % 2 == 0 else pair[::-1]:  # neither always goes first
                    n = int(args.records * share)
                    elapsed = produce({"bootstrap.servers": broker.bootstrap}, f"bench-{mode}-{round_}", n, value,
                                      **settings)
                    times.setdefault((mode, label), []).append(n / elapsed)
                    print(f"round {round_} {mode:<10} authoriser {label:<3}: {n / elapsed:>9,.0f} msg/s", flush=True)
    print(f"{args.records} records of {args.size} bytes (per-record: {int(args.records * MODES['per-record'][1])}), "
          f"median of {args.rounds} rounds, confluent-kafka {ck.version()[0]} / librdkafka {ck.libversion()[0]}")
    print(f"{'mode':<11} {'off msg/s':>10} {'on msg/s':>10} {'on/off':>7}")
    for mode in MODES:
        off, on_ = statistics.median(times[(mode, "off")]), statistics.median(times[(mode, "on")])
        print(f"{mode:<11} {off:>10,.0f} {on_:>10,.0f} {on_ / off:>7.2f}")


if __name__ == "__main__":
    main()

"""Descriptors per partition in a broker's main process and in a processor (docs/robustness.md).

    PYTHONPATH=. python tools/measure_descriptors.py --topics 500 [--override log.max.open.partitions=64]

Starts a broker (one processor, loopback, temp dir), counts the descriptors of the main
process and the processor, creates `--topics` one-partition topics (CreateTopics, 100 a
request), produces one record to each (so the processor opens every one), and counts
again; prints the counts and the difference per partition. Run it with PYTHONPATH
pointing at another checkout to measure that one.
"""

from __future__ import annotations

import argparse
import os

from mmlog.client.connection import BrokerConnection
from mmlog.protocol.messages import create_topics, produce
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--override", action="append", default=[], help="NAME=VALUE broker setting")
    args = parser.parse_args()
    config = dict(item.split("=", 1) for item in args.override)
    with EmbeddedBroker(processors=1, config=config) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        (proc,) = broker.processor_pids()
        before = descriptors(broker.pid), descriptors(proc)
        names = [f"fd-{i:05d}" for i in range(args.topics)]
        with BrokerConnection(host, int(port), timeout=120) as conn:
            for start in range(0, len(names), 100):
                r = conn.request(create_topics.API_KEY, 4, create_topics.REQUEST(
                    topics=[{"name": n, "num_partitions": 1, "replication_factor": 1}
                            for n in names[start:start + 100]], timeout_ms=60_000))
                assert all(t.error_code == 0 for t in r.topics), r
            created = descriptors(broker.pid), descriptors(proc)
            for name in names:
                r = conn.request(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=5000, topic_data=[
                    {"name": name, "partition_data": [{"index": 0, "records": build_batch([(None, b"x")])}]}]))
                assert r.responses[0].partition_responses[0].error_code == 0, r
            used = descriptors(broker.pid), descriptors(proc)
        n = args.topics
        print(f"main process: {before[0]} before, {created[0]} after creating {n} partitions "
              f"({(created[0] - before[0]) / n:.2f} per partition), {used[0]} after producing to each")
        print(f"processor:    {before[1]} before, {created[1]} after creating, {used[1]} after producing to each "
              f"({(used[1] - created[1]) / n:.2f} per partition)")


if __name__ == "__main__":
    main()

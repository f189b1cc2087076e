"""A consumer-group member in a process of its own, so that a test can SIGKILL it.

    python -m tests.client.group_member BOOTSTRAP GROUP TOPIC [PROCESSING_MS]

Subscribes to TOPIC in GROUP (auto-commit every 100 ms, a 1.5 s session) and
writes JSON lines to stdout: {"assigned": [...]}, {"revoked": [...]} from the
rebalance callbacks and {"records": [[partition, offset, value], ...]} for each
poll, after which it "processes" for PROCESSING_MS. SIGTERM makes it close (a
final commit and LeaveGroup) and print {"closed": true}.
"""

from __future__ import annotations

import json
import signal
import sys
import time

from mmlog.client import Consumer

SESSION_TIMEOUT_MS = 1500


def main(argv: list[str]) -> int:
    bootstrap, group, topic = argv[:3]
    processing = int(argv[3]) / 1000 if len(argv) > 3 else 0.0
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def emit(**fields) -> None:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()

    consumer = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", client_id="member",
                        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=250,
                        auto_commit_interval_ms=100, fetch_max_wait_ms=100, max_partition_fetch_bytes=512)
    consumer.subscribe([topic], on_assign=lambda c, tps: emit(assigned=[tp.partition for tp in tps]),
                       on_revoke=lambda c, tps: emit(revoked=[tp.partition for tp in tps]))
    emit(started=True)
    while not stop:
        records = consumer.poll(0.1)
        if records:
            emit(records=[[r.partition, r.offset, r.value.decode()] for r in records])
            time.sleep(processing)
    consumer.close()
    emit(closed=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

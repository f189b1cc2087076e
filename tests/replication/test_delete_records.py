"""DeleteRecords on a replicated partition: the leader answers once every live replica moved its log
start (followers take it from their Fetch answers), and a new leader keeps it."""

from __future__ import annotations

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.log.state import PartitionState
from mmlog.testing.cluster import partition_state
from mmlog.testing.wait import wait_for


def log_start(broker, topic: str, partition: int = 0) -> int:
    state = PartitionState(broker.data_dir / f"{topic}-{partition}")
    try:
        return state.snapshot().log_start
    finally:
        state.close()


def test_the_low_watermark_is_answered_once_every_replica_moved_and_survives_failover(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("trimmed", 1, {"segment.bytes": "2048"}, replication_factor=3)
    leader, _, _ = wait_for(lambda: (s := partition_state(replicated[0].bootstrap, "trimmed"))[0] >= 0
                            and len(s[2]) == 3 and s, what="a leader and a full ISR")
    with Producer(replicated[0].bootstrap, acks="all", linger_ms=0, batch_size=1) as producer:
        for i in range(100):
            producer.send("trimmed", b"%03d" % i + b"." * 100, partition=0).get(timeout=30)
    with Admin(replicated[1].bootstrap, timeout=20) as admin:
        assert admin.delete_records("trimmed", {0: 60}) == {0: 60}
        assert admin.earliest_offsets("trimmed") == {0: 60}
    # the answer came once every replica had it: no waiting here
    assert [log_start(b, "trimmed") for b in replicated] == [60, 60, 60]
    for b in replicated:  # whole segments below the log start are gone everywhere
        bases = sorted(int(f.stem) for f in (b.data_dir / "trimmed-0").glob("*.log"))
        assert bases[0] <= 60 < bases[1]

    by_id = {b.broker_id: b for b in replicated}
    by_id[leader].stop()
    rest = [b for b in replicated if b.broker_id != leader]
    wait_for(lambda: partition_state(rest[0].bootstrap, "trimmed")[0] not in (-1, leader), what="a new leader")
    with Admin(rest[0].bootstrap) as admin:
        assert wait_for(lambda: admin.earliest_offsets("trimmed") == {0: 60}, what="the new leader's log start")
        assert admin.latest_offsets("trimmed") == {0: 100}

"""Transaction markers replicate: followers copy them with the data, keep the same last stable offset and
transaction indexes, and a new leader gives read_committed consumers the same answer as the old one."""

from __future__ import annotations

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.log import txn_index
from tests.client.consumer_tools import TxnProducer, produce, write_markers
from tests.interop.test_read_committed import latest
from tests.wait import wait_for
from tests.replication.replicas import log_bytes
from tests.replication.test_failover import full_isr, leader_of

TOPIC = "txn-replicated"


def committed_values(bootstrap: str, expect: int) -> list[bytes]:
    got: list[bytes] = []
    with Consumer(bootstrap, auto_offset_reset="earliest", isolation_level="read_committed") as c:
        c.assign([(TOPIC, 0)])
        wait_for(lambda: got.extend(r.value for r in c.poll(0.3)) or len(got) >= expect, timeout=30,
                 what="the committed records")
    return got


def test_markers_reach_followers_and_a_new_leader_answers_read_committed_alike(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic(TOPIC, 1, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(replicated, TOPIC, 1)
    leader = leader_of(replicated, TOPIC)
    a, b = TxnProducer(leader), TxnProducer(leader)
    produce(leader, TOPIC, 0, [(None, b"p0")])
    a.send(TOPIC, 0, [(None, b"a0"), (None, b"a1")])
    b.send(TOPIC, 0, [(None, b"b0")])
    # acks=all: the answer comes once the followers hold the markers
    assert write_markers(leader, [(a.pid, 0, False, 0, {TOPIC: [0]}), (b.pid, 0, True, 0, {TOPIC: [0]})]) == {
        (a.pid, TOPIC, 0): 0, (b.pid, TOPIC, 0): 0}
    produce(leader, TOPIC, 0, [(None, b"p1")])
    c = TxnProducer(leader)
    open_at = c.send(TOPIC, 0, [(None, b"c0")])  # still open at the failover
    produce(leader, TOPIC, 0, [(None, b"p2")])
    before = committed_values(leader.bootstrap, 3)
    assert before == [b"p0", b"b0", b"p1"]
    assert latest(leader, TOPIC, 1) == open_at
    wait_for(lambda: len({log_bytes(x.data_dir, TOPIC) for x in replicated}) == 1, timeout=20,
             what="byte-identical replicas")
    indexes = {bytes(txn_index.path(x.data_dir / f"{TOPIC}-0", 0).read_bytes()) for x in replicated}
    assert len(indexes) == 1 and len(next(iter(indexes))) == txn_index.ENTRY_SIZE
    leader.kill()
    survivors = [x for x in replicated if x is not leader]
    new = leader_of(survivors, TOPIC)
    assert new is not leader
    assert committed_values(new.bootstrap, 3) == before
    assert latest(new, TOPIC, 1) == open_at  # the new leader's LSO: the open transaction, rebuilt from its copy
    leader.start()

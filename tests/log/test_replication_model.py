"""The HW and ISR rules hold under any interleaving (hypothesis, stateful), with real partition logs.

Three replicas of one partition are real `Partition` directories. The test plays
the controller and the network in a few lines of plain Python, the way the broker
does them (see docs/replication.md):

- the controller's state: leader, leader epoch, ISR; an election picks the first
  live ISR member in assignment order and bumps the epoch (unclean election off:
  no live ISR member leaves the partition offline);
- the leader shrinks the ISR to drop a follower (the lag timer may do so at any
  time) and expands it with a follower whose LEO has reached the HW;
- a follower truncates by leader epoch before it fetches, and each fetch copies
  what the leader holds beyond its LEO and reports its LEO;
- a crash closes a replica uncleanly (a process crash: the page cache keeps what was
  written) and it restarts as a follower.

A produce with acks=all is acknowledged once the leader's HW has passed it. The
invariant, after every step: every acknowledged batch is, byte for byte, at its
offset in the log of the current leader and of every live ISR member, and no two
replicas hold different batches at an offset below their HWs.
"""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis import strategies as st

from mmlog.config.settings import LogConfig
from mmlog.log.partition import Partition
from tests.log.logtools import stored_batches, tagged_batch, truncate_by_epoch

BROKERS = (1, 2, 3)
CFG = LogConfig(segment_bytes=2048, segment_index_bytes=1024, index_interval_bytes=256)


def batches_by_offset(p: Partition) -> dict[int, bytes]:
    """base offset -> the batch's bytes with its leader epoch, as stored."""
    return {b.base_offset: b.data for b in stored_batches(p.directory)}


class Replication(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.root = tempfile.mkdtemp(prefix="mmlog-model-")
        self.parts = {b: self._open(b) for b in BROKERS}
        self.live = set(BROKERS)
        self.leader, self.epoch, self.isr = 1, 1, list(BROKERS)
        self.needs_truncation = set()
        self._apply_roles()
        self.pending: list[tuple[int, int, bytes]] = []  # (base, last, bytes) appended, not yet acknowledged
        self.acked: dict[int, bytes] = {}  # base offset -> bytes, acknowledged to a producer
        self.count = 0

    def _open(self, broker: int) -> Partition:
        return Partition(os.path.join(self.root, f"b{broker}", "t-0"), CFG, broker_id=broker)

    def _apply_roles(self) -> None:
        for b in self.live:
            p = self.parts[b]
            if b == self.leader:
                p.become_leader(self.epoch, BROKERS, tuple(self.isr), self.epoch)
            else:
                p.become_follower(self.leader, self.epoch, BROKERS, tuple(self.isr), self.epoch)
                self.needs_truncation.add(b)

    # ------------------------------------------------------------ the controller

    def _elect(self) -> None:
        """The leader is gone: the first live ISR member in assignment order leads, in a new epoch."""
        self.isr = [b for b in self.isr if b in self.live] or self.isr
        candidates = [b for b in BROKERS if b in self.isr and b in self.live]
        self.leader = candidates[0] if candidates else -1
        self.epoch += 1
        self.pending = []  # produces parked on the old leader fail (NOT_LEADER_OR_FOLLOWER): never acknowledged
        if self.leader != -1:
            self._apply_roles()

    # ------------------------------------------------------------ rules

    @precondition(lambda self: self.leader != -1)
    @rule(records=st.integers(1, 3))
    def produce(self, records):
        leader = self.parts[self.leader]
        self.count += 1
        info = leader.append(tagged_batch(f"p{self.count}", records, pad=40))
        self.pending.append((info.base_offset, info.last_offset))
        self._acknowledge()

    def _followers(self) -> list[int]:
        return sorted(b for b in self.live if b != self.leader)

    @precondition(lambda self: self.leader != -1 and self._followers())
    @rule(data=st.data())
    def fetch(self, data):
        broker = data.draw(st.sampled_from(self._followers()))
        leader, follower = self.parts[self.leader], self.parts[broker]
        if broker in self.needs_truncation:
            truncate_by_epoch(follower, leader)
            self.needs_truncation.discard(broker)
        offset = follower.log_end_offset
        leader.record_follower_fetch(broker, offset)
        leader.maybe_advance_high_watermark()
        if offset < leader.log_end_offset:
            got = leader.read(offset, 1 << 20, upto_log_end=True)
            data = bytearray(os.pread(got.slice.file.fileno(), got.slice.size, got.slice.position))
            follower.append_replica(data, got.high_watermark)
        follower.set_follower_high_watermark(leader.high_watermark)
        self._acknowledge()

    @precondition(lambda self: self.leader != -1 and len(self.isr) > 1)
    @rule(data=st.data())
    def shrink_isr(self, data):
        broker = data.draw(st.sampled_from([b for b in self.isr if b != self.leader]))
        self.isr.remove(broker)
        self.parts[self.leader].set_isr(tuple(self.isr), self.epoch)
        self._acknowledge()

    @precondition(lambda self: self.leader != -1 and any(b not in self.isr for b in self._followers()))
    @rule(data=st.data())
    def expand_isr(self, data):
        broker = data.draw(st.sampled_from([b for b in self._followers() if b not in self.isr]))
        leader = self.parts[self.leader]
        if broker in self.needs_truncation:
            return
        if self.parts[broker].log_end_offset < leader.high_watermark:
            return  # Kafka's rule: a follower rejoins once it holds everything committed
        progress = dict(leader.followers())[broker]
        if progress.log_end != self.parts[broker].log_end_offset:
            return  # the leader has not seen it there yet
        self.isr.append(broker)
        self.isr.sort()
        leader.set_isr(tuple(self.isr), self.epoch)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def crash(self, data):
        broker = data.draw(st.sampled_from(sorted(self.live)))
        self.parts[broker].close(clean=False)
        self.live.discard(broker)
        if broker == self.leader:
            self._elect()
        elif broker in self.isr and self.leader != -1:
            self.isr.remove(broker)  # the controller drops a dead follower from the ISR
            self.parts[self.leader].set_isr(tuple(self.isr), self.epoch)
            self._acknowledge()

    @precondition(lambda self: len(self.live) < len(BROKERS))
    @rule(data=st.data())
    def restart(self, data):
        broker = data.draw(st.sampled_from([b for b in BROKERS if b not in self.live]))
        self.parts[broker] = self._open(broker)
        self.live.add(broker)
        if self.leader == -1 and broker in self.isr:
            self.leader = broker  # the ISR member that returns first leads again
            self.epoch += 1
            self._apply_roles()
        elif self.leader != -1:
            self.parts[broker].become_follower(self.leader, self.epoch, BROKERS, tuple(self.isr), self.epoch)
            self.needs_truncation.add(broker)

    # ------------------------------------------------------------ checks

    def _acknowledge(self) -> None:
        """acks=all: a produce is acknowledged once the leader's HW has passed its last offset."""
        if self.leader == -1:
            return
        leader = self.parts[self.leader]
        hw = leader.high_watermark
        stored = None
        for base, last in [p for p in self.pending if p[1] < hw]:
            stored = stored or batches_by_offset(leader)
            self.acked[base] = stored[base]
            self.pending.remove((base, last))

    @invariant()
    def acknowledged_batches_are_on_the_leader_and_every_live_isr_member(self):
        if self.leader == -1:
            return
        for b in self.isr:
            if b in self.live and b not in self.needs_truncation:
                stored = batches_by_offset(self.parts[b])
                hw = self.parts[self.leader].high_watermark
                for base, data in self.acked.items():
                    if base < hw or b == self.leader:
                        assert stored.get(base) == data, (b, base)

    @invariant()
    def replicas_agree_below_their_high_watermarks(self):
        views = {b: (batches_by_offset(self.parts[b]), self.parts[b].high_watermark)
                 for b in self.live if b not in self.needs_truncation}
        for b1, (s1, hw1) in views.items():
            for b2, (s2, hw2) in views.items():
                for base in s1.keys() & s2.keys():
                    if base < min(hw1, hw2):
                        assert s1[base] == s2[base], (b1, b2, base)

    def teardown(self) -> None:
        import shutil

        for b in self.live:
            self.parts[b].close(clean=False)
        shutil.rmtree(self.root, ignore_errors=True)


TestReplicationModel = Replication.TestCase
TestReplicationModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)

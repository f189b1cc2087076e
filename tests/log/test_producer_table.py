"""Idempotent producers' batches through the compiled append against `Partition.append_many`: the same
streams (in-order batches, retries, sequences out of order, fenced and new epochs, unknown producers,
sequences wrapping at 2^31, compressed batches the Python path appends in between, another writer, rolls)
into two partition directories, one through each, answer the same and leave byte-identical files, producer
snapshots included; the kernel's producer region and the Python copy of the kernel's partition end as the
Python path's state."""

from __future__ import annotations

import random
from collections import deque

import pytest

from mmlog.config.settings import LogConfig
from mmlog.log import append_kernel as ak
from mmlog.log import partition_table as pt
from mmlog.log import producer_table as ptab
from mmlog.log.producer_state import ProducerState
from mmlog.log.transaction_state import PRODUCER_EXPIRATION_MS
from mmlog.protocol import records as rec
from tests.log.logtools import T0, random_records
from tests.log.test_append_kernel import (
    Kernel,
    answer,
    files_of,
    two_partitions,
)

WRAP = 1 << 31
WRAPPING = 77  # a producer whose state (a snapshot at offset 0) is 6 sequences short of the wrap


@pytest.fixture(scope="module", autouse=True)
def warm():
    ak.warm()


class Producers:
    """A stream of idempotent producers' batches, with the mistakes and retries clients make."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.known = {5: [0, 0], 9: [2, 0], WRAPPING: [0, WRAP - 6]}  # pid -> [epoch, next sequence]
        self.sent = {pid: deque(maxlen=5) for pid in self.known}
        self.next_pid = 100
        self.wrapped = 0  # batches accepted across the wrap
        self.script = [WRAPPING, WRAPPING]  # first: two batches of 4 from 6 short of the wrap, the second across

    def batch(self, pid: int, epoch: int, seq: int, now: int, compression: int = 0, n: int | None = None):
        n = n or self.rng.randrange(1, 5)
        return rec.build_batch(random_records(self.rng, n, ts_base=now, ts_spread=500), producer_id=pid,
                               producer_epoch=epoch, base_sequence=seq, base_timestamp=now,
                               compression=compression), n

    def next(self, now: int) -> tuple[str, bytearray]:
        rng = self.rng
        kind = rng.choices(["in order", "retry", "out of order", "old epoch", "new epoch", "unknown", "new producer",
                            "compressed", "plain"], [60, 8, 4, 3, 3, 3, 3, 6, 6])[0]
        pid = rng.choice(sorted(self.known))
        n = None
        if self.script and kind == "in order":
            pid, n = self.script.pop(), 4
        epoch, seq = self.known[pid]
        if kind == "retry" and self.sent[pid]:
            return kind, bytearray(rng.choice(list(self.sent[pid])))
        if kind == "out of order":
            return kind, self.batch(pid, epoch, (seq + rng.randrange(1, 4)) % WRAP, now)[0]
        if kind == "old epoch" and epoch > 0:
            return kind, self.batch(pid, epoch - 1, seq, now)[0]
        if kind == "unknown":
            return kind, self.batch(self.next_pid + 1000, 0, rng.randrange(1, 9), now)[0]
        if kind == "plain":
            return kind, rec.build_batch(random_records(rng, rng.randrange(1, 4), ts_base=now))
        if kind == "new epoch":
            epoch, seq = epoch + 1, 0
            self.sent[pid].clear()
        if kind == "new producer":
            pid, epoch, seq = self.next_pid, 0, 0
            self.next_pid += 1
            self.sent[pid] = deque(maxlen=5)
        buf, n = self.batch(pid, epoch, seq, now, compression=1 if kind == "compressed" else 0, n=n)
        self.known[pid] = [epoch, (seq + n) % WRAP]
        self.wrapped += seq + n > WRAP
        self.sent[pid].append(bytes(buf))
        return kind, buf


def preload_wrapping_producer(*parts) -> None:
    """The same producer state at offset 0 in each directory: WRAPPING's last batch ends 7 short of 2^31."""
    for p in parts:
        state = ProducerState(p.directory)
        state.apply(WRAPPING, 0, WRAP - 10, WRAP - 7, 0, 3, T0)
        state.write_snapshot(0, T0, PRODUCER_EXPIRATION_MS)
        p.producers.generation = -1  # opened before the snapshot was there: load it at the next look


def python_state(part) -> dict:
    with part._writing() as snap:
        part._catch_up_producers(snap)
    return {pid: (e.epoch, list(e.batches)) for pid, e in part.producers.producers.items()}


@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_idempotent_streams_leave_the_files_and_state_the_python_path_leaves(tmp_path, clock, group, seed):
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=16 * 1024, segment_index_bytes=1024, index_interval_bytes=300,
                       segment_ms=600_000, flush_messages=10**9, flush_ms=10**12)
    a, b = two_partitions(tmp_path, config, leader_epoch=2, clock=clock)
    preload_wrapping_producer(a, b)
    kernel = Kernel(b, random.Random(seed + 100))
    other = b.__class__(b.directory, config, recover=False)  # another process's writer of the kernel's partition
    stream = Producers(rng)
    kinds: dict[str, int] = {}
    try:
        for step in range(400):
            clock.now += rng.choice((0, 1, 5, 40))
            bufs = []
            for _ in range(rng.randrange(1, group + 1)):
                kind, buf = stream.next(clock.now)
                kinds[kind] = kinds.get(kind, 0) + 1
                bufs.append(buf)
            expected = [answer(o) for o in a.append_many([bytearray(x) for x in bufs])]
            copies = [bytearray(x) for x in bufs]
            if rng.random() < 0.05:
                assert [answer(o) for o in other.append_many(copies)] == expected
            else:
                assert kernel.append(copies, clock.now) == expected, (step, kinds)
            if step % 100 == 99:
                assert files_of(a.directory) == files_of(b.directory)
        assert files_of(a.directory) == files_of(b.directory)
        assert any(name.endswith(".snapshot") and name != f"{0:020d}.snapshot" for name in files_of(b.directory))
        last = stream.batch(999, 0, 0, clock.now)[0]  # a new producer: the region catches up before its check
        expected = answer(a.append_many([bytearray(last)])[0])
        status, out, *_, row = kernel.try_append([bytearray(last)], clock.now)
        assert status == ak.OK and tuple(out[0, :3]) == expected
        want = python_state(a)
        assert kernel.table.producers(row) == want  # the region the kernel checks against
        assert python_state(b) == want  # the kernel partition's own Python copy caught up from the log
        assert kernel.appended > 100, kernel.reasons  # most of the stream compiled
        assert "a producer's batch Python answers" in kernel.reasons, kernel.reasons
        assert stream.wrapped  # a batch whose sequences wrap at 2^31 went through (last sequence < first)
    finally:
        other.close()
        a.close()
        b.close()
    assert files_of(a.directory) == files_of(b.directory)  # clean closes alike (their snapshots too)


def with_producers(kernel: Kernel, p) -> int:
    """The row of p, filled with its producers (as after the kernel met a producer's batch)."""
    row = kernel.table.ensure("t", 0, p)
    kernel.table.rows[row, pt.PRODUCERS_WANTED] = 1
    kernel.table.rows[row, pt.STALE] = 1
    return kernel.table.ensure("t", 0, p)


def _idempotent(pid, epoch, seq, n=2):
    return rec.build_batch([(b"k", b"v" * 30)] * n, base_timestamp=T0, producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq)


def test_a_producers_first_batch_is_compiled_once_the_row_holds_its_partitions_producers(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    status, *_, row = kernel.try_append([_idempotent(4, 0, 0)], clock.now)
    assert status == ak.FALLBACK  # the row had no producers: it asks for them, and Python appends this one
    assert ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]] == "producers not in the table"
    assert kernel.table.stale(row)
    p.append_many([_idempotent(4, 0, 0)])
    for seq in (2, 4):
        status, out, *_ = kernel.try_append([_idempotent(4, 0, seq)], clock.now)
        assert status == ak.OK
    status, out, *_ = kernel.try_append([_idempotent(8, 0, 0)], clock.now)  # a new producer at 0
    assert status == ak.OK and out[0, 0] == 6
    row = kernel.table.ensure("t", 0, p)
    assert kernel.table.producers(row) == {4: (0, [(0, 1, 0, 1), (2, 3, 2, 3), (4, 5, 4, 5)]), 8: (0, [(0, 1, 6, 7)])}


@pytest.mark.parametrize("batch, error", [
    (_idempotent(4, 0, 2), None),  # a duplicate: its first append's offsets
    (_idempotent(4, 0, 9), "OutOfOrderSequenceNumber"),
    (_idempotent(4, 0, 6, n=1), "OutOfOrderSequenceNumber"),
    (_idempotent(5, 0, 3), "UnknownProducerId"),
    (_idempotent(6, 1, 0), "InvalidProducerEpoch"),
    (_idempotent(6, 3, 1), "OutOfOrderSequenceNumber"),
])
def test_what_the_python_path_refuses_or_answers_from_its_state_falls_back_untouched(open_partition, clock, batch,
                                                                                     error):
    p = open_partition()
    for buf in (_idempotent(4, 0, 0), _idempotent(4, 0, 2), _idempotent(6, 2, 0)):
        p.append_many([buf])
    kernel = Kernel(p)
    row = with_producers(kernel, p)
    before = kernel.table.producers(row)
    assert before is not None
    files = files_of(p.directory)
    status, _, data, _, original, row = kernel.try_append([bytearray(batch)], clock.now)
    assert status == ak.FALLBACK and (data == original).all()
    assert ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]] == "a producer's batch Python answers"
    assert kernel.table.producers(row) == before
    assert files_of(p.directory) == files
    outcome = p.append_many([bytearray(batch)])[0]
    assert (type(outcome).__name__ == error) if error else answer(outcome) == (2, 3, 0)


def test_a_refusal_in_a_group_undoes_the_batches_checked_before_it(open_partition, clock):
    p = open_partition()
    p.append_many([_idempotent(4, 0, 0)])
    kernel = Kernel(p)
    row = with_producers(kernel, p)
    before = kernel.table.producers(row)
    group = [_idempotent(4, 0, 2), _idempotent(9, 0, 0), _idempotent(4, 0, 4), _idempotent(4, 0, 2)]
    status, *_, row = kernel.try_append(group, clock.now)
    assert status == ak.FALLBACK
    assert kernel.table.producers(row) == before
    status, out, *_ = kernel.try_append(group[:3], clock.now)
    assert status == ak.OK and out[:, 0].tolist() == [2, 4, 6]


def test_the_region_catches_up_over_what_another_writer_appended(open_partition, clock):
    p = open_partition()
    p.append_many([_idempotent(4, 0, 0)])
    kernel = Kernel(p)
    with_producers(kernel, p)
    other = open_partition(recover=False)
    other.append_many([_idempotent(4, 0, 2)])
    other.append_many([rec.build_batch([(None, b"x")], base_timestamp=T0)])
    other.append_many([_idempotent(4, 0, 4, n=1)])
    status, out, *_, row = kernel.try_append([_idempotent(4, 0, 5)], clock.now)
    assert status == ak.OK and out[0, 0] == 6
    assert kernel.table.producers(row) == {4: (0, [(0, 1, 0, 1), (2, 3, 2, 3), (4, 4, 5, 5), (5, 6, 6, 7)])}
    # a transactional producer's batch in between: Python catches up (and exports again)
    other.append_many([rec.build_batch([(None, b"t")], base_timestamp=T0, producer_id=11, producer_epoch=0,
                                       base_sequence=0, transactional=True)])
    other.append_marker(11, 0, True, 0)
    status, *_, row = kernel.try_append([_idempotent(4, 0, 7)], clock.now)
    assert status == ak.FALLBACK
    assert ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]] == "producers behind the log"
    status, out, *_ = kernel.try_append([_idempotent(4, 0, 7)], clock.now)  # ensure filled the row again
    assert status == ak.OK and out[0, 0] == 10


def test_a_full_region_is_exported_again_larger(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    with_producers(kernel, p)
    reasons = []
    for pid in range(3 * ptab.MIN_CAPACITY):
        status, *_, row = kernel.try_append([_idempotent(pid, 0, 0, n=1)], clock.now)
        if status != ak.OK:
            reasons.append(ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]])
            p.append_many([_idempotent(pid, 0, 0, n=1)])
    assert reasons and set(reasons) == {"producer slots full"}
    row = kernel.table.ensure("t", 0, p)
    assert sorted(kernel.table.producers(row)) == list(range(3 * ptab.MIN_CAPACITY))
    assert kernel.table.rows[row, pt.PRODUCERS_CAPACITY] >= 3 * ptab.MIN_CAPACITY


def test_a_producer_the_python_copy_forgets_on_a_reload_is_forgotten_by_the_region(open_partition, clock):
    """Expiry happens where Python loads a snapshot: a reload (here after a failed append) that drops a producer
    makes the table copy the state again, so the kernel refuses what Python refuses."""
    p = open_partition()
    p.append_many([_idempotent(4, 0, 0)])
    p.roll()  # a snapshot holding producer 4, stamped T0
    kernel = Kernel(p)
    row = with_producers(kernel, p)
    assert 4 in kernel.table.producers(row)
    clock.now += PRODUCER_EXPIRATION_MS + 1
    p.producers.upto = -1  # as a failed append leaves it: the next look reloads (and expires producer 4)
    p.append_many([_idempotent(9, 0, 0)])
    status, *_, row = kernel.try_append([_idempotent(4, 0, 2)], clock.now)
    assert status == ak.FALLBACK
    assert 4 not in kernel.table.producers(row)
    assert type(p.append_many([_idempotent(4, 0, 2)])[0]).__name__ == "UnknownProducerId"

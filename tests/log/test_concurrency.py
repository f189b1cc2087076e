"""Many processes on one partition: concurrent appenders, a reader, and a writer SIGKILLed holding the lock.

Children are forked after the kernels are compiled (the session fixture warms
them) and each opens the partition itself, attached (recover=False), as a
processor does; the test process is the owner that opened it with recovery.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback

from mmlog.config.settings import LogConfig
from mmlog.log.partition import Partition
from mmlog.log.state import Op
from mmlog.protocol import records as rec
from tests.log.logtools import assert_dense_and_valid

CTX = multiprocessing.get_context("fork")
CFG = LogConfig(segment_bytes=32 * 1024, segment_index_bytes=4096, index_interval_bytes=1024)
BATCHES = 2500


def payload_batch(worker: int, i: int) -> bytearray:
    """Batch i of a worker: 1-3 records whose key names the worker and whose values name the batch."""
    return rec.build_batch([(b"w%d" % worker, b"%d:%d:%d" % (worker, i, j) + b"." * ((i * 7 + j) % 90))
                            for j in range(1 + i % 3)], base_timestamp=1_000_000 + i)


def _appender(directory, worker, count, start, results, die_at=None, holding=None):
    """Append `count` batches; or, at batch `die_at`, stop in the middle of the append, holding the lock."""
    try:
        p = Partition(directory, CFG, recover=False)
        start.wait(30)
        bases = []
        for i in range(count):
            if i == die_at:
                results.put((worker, bases))
                results.close()
                results.join_thread()
                _hang_mid_append(p, payload_batch(worker, i), holding)
            bases.append(p.append(payload_batch(worker, i)).base_offset)
        p.close()
        results.put((worker, bases))
    except BaseException:
        results.put((worker, traceback.format_exc()))


def _reader(directory, total, start, results):
    """Consume from offset 0 until `total` records were seen, checking every whole batch of every slice."""
    try:
        p = Partition(directory, CFG, recover=False)
        start.wait(30)
        offset, batches, reads, deadline = 0, 0, 0, time.monotonic() + 60
        while offset < total and time.monotonic() < deadline:
            read = p.read(offset, 4096)
            data = read.slice.read()
            reads += 1
            if not data:
                assert offset == read.high_watermark
                continue
            first = rec.validate_batch(data)  # the first batch is always whole
            assert first.base_offset <= offset <= first.last_offset, (offset, first)
            for pos, h in rec.iter_batches(data):
                rec.validate_batch(data, pos)
                assert h.base_offset == offset or pos == 0
                assert h.last_offset < read.high_watermark
                offset = h.next_offset
                batches += 1
        p.close()
        results.put(("reader", (offset, batches, reads)))
    except BaseException:
        results.put(("reader", traceback.format_exc()))


def _collect(results, n, timeout=120):
    out = {}
    for _ in range(n):
        key, value = results.get(timeout=timeout)
        assert not isinstance(value, str), value  # a traceback from the child
        out[key] = value
    return out


def verify(directory, returned: dict[int, list[int]]) -> int:
    """Offsets dense from 0, every batch CRC-valid, each payload once, where its appender was told.

    Returns how often consecutive batches come from different appenders.
    """
    where, order = {}, []
    for b in assert_dense_and_valid(directory, start=0):
        recs = rec.decode_records(b.data)
        worker, i, _ = map(int, recs[0].value.split(b".")[0].split(b":"))
        assert (worker, i) not in where, f"batch {worker}:{i} stored twice"
        assert b.data == bytes(_with_offset(payload_batch(worker, i), b.base_offset))
        where[(worker, i)] = b.base_offset
        order.append(worker)
    for worker, bases in returned.items():
        assert [where.pop((worker, i)) for i in range(len(bases))] == bases
    assert not where, "batches nobody appended"
    return sum(a != b for a, b in zip(order, order[1:]))


def _with_offset(batch: bytearray, offset: int) -> bytearray:
    rec.set_base_offset(batch, offset)
    return batch


def test_four_appenders_and_a_reader_share_one_partition(partition_dir):
    owner = Partition(partition_dir, CFG)
    start, results = CTX.Event(), CTX.Queue()
    total = 4 * sum(1 + i % 3 for i in range(BATCHES))
    children = [CTX.Process(target=_appender, args=(partition_dir, w, BATCHES, start, results)) for w in range(4)]
    children.append(CTX.Process(target=_reader, args=(partition_dir, total, start, results)))
    for c in children:
        c.start()
    start.set()
    try:
        got = _collect(results, 5)
    finally:
        for c in children:
            c.join(30)
    assert [c.exitcode for c in children] == [0] * 5
    reader_offset, reader_batches, _ = got.pop("reader")
    assert reader_offset == total and reader_batches == 4 * BATCHES
    assert owner.log_end_offset == total
    assert len(owner.segment_bases()) > 10  # every process had to follow many rolls
    assert verify(partition_dir, got) > 3  # the appends really interleaved
    owner.close()
    again = Partition(partition_dir, CFG)
    assert not again.recovered and again.log_end_offset == total
    verify(partition_dir, got)
    again.close()


def _hang_mid_append(p: Partition, batch: bytearray, holding) -> None:
    """Take the lock as append does, mark the append pending, write half the batch and some garbage, hang."""
    writing = p._writing()
    snap = writing.__enter__()
    p.state.set_pending(Op.APPEND)
    rec.set_base_offset(batch, snap.log_end)
    p._segments[snap.active_base].write_at(snap.active_size, batch[: len(batch) // 2] + os.urandom(3000))
    holding.set()
    time.sleep(600)


def test_a_writer_killed_while_holding_the_lock_does_not_stop_the_others(partition_dir):
    owner = Partition(partition_dir, CFG)
    start, holding, results = CTX.Event(), CTX.Event(), CTX.Queue()
    appenders = [CTX.Process(target=_appender, args=(partition_dir, w, BATCHES, start, results)) for w in range(3)]
    victim = CTX.Process(target=_appender, args=(partition_dir, 3, BATCHES, start, results, 300, holding))
    for c in [*appenders, victim]:
        c.start()
    start.set()
    try:
        assert holding.wait(30)
        stalled_at = owner.log_end_offset
        assert stalled_at < 3 * sum(1 + i % 3 for i in range(BATCHES))  # the others still have work to do
        time.sleep(0.2)
        assert owner.log_end_offset == stalled_at  # everyone waits for the lock...
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(10)
        got = _collect(results, 4)  # ... and carries on once the kernel released it
    finally:
        victim.kill()
        for c in [*appenders, victim]:
            c.join(30)
    assert victim.exitcode == -signal.SIGKILL
    assert [c.exitcode for c in appenders] == [0, 0, 0]
    assert owner.state.snapshot().pending_op == Op.IDLE
    verify(partition_dir, got)
    owner.close()
    again = Partition(partition_dir, CFG)
    verify(partition_dir, got)
    assert again.log_end_offset == 3 * sum(1 + i % 3 for i in range(BATCHES)) + sum(1 + i % 3 for i in range(300))
    again.close()

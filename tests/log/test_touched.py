"""Idle partitions cost the owner's timers nothing: a pass looks only at the partitions another process changed
(stamped on the log dir's board) or whose flush, roll or retention time has come."""

from __future__ import annotations

import multiprocessing
import time

from mmlog.config.settings import LogConfig
from mmlog.log import touched
from mmlog.log.manager import LogManager
from tests.log.logtools import tagged_batch

CTX = multiprocessing.get_context("fork")
N = 500
# Long enough that the passes right after the writes run before it is due, even on a loaded host: the first
# pass's own flush would otherwise take them, and the "due now" pass would find nothing.
FLUSH_MS = 2000


def _passes(m: LogManager) -> int:
    """One round of the timers (flush, roll, retention, a scrape); how many partitions it looked at."""
    before = m.looked_at
    m.flush_due()
    m.roll_due()
    m.apply_retention()
    list(m.gauges())
    return m.looked_at - before


def _append_in_another_process(data_dir, partitions) -> None:
    """A processor's part: an attached manager appends one batch to each of `partitions`, then exits."""
    attached = LogManager(data_dir, LogConfig(flush_ms=FLUSH_MS), owner=False)
    for p in partitions:
        attached.partition("idle", p).append(tagged_batch(f"w{p}"))
    attached.close()


def test_a_timer_pass_looks_only_at_the_partitions_written_since_and_flushes_them_when_due(tmp_path):
    m = LogManager(tmp_path, LogConfig(flush_ms=FLUSH_MS))
    try:
        m.create_topic("idle", N)
        assert _passes(m) >= N  # the first pass sees every partition once
        _passes(m)  # and the creation's stamps once more (a sweep takes the pass before too)
        assert [_passes(m) for _ in range(3)] == [0, 0, 0]  # idle: no state page read, nothing opened

        written = [7, 123, 456]
        child = CTX.Process(target=_append_in_another_process, args=(tmp_path, written))
        child.start()
        child.join(30)
        assert child.exitcode == 0
        # Two partitions may share a board slot (crc32 over 65,535 slots): a pass may look at a neighbour
        # of a written one, never at all of them.
        looked = _passes(m)
        assert 3 * 4 <= looked <= 3 * 4 + 8  # four passes (flush, roll, retention, scrape) each look at them
        assert m.flush_due() == 0  # not due yet: written less than flush.ms ago
        written_at = max(m.partition("idle", p).snapshot().flushed_at_ms for p in written)
        time.sleep(max(0.0, (written_at + FLUSH_MS) / 1000 - time.time()) + 0.05)
        before = m.looked_at
        assert m.flush_due() == 3  # due now, though nothing changed since: the deadline brought them back
        assert 3 <= m.looked_at - before <= 5
        for p in written:
            s = m.partition("idle", p).snapshot()
            assert s.unflushed == 0 and s.log_end == 1
        _passes(m)
        _passes(m)
        assert [_passes(m) for _ in range(3)] == [0, 0, 0]
        gauges = {g.partition: g for g in m.gauges()}  # the scrape still shows every partition, as they are
        assert len(gauges) == N and all(gauges[p].snapshot.log_end == (p in written) for p in range(N))
    finally:
        m.close(clean=False)


def test_retention_by_time_reaches_an_idle_partition_when_its_oldest_segment_expires(tmp_path):
    m = LogManager(tmp_path, LogConfig())
    try:
        m.create_topic("old", 3, {"segment.bytes": 1000, "retention.ms": 1500})
        part = m.partition("old", 1)
        for i in range(3):  # a segment each: the first two inactive
            part.append(tagged_batch(str(i), pad=600))  # more than half a segment: a roll each
        assert len(part.segment_bases()) == 3
        assert m.apply_retention() == 0  # not yet expired: the pass remembers when the oldest will be
        assert [_passes(m) for _ in range(2)][-1] == 0
        time.sleep(1.6)
        assert m.apply_retention() == 2  # nothing changed, the deadline came
        assert m.partition("old", 1).log_start_offset == 2
    finally:
        m.close(clean=False)


def test_every_process_stamps_the_same_board_and_a_sweep_takes_the_stamps_of_the_pass_before_too(tmp_path):
    board = touched.board_for(tmp_path)
    slot = touched.slot_of("t-0")
    board.sweep()
    board.stamp(slot)
    assert slot in board.sweep().tolist()
    assert slot in board.sweep().tolist()  # the pass before: a stamp that raced the move is not lost
    assert slot not in board.sweep().tolist()
    child = CTX.Process(target=lambda: touched.board_for(tmp_path).stamp(slot))
    child.start()
    child.join(10)
    assert slot in board.sweep().tolist()


def test_a_partition_written_every_pass_keeps_one_entry_per_deadline(tmp_path):
    """A roll deadline stays the same for segment.ms while appends come: it is queued once, not once a pass."""
    m = LogManager(tmp_path, LogConfig(flush_ms=60_000))
    try:
        m.create_topic("busy", 2)
        for i in range(50):
            m.partition("busy", 0).append(tagged_batch(f"b{i}"))
            m.flush_due()
            m.roll_due()
            m.apply_retention()
        assert len(m._due_heaps[0]) <= 2 and len(m._due_heaps[1]) <= 2 and len(m._retention_heap) <= 2
    finally:
        m.close(clean=False)

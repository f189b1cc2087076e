"""Recovery: after an unclean stop the log holds exactly its intact prefix, indexes rebuilt, appends resuming.

Every crash point written down in partition.py (and the modules of its parts) and
recovery.py is replayed here on real files: the steps a writer had done are redone by hand, the writer
"dies" (its lock descriptor closes), and the next lock holder must repair.
"""

from __future__ import annotations

import os
import random
import shutil

import numpy as np
import pytest

from mmlog.config.settings import LogConfig
from mmlog.log import recovery
from mmlog.log.files import segment_bases, segment_file
from mmlog.log.partition import Partition
from mmlog.log.segment import Segment
from mmlog.log.state import SEQ, Op
from mmlog.protocol import records as rec
from tests.log.logtools import (
    assert_dense_and_valid,
    check_indexes,
    random_batch,
    stored_batches,
    tagged_batch,
)

CFG = LogConfig(segment_bytes=3000, segment_index_bytes=1024, index_interval_bytes=200)


def _build(directory, batches=40, seed=0, flush=False) -> list:
    """A partition of random batches over several segments, closed uncleanly; returns its batches.

    The active segment ends with a few small batches (keys, headers, a null value), so that
    a test may damage one of them byte by byte.
    """
    rng = random.Random(seed)
    p = Partition(directory, CFG)
    for _ in range(batches):
        p.append(random_batch(rng))
    if flush:
        p.flush()
    for i in range(3):
        p.append(rec.build_batch([(b"key", b"small %d" % i, [("h", b"v")]), (None, None)]))
    p.close(clean=False)
    found = stored_batches(directory)
    assert len(segment_bases(directory)) >= 3
    return found


def _save(directory) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in os.listdir(directory)}


def _restore(directory, saved: dict[str, bytes]) -> None:
    shutil.rmtree(directory)
    directory.mkdir()
    for name, data in saved.items():
        (directory / name).write_bytes(data)


def _reopen_and_check(directory, kept: list, next_offset: int) -> Partition:
    """Reopen; the files must hold exactly `kept`, indexes must match them, and appends must go on."""
    p = Partition(directory, CFG)
    assert [b.data for b in assert_dense_and_valid(directory, start=0)] == [b.data for b in kept]
    assert p.log_end_offset == p.high_watermark == next_offset
    check_indexes(p)
    for b in kept[-3:]:
        assert p.read(b.base_offset, 1).slice.read() == b.data
    assert p.append(tagged_batch("after")).base_offset == next_offset
    assert p.read(next_offset, 1).slice.read()[:8] == next_offset.to_bytes(8, "big")
    return p


# ---------------------------------------------------------------- torn tails and garbage


def test_a_torn_last_batch_is_dropped_wherever_it_was_cut(partition_dir):
    batches = _build(partition_dir)
    last = batches[-1]
    saved = _save(partition_dir)
    active_log = segment_file(partition_dir, last.segment, ".log")
    for cut in range(last.position, last.position + last.header.size):
        _restore(partition_dir, saved)
        os.truncate(active_log, cut)
        p = _reopen_and_check(partition_dir, batches[:-1], last.base_offset)
        assert bool(p.recovered_notes) == (cut > last.position)
        p.close(clean=False)


def test_garbage_after_the_last_batch_is_cut_off(partition_dir):
    batches = _build(partition_dir)
    saved = _save(partition_dir)
    rng = random.Random(1)
    active_log = segment_file(partition_dir, batches[-1].segment, ".log")
    for length in (1, 11, 12, 60, 61, 500, 4000):
        _restore(partition_dir, saved)
        garbage = rng.randbytes(length)
        if length >= 12:  # make it look like the next batch's offset and a plausible length
            header = batches[-1].header.next_offset.to_bytes(8, "big") + (length - 12).to_bytes(4, "big")
            garbage = header + garbage[12:]
        with open(active_log, "ab") as f:
            f.write(garbage)
        p = _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset)
        assert p.recovered_notes
        p.close(clean=False)


def test_a_whole_copy_of_the_last_batch_appended_again_is_not_a_valid_continuation(partition_dir):
    batches = _build(partition_dir)
    with open(segment_file(partition_dir, batches[-1].segment, ".log"), "ab") as f:
        f.write(batches[-1].data)  # CRC-valid, but its offset does not follow
    _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset).close()


# ---------------------------------------------------------------- flipped bytes


@pytest.mark.parametrize("where", ["an inactive segment", "the active segment"])
def test_a_flipped_byte_anywhere_in_a_batch_truncates_the_log_before_it(partition_dir, where):
    batches = _build(partition_dir)
    bases = segment_bases(partition_dir)
    segment = bases[1] if where == "an inactive segment" else bases[-1]
    victim = min([b for b in batches if b.segment == segment][1:-1], key=lambda b: b.header.size)
    index = batches.index(victim)
    saved = _save(partition_dir)
    log = segment_file(partition_dir, segment, ".log")
    size = victim.header.size
    for at in sorted({*range(0, 64), *range(64, size, 7), size - 1}):  # every header byte, a sample of the rest
        _restore(partition_dir, saved)
        with open(log, "r+b") as f:
            f.seek(victim.position + at)
            byte = f.read(1)[0]
            f.seek(victim.position + at)
            f.write(bytes([byte ^ 0x10]))
        if 12 <= at < 16:  # partitionLeaderEpoch: outside the CRC and not checked; the batch stays
            p = Partition(partition_dir, CFG)
            assert len(stored_batches(partition_dir)) == len(batches)
            assert p.log_end_offset == batches[-1].header.next_offset
            p.close(clean=False)
            continue
        p = _reopen_and_check(partition_dir, batches[:index], victim.base_offset)
        assert p.recovered_notes
        assert segment_bases(partition_dir)[-1] == segment  # every later segment is gone
        p.close(clean=False)


def test_segments_after_a_corrupt_one_are_deleted(partition_dir):
    batches = _build(partition_dir)
    bases = segment_bases(partition_dir)
    first_of_second = next(b for b in batches if b.segment == bases[1])
    with open(segment_file(partition_dir, bases[1], ".log"), "r+b") as f:
        f.seek(first_of_second.position + 30)
        f.write(b"\xff\xff")
    p = _reopen_and_check(partition_dir, [b for b in batches if b.segment == bases[0]], bases[1])
    assert segment_bases(partition_dir) == bases[:2]
    assert os.path.getsize(segment_file(partition_dir, bases[1], ".log")) == len(p.read(bases[1], 1).slice.read())
    for base in bases[2:]:
        for suffix in (".log", ".index", ".timeindex"):
            assert not segment_file(partition_dir, base, suffix).exists()


def test_a_segment_that_does_not_follow_its_predecessor_is_deleted(partition_dir):
    batches = _build(partition_dir)
    bases = segment_bases(partition_dir)
    os.unlink(segment_file(partition_dir, bases[2], ".log"))  # a hole: bases[3] no longer follows
    kept = [b for b in batches if b.segment < bases[2]]
    _reopen_and_check(partition_dir, kept, bases[2])
    assert segment_bases(partition_dir)[-1] < bases[3]


# ---------------------------------------------------------------- indexes


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("which", ["inactive, below the recovery point", "active"])
def test_a_deleted_index_is_rebuilt(partition_dir, suffix, which):
    batches = _build(partition_dir, flush=True)
    bases = segment_bases(partition_dir)
    base = bases[0] if which.startswith("inactive") else bases[-1]
    before = segment_file(partition_dir, base, suffix).read_bytes()
    os.unlink(segment_file(partition_dir, base, suffix))
    p = _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset)
    if which.startswith("inactive"):
        assert segment_file(partition_dir, base, suffix).read_bytes() == before
        assert any("index rebuilt" in note for note in p.recovered_notes)


@pytest.mark.parametrize("damage", ["zeroed", "random", "decreasing"])
def test_a_corrupt_index_below_the_recovery_point_is_rebuilt(partition_dir, damage):
    batches = _build(partition_dir, flush=True)
    base = segment_bases(partition_dir)[0]
    path = segment_file(partition_dir, base, ".index")
    before = path.read_bytes()
    assert len(before) >= 16
    entries = np.frombuffer(before, dtype=np.int32).copy()
    if damage == "zeroed":
        entries[:] = 0
    elif damage == "random":
        entries[:] = np.random.default_rng(0).integers(-(2**31), 2**31 - 1, len(entries))
    else:
        entries[:] = entries[::-1]
    path.write_bytes(entries.tobytes())
    p = _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset)
    assert path.read_bytes() == before
    assert any("index rebuilt" in note for note in p.recovered_notes)


def test_a_deleted_index_after_a_clean_close_is_rebuilt(partition_dir):
    batches = _build(partition_dir)
    p = Partition(partition_dir, CFG)
    p.close()
    base = segment_bases(partition_dir)[0]
    before = segment_file(partition_dir, base, ".index").read_bytes()
    os.unlink(segment_file(partition_dir, base, ".index"))
    _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset).close()
    assert segment_file(partition_dir, base, ".index").read_bytes() == before


# ---------------------------------------------------------------- clean close and recovery point


def test_a_clean_close_is_trusted_without_a_scan(partition_dir):
    batches = _build(partition_dir)
    Partition(partition_dir, CFG).close()  # a clean close
    victim = batches[len(batches) // 2]
    with open(segment_file(partition_dir, victim.segment, ".log"), "r+b") as f:
        f.seek(victim.position + 40)
        f.write(b"\x00\xff")  # a scan would cut the log here
    p = Partition(partition_dir, CFG)
    assert not p.recovered and p.recovered_notes == []
    assert len(stored_batches(partition_dir)) == len(batches)
    assert p.log_end_offset == batches[-1].header.next_offset


def test_bytes_past_the_committed_size_are_cut_on_a_clean_open_without_a_scan(partition_dir):
    batches = _build(partition_dir)
    Partition(partition_dir, CFG).close()
    log = segment_file(partition_dir, batches[-1].segment, ".log")
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(os.urandom(777))
    p = Partition(partition_dir, CFG)
    assert not p.recovered and p.recovered_notes == [] and os.path.getsize(log) == size
    assert p.append(tagged_batch("x")).base_offset == batches[-1].header.next_offset


def test_the_same_garbage_after_an_unclean_close_is_found_by_the_scan(partition_dir):
    batches = _build(partition_dir)
    with open(segment_file(partition_dir, batches[-1].segment, ".log"), "ab") as f:
        f.write(os.urandom(777))
    p = _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset)
    assert p.recovered and any("truncated 777 bytes" in note for note in p.recovered_notes)


def test_a_clean_close_whose_active_log_lost_bytes_is_recovered(partition_dir):
    batches = _build(partition_dir)
    Partition(partition_dir, CFG).close()
    last = batches[-1]
    os.truncate(segment_file(partition_dir, last.segment, ".log"), last.position + 5)
    _reopen_and_check(partition_dir, batches[:-1], last.base_offset).close()


def test_segments_below_the_recovery_point_are_trusted_and_later_ones_validated(partition_dir):
    rng = random.Random(3)
    p = Partition(partition_dir, CFG)
    for _ in range(40):
        p.append(random_batch(rng))
    p.flush()
    flushed_end = p.log_end_offset
    for _ in range(40):
        p.append(random_batch(rng))
    p.close(clean=False)
    batches = stored_batches(partition_dir)
    bases = segment_bases(partition_dir)
    first_scanned = max(b for b in bases if b <= flushed_end)
    trusted = next(b for b in batches if b.segment < first_scanned and b.position > 0)
    scanned = next(b for b in batches if b.segment > first_scanned)
    for victim in (trusted, scanned):
        with open(segment_file(partition_dir, victim.segment, ".log"), "r+b") as f:
            f.seek(victim.position + 50)
            f.write(b"\xaa")
    p = Partition(partition_dir, CFG)
    assert len(stored_batches(partition_dir)) == batches.index(scanned)  # cut at the scanned damage only
    assert p.log_end_offset == scanned.base_offset


def test_a_state_file_that_went_missing_is_rebuilt_from_the_segments(partition_dir):
    batches = _build(partition_dir)
    os.unlink(partition_dir / "partition.state")
    _reopen_and_check(partition_dir, batches, batches[-1].header.next_offset).close()


def test_leftovers_of_interrupted_operations_are_removed(partition_dir):
    _build(partition_dir)
    (partition_dir / "00000000000000000000.log.deleted").write_bytes(b"x")
    (partition_dir / "topics.json.tmp").write_bytes(b"x")
    Partition(partition_dir, CFG).close()
    assert not any(n.endswith((".deleted", ".tmp")) for n in os.listdir(partition_dir))


def test_recovery_interrupted_and_run_again_gives_the_same_log(partition_dir):
    batches = _build(partition_dir)
    victim = batches[-5]
    with open(segment_file(partition_dir, victim.segment, ".log"), "r+b") as f:
        f.seek(victim.position + 30)
        f.write(b"\x01\x02")
    found = recovery.recover(partition_dir, CFG, 0, 0)  # ... and the process dies before publishing
    for segment in found.segments:
        segment.close()
    _reopen_and_check(partition_dir, batches[: batches.index(victim)], victim.base_offset).close()


# ---------------------------------------------------------------- crash points of a writer


def _die(p: Partition) -> None:
    """What a SIGKILL leaves: the kernel drops the lock with the dead process's descriptors; nothing else
    runs. In one process the lock is let go as the kernel would (tests/log/test_lock.py kills real holders)."""
    p.lock.release()


def test_crash_mid_append_garbage_past_the_committed_size_is_repaired_by_the_next_writer(open_partition):
    owner = open_partition()
    for i in range(10):
        owner.append(tagged_batch(str(i)))
    dead = open_partition(recover=False)
    dead.lock.acquire()
    snap = dead.state.snapshot()
    dead.state.set_pending(Op.APPEND)
    dead._segments[snap.active_base].write_at(snap.active_size, os.urandom(300))
    dead._segments[snap.active_base].offset_index.write(snap.index_entries, 12345, 99999)  # crash point 2
    _die(dead)
    assert owner.read(9, 1).slice.size > 0  # readers carry on meanwhile
    assert owner.append(tagged_batch("next")).base_offset == 10
    assert owner.recovered_notes and owner.state.snapshot().pending_op == Op.IDLE
    assert_dense_and_valid(owner.directory, start=0)
    check_indexes(owner)


def _written_whole_then_killed(open_partition, batch: bytearray, base_offset: int) -> None:
    """A writer SIGKILLed after writing `batch` whole at the log end (as `base_offset`), before publishing."""
    dead = open_partition(recover=False)
    dead.lock.acquire()
    snap = dead.state.snapshot()
    dead.state.set_pending(Op.APPEND)
    batch[:8] = base_offset.to_bytes(8, "big")
    dead._segments[snap.active_base].write_at(snap.active_size, batch)
    _die(dead)


def test_crash_mid_append_after_a_whole_batch_was_written_keeps_that_batch(open_partition):
    owner = open_partition()
    owner.append(tagged_batch("a"))
    unacknowledged = tagged_batch("never acknowledged")
    _written_whole_then_killed(open_partition, unacknowledged, base_offset=1)
    assert owner.high_watermark == 1  # invisible until repaired
    assert owner.append(tagged_batch("b")).base_offset == 2  # recovery kept it: harmless, and documented
    assert [b.data[61:] for b in stored_batches(owner.directory)][1] == bytes(unacknowledged[61:])


def test_a_whole_batch_a_dead_writer_left_is_committed_where_appends_move_the_high_watermark(open_partition):
    """An idempotent producer retries the batch whose writer died before answering: the retry is a duplicate
    of the kept batch, and acks=all waits for a HW past it. Here appends alone move the HW (no replication),
    so recovery moves it past the kept batch; held back, it waited for an append the retry's connection
    could not send (librdkafka's idempotent producer stalled for the whole message timeout)."""
    owner = open_partition()
    owner.append(tagged_batch("a"))
    retried = rec.build_batch([(None, b"retried")], producer_id=7, producer_epoch=0, base_sequence=0)
    _written_whole_then_killed(open_partition, bytearray(retried), base_offset=1)
    assert owner.high_watermark == 1  # invisible until repaired
    again = owner.append(bytearray(retried))
    assert (again.base_offset, again.last_offset) == (1, 1)  # the kept batch's offsets: not appended twice
    assert owner.log_end_offset == 2
    assert owner.high_watermark == 2


def test_bytes_past_the_committed_size_without_a_pending_op_are_overwritten(open_partition):
    owner = open_partition()
    owner.append(tagged_batch("a"))
    snap = owner.state.snapshot()
    owner._segments[snap.active_base].write_at(snap.active_size, b"\xee" * 50)
    owner.append(tagged_batch("b"))
    assert [b.base_offset for b in assert_dense_and_valid(owner.directory, start=0)] == [0, 1]


def test_a_sequence_left_odd_is_repaired_by_the_next_writer(open_partition):
    owner = open_partition()
    reader = open_partition(recover=False)
    for i in range(5):
        owner.append(tagged_batch(str(i)))
    owner.state.file.view[SEQ] += 1  # a writer died inside a seqlocked update
    assert owner.append(tagged_batch("x")).base_offset == 5
    assert reader.read(5, 1).slice.size > 0


def test_a_sequence_left_odd_is_repaired_by_a_reader_after_it_gives_up_spinning(open_partition):
    owner = open_partition()
    reader = open_partition(recover=False)
    for i in range(5):
        owner.append(tagged_batch(str(i)))
    owner.state.file.view[SEQ] += 1
    assert reader.read(4, 1).slice.size > 0
    assert owner.append(tagged_batch("x")).base_offset == 5


def test_crash_mid_roll_is_repaired(open_partition):
    owner = open_partition()
    for i in range(10):
        owner.append(tagged_batch(str(i), pad=100))
    dead = open_partition(recover=False)
    dead.lock.acquire()
    s = dead.state.snapshot()
    dead.state.set_pending(Op.ROLL)
    dead._segments[s.active_base].make_inactive(s.index_entries, s.time_entries, s.max_timestamp, s.offset_of_max_ts)
    Segment(dead.directory, s.log_end, create=True, index_bytes=CFG.segment_index_bytes).close()
    _die(dead)
    assert owner.read(s.log_end - 1, 1).slice.size > 0
    assert owner.append(tagged_batch("after")).base_offset == s.log_end
    assert_dense_and_valid(owner.directory, start=0)
    check_indexes(owner)
    assert [owner.read(o, 1).slice.read()[:8] for o in range(11)] == [o.to_bytes(8, "big") for o in range(11)]


def test_crash_mid_retention_deletes_the_segments_below_the_new_log_start(open_partition):
    owner = open_partition()
    for i in range(60):
        owner.append(tagged_batch(str(i), pad=150))
    bases = owner.segment_bases()
    dead = open_partition(recover=False)
    dead.lock.acquire()
    s = dead.state.snapshot()
    dead.state.set_pending(Op.DELETE_SEGMENTS)
    dead.state.update(generation=s.generation + 1, log_start=bases[2])
    os.unlink(segment_file(dead.directory, bases[0], ".log"))  # the first unlink happened, the rest did not
    _die(dead)
    owner.append(tagged_batch("after"))
    assert segment_bases(owner.directory) == bases[2:] and owner.log_start_offset == bases[2]
    assert_dense_and_valid(owner.directory, start=bases[2])


def test_crash_mid_truncation_deletes_the_segments_that_no_longer_follow(open_partition):
    owner = open_partition()
    for i in range(60):
        owner.append(tagged_batch(str(i), pad=150))
    bases = owner.segment_bases()
    batches = stored_batches(owner.directory)
    cut = next(b for b in batches if b.segment == bases[1] and b.position > 0)
    dead = open_partition(recover=False)
    dead.lock.acquire()
    s = dead.state.snapshot()
    dead.state.set_pending(Op.TRUNCATE)
    dead.state.update(recovery_point=min(s.recovery_point, bases[1]))
    os.truncate(segment_file(dead.directory, bases[1], ".log"), cut.position)
    _die(dead)
    assert owner.append(tagged_batch("after")).base_offset == cut.base_offset
    assert segment_bases(owner.directory) == bases[:2]
    assert_dense_and_valid(owner.directory, start=0)
    check_indexes(owner)

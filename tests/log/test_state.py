"""Partition state: the shared page, its seqlock, and the pending-operation marker."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from mmlog.log import state as st
from mmlog.log.state import Op, PartitionState, TornState


def test_a_new_state_page_is_4_kib_of_zeros_but_the_magic(tmp_path):
    s = PartitionState(tmp_path)
    assert os.path.getsize(tmp_path / st.STATE_FILE) == st.STATE_SIZE
    assert s.is_new and not s.is_torn()
    assert tuple(s.snapshot()) == (0,) * 18 + (-1, -1, -1, st.TXN_LAYOUT_V1)
    s.flush()
    assert (tmp_path / st.STATE_FILE).read_bytes()[:8] == b"MMLOGST1"
    s.close()


def test_a_file_with_another_magic_is_refused(tmp_path):
    (tmp_path / st.STATE_FILE).write_bytes(b"NOTSTATE" + bytes(4088))
    with pytest.raises(ValueError):
        PartitionState(tmp_path)


def test_update_publishes_named_slots_and_keeps_the_sequence_even(tmp_path):
    s = PartitionState(tmp_path)
    s.update(log_end=10, high_watermark=10, generation=1)
    snap = s.snapshot()
    assert (snap.log_end, snap.high_watermark, snap.generation) == (10, 10, 1)
    assert s.get("log_end") == 10 and not s.is_new
    assert s.file.view[st.SEQ] == 2
    s.close()


def test_slot_numbers_match_the_documented_layout(tmp_path):
    s = PartitionState(tmp_path)
    names = st.Snapshot._fields
    for slot, name in enumerate(names, start=st.GENERATION):
        s.update(**{name: 1000 + slot})
    assert s.file.view[st.GENERATION : st.PENDING_OP + 1].tolist() == list(range(1000 + 2, 1000 + 20))
    s.close()


def test_publish_append_stores_the_append_slots_and_clears_the_pending_op(tmp_path):
    s = PartitionState(tmp_path)
    s.update(generation=3, log_start=5, active_base=5)
    s.set_pending(Op.APPEND)
    s.publish_append(20, 20, 900, 2, 1, 1234, 19, 100, 777, 15)
    snap = s.snapshot()
    assert (snap.generation, snap.log_start, snap.active_base) == (3, 5, 5)
    assert tuple(snap)[snap._fields.index("log_end") :] == (20, 20, 900, 2, 1, 1234, 19, 100, 777, 15, 0, -1, -1, -1, 1)
    assert not s.is_torn() and s.file.view[st.SEQ] % 2 == 0
    s.close()


def test_another_mapping_sees_an_update_without_any_syscall(tmp_path):
    writer, reader = PartitionState(tmp_path), PartitionState(tmp_path)
    writer.update(log_end=123)
    assert reader.snapshot().log_end == 123
    writer.close()
    reader.close()


def test_a_snapshot_never_mixes_two_updates(tmp_path):
    writer, reader = PartitionState(tmp_path), PartitionState(tmp_path)
    stop = threading.Event()

    def write():
        i = 0
        while not stop.is_set():
            i += 1
            writer.update(log_end=i, high_watermark=i, active_size=i)

    t = threading.Thread(target=write)
    t.start()
    try:
        for _ in range(20_000):
            snap = reader.snapshot()
            assert snap.log_end == snap.high_watermark == snap.active_size
    finally:
        stop.set()
        t.join()
    writer.close()
    reader.close()


def test_a_sequence_left_odd_by_a_dead_writer_is_a_torn_state(tmp_path):
    s = PartitionState(tmp_path)
    s.file.view[st.SEQ] = 7  # a writer died between the two sequence stores
    assert s.is_torn()
    with pytest.raises(TornState):
        s.snapshot(spins=200)
    s.reset_seq()
    assert s.file.view[st.SEQ] == 8 and not s.is_torn()
    s.snapshot()
    s.close()


def test_a_pending_operation_marks_the_state_torn_for_writers_but_not_readers(tmp_path):
    s = PartitionState(tmp_path)
    s.set_pending(Op.APPEND)
    assert s.is_torn()
    assert s.snapshot().pending_op == Op.APPEND  # readers carry on
    s.update(pending_op=int(Op.IDLE))
    assert not s.is_torn()
    s.close()


def test_update_after_a_torn_sequence_still_ends_even(tmp_path):
    s = PartitionState(tmp_path)
    s.file.view[st.SEQ] = 5
    s.update(log_end=1)
    assert s.file.view[st.SEQ] % 2 == 0
    s.close()


def test_state_slots_are_native_int64(tmp_path):
    s = PartitionState(tmp_path)
    assert s.file.view.dtype == np.int64
    s.close()

"""The embedded offset journal: its bytes, a torn tail at every byte, garbage, compaction and its crash points.

The oracle is the `OffsetTable` folded from the records that were acknowledged.
"""

import os
import struct

import pytest
from crc32c import crc32c

from mmlog.coordinator import offset_log
from mmlog.coordinator.offset_log import (
    COMPACTING_SUFFIX,
    FILE_NAME,
    FrameTooLarge,
    OffsetLog,
    encode_frame,
    read_frames,
)
from mmlog.coordinator.offsets import (
    Committed,
    GroupDelete,
    GroupMeta,
    OffsetCommit,
    OffsetDelete,
    OffsetTable,
    TopicDelete,
    TxnOffsetCommit,
    TxnOffsetEnd,
)

ALL_KINDS = [
    OffsetCommit("g", "t", 0, 10, 3, "meta", 1_700_000_000_000),
    OffsetCommit("g", "t", 1, 11, -1, "", 1_700_000_000_001),
    OffsetCommit("h", "u", 2, 12, -1, "ünïcode", 5),
    GroupMeta("g", "consumer", 7),
    OffsetDelete("g", "t", 1),
    TopicDelete("u"),
    GroupMeta("h", "", 1),
    GroupDelete("h"),
]


def opened(directory, **kw) -> OffsetLog:
    store = OffsetLog(directory, **kw)
    store.load()
    return store


def write(store, records):
    result = []
    store.write(records, result.append)
    assert result == [None]


def table_of(*batches) -> OffsetTable:
    table = OffsetTable()
    for batch in batches:
        for r in batch:
            table.apply(r)
    return table


def same(a: OffsetTable, b: OffsetTable) -> bool:
    return a.offsets == b.offsets and a.groups == b.groups


def test_a_frame_is_length_crc_then_records_in_the_documented_layout():
    record = OffsetCommit("grp", "top", 5, 123, 9, "md", 77)
    frame = encode_frame([record])
    body = (b"\x01" + b"\x00\x03grp" + b"\x00\x03top" + struct.pack(">iqiq", 5, 123, 9, 77)
            + b"\x00\x00\x00\x02md")
    assert frame == struct.pack(">II", 4 + len(body), crc32c(body)) + body
    assert encode_frame([TopicDelete("top")])[8:] == b"\x03\x00\x03top"
    assert encode_frame([GroupMeta("grp", "consumer", 2)])[8:] == b"\x04\x00\x03grp\x00\x08consumer\x00\x00\x00\x02"
    frames, valid, why = read_frames(memoryview(frame + encode_frame(ALL_KINDS)))
    assert frames == [[record], ALL_KINDS] and why == ""


def test_records_fold_in_order_and_survive_a_reopen(tmp_path):
    store = opened(tmp_path)
    write(store, ALL_KINDS[:3])
    write(store, ALL_KINDS[3:])
    write(store, [OffsetCommit("h", "u", 2, 99, -1, "", 6)])  # after the TopicDelete: it stays
    expected = table_of(ALL_KINDS, [OffsetCommit("h", "u", 2, 99, -1, "", 6)])
    assert same(store.table, expected)
    assert store.table.offsets == {"g": {("t", 0): Committed(10, 3, "meta", 1_700_000_000_000)},
                                   "h": {("u", 2): Committed(99, -1, "", 6)}}
    assert store.table.get("h", "u", 2).offset == 99 and store.table.get("g", "t", 1) is None
    assert store.table.groups == {"g": GroupMeta("g", "consumer", 7)}
    store.close()
    again = opened(tmp_path)
    assert same(again.table, expected)
    again.close()


def test_a_torn_last_frame_is_cut_at_every_byte_and_the_log_goes_on(tmp_path):
    first = [OffsetCommit("g", "t", 0, 1, -1, "", 1), GroupMeta("g", "consumer", 1)]
    last = [OffsetCommit("g", "t", 0, 2, -1, "x", 2), OffsetCommit("g", "t", 1, 5, -1, "", 2)]
    good = encode_frame(first)
    torn = encode_frame(last)
    for cut in range(len(torn)):  # a crash in the middle of the second write
        path = tmp_path / f"cut{cut}"
        path.mkdir()
        (path / FILE_NAME).write_bytes(good + torn[:cut])
        store = OffsetLog(path)
        notes = store.load()
        assert same(store.table, table_of(first)), cut
        assert os.path.getsize(path / FILE_NAME) == len(good)
        assert bool(notes) == (cut > 0)
        write(store, last)  # appends land after the valid prefix
        store.close()
        assert same(opened(path).table, table_of(first, last)), cut


@pytest.mark.parametrize("garbage", [
    b"\x00" * 100,  # a preallocated or zero-filled tail
    b"\xff" * 9,  # a length far too big
    struct.pack(">II", 20, 0) + b"x" * 20,  # a whole frame with a wrong CRC
    bytes(b ^ (i == 20) for i, b in enumerate(encode_frame([OffsetCommit("g", "t", 0, 9, -1, "", 1)]))),  # a bit flip
    struct.pack(">II", 6, crc32c(b"\x09\x00")) + b"\x09\x00",  # a valid CRC over an unknown record type
    struct.pack(">II", 7, crc32c(b"\x03\x00\x09")) + b"\x03\x00\x09",  # a string running past its frame
])
def test_garbage_after_the_last_valid_frame_is_truncated(tmp_path, garbage):
    records = [OffsetCommit("g", "t", 0, 1, -1, "", 1)]
    good = encode_frame(records)
    (tmp_path / FILE_NAME).write_bytes(good + garbage + encode_frame([TopicDelete("t")]))
    store = OffsetLog(tmp_path)
    [note] = store.load()
    assert "truncated" in note
    assert same(store.table, table_of(records))  # nothing after the first bad byte is trusted
    assert (tmp_path / FILE_NAME).read_bytes() == good
    store.close()


def test_a_failed_or_short_write_is_taken_back_and_changes_nothing(tmp_path, monkeypatch):
    store = opened(tmp_path)
    write(store, [OffsetCommit("g", "t", 0, 1, -1, "", 1)])
    size = store.size
    real_write = os.write
    monkeypatch.setattr(offset_log.os, "write", lambda fd, data: real_write(fd, bytes(data)[:5]))  # disk full
    errors = []
    store.write([OffsetCommit("g", "t", 0, 2, -1, "", 2)], errors.append)
    monkeypatch.setattr(offset_log.os, "write", real_write)
    assert isinstance(errors[0], OSError)
    assert store.table.get("g", "t", 0).offset == 1 and os.path.getsize(tmp_path / FILE_NAME) == size
    write(store, [OffsetCommit("g", "t", 0, 3, -1, "", 3)])
    store.close()
    assert opened(tmp_path).table.get("g", "t", 0).offset == 3


def test_a_frame_above_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(offset_log, "MAX_FRAME", 1000)
    store = opened(tmp_path)
    errors = []
    store.write([OffsetCommit("g", "t", p, 1, -1, "m" * 100, 1) for p in range(20)], errors.append)
    assert isinstance(errors[0], FrameTooLarge) and store.size == 0 and store.table.offsets == {}
    store.close()


def test_compaction_rewrites_the_live_state_once_the_file_is_mostly_dead(tmp_path):
    store = opened(tmp_path, compact_min_bytes=4096)
    appended = 0
    sizes = []
    for i in range(2000):  # the same 4 partitions committed over and over
        batch = [OffsetCommit("g", "t", p, i, -1, "", i) for p in range(4)]
        appended += len(encode_frame(batch))
        write(store, batch)
        sizes.append(store.size)
    compactions = sum(1 for a, b in zip(sizes, sizes[1:]) if b < a)
    assert compactions > 10
    assert max(sizes) < 2 * 4096 + 200  # never much more than twice the threshold
    live = len(encode_frame(store.table.records()))
    # Each compaction rewrites the live state only, after at least threshold - live new bytes:
    # the bytes rewritten stay a fraction of the bytes appended (no quadratic cost).
    assert compactions * live < appended / 4
    expected = {("t", p): 1999 for p in range(4)}
    assert {k: c.offset for k, c in store.table.group_offsets("g").items()} == expected
    store.close()
    assert {k: c.offset for k, c in opened(tmp_path).table.group_offsets("g").items()} == expected


def test_a_compaction_killed_before_its_rename_leaves_the_old_file_in_charge(tmp_path):
    store = opened(tmp_path)
    batches = [[OffsetCommit("g", "t", 0, i, -1, "", i)] for i in range(50)]
    for batch in batches:
        write(store, batch)
    store.close()
    # The crash: a half-written .compacting file (step 1 of 3) next to the whole old file.
    (tmp_path / (FILE_NAME + COMPACTING_SUFFIX)).write_bytes(encode_frame([TopicDelete("t")])[:7])
    again = OffsetLog(tmp_path)
    notes = again.load()
    assert any("interrupted compaction" in n for n in notes)
    assert not (tmp_path / (FILE_NAME + COMPACTING_SUFFIX)).exists()
    assert same(again.table, table_of(*batches))
    again.close()


def test_a_compaction_killed_after_its_rename_leaves_the_new_file_whole(tmp_path):
    store = opened(tmp_path)
    batches = [[OffsetCommit("g", "t", i % 3, i, -1, "", i), GroupMeta("g", "consumer", i)] for i in range(50)]
    for batch in batches:
        write(store, batch)
    before = os.path.getsize(tmp_path / FILE_NAME)
    store.compact()  # steps 1-3; the process "dies" right after (no close, no fsync of anything else)
    assert os.path.getsize(tmp_path / FILE_NAME) < before
    again = opened(tmp_path)
    assert same(again.table, table_of(*batches))
    write(again, [OffsetCommit("g", "t", 0, 1000, -1, "", 1)])
    again.close()
    assert opened(tmp_path).table.get("g", "t", 0).offset == 1000


def test_a_mostly_dead_file_is_compacted_at_load(tmp_path):
    store = opened(tmp_path, compact_min_bytes=1 << 30)  # never while running
    for i in range(500):
        write(store, [OffsetCommit("g", "t", 0, i, -1, "", i)])
    store.close()
    big = os.path.getsize(tmp_path / FILE_NAME)
    again = OffsetLog(tmp_path, compact_min_bytes=1024)
    notes = again.load()
    assert any("compacted" in n for n in notes)
    assert os.path.getsize(tmp_path / FILE_NAME) < big / 10
    assert again.table.get("g", "t", 0).offset == 499
    again.close()


def test_transactional_offsets_stay_pending_until_their_marker_and_survive_a_reopen(tmp_path):
    store = opened(tmp_path)
    write(store, [OffsetCommit("g", "t", 0, 5, -1, "", 1)])
    write(store, [TxnOffsetCommit("g", 7, "t", 0, 50, -1, "txn", 2), TxnOffsetCommit("g", 8, "t", 1, 80, -1, "", 2)])
    assert store.table.get("g", "t", 0).offset == 5  # not visible before the marker
    store.close()
    store = opened(tmp_path)  # pending offsets are as durable as committed ones
    assert store.table.pending_offsets("g", 7) == {("t", 0): Committed(50, -1, "txn", 2)}
    write(store, [TxnOffsetEnd("g", 7, True), TxnOffsetEnd("g", 8, False)])
    assert store.table.get("g", "t", 0) == Committed(50, -1, "txn", 2)
    assert store.table.get("g", "t", 1) is None and store.table.pending == {}
    store.close()
    again = opened(tmp_path)
    assert again.table.get("g", "t", 0).offset == 50 and again.table.pending == {}
    again.close()


def fsyncs_and_acks(monkeypatch, store, batches):
    """Write each batch; the order in which the journal fsynced and acknowledged (fsyncs observed, not faked)."""
    events = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real(fd))[1])
    for records in batches:
        store.write(records, lambda exc: events.append("ack" if exc is None else exc))
    return events


def test_with_flush_messages_1_a_commit_is_fsynced_before_it_is_acknowledged(tmp_path, monkeypatch):
    """log.flush.interval.messages=1: an acknowledged commit survives a power loss, as a produced record does."""
    store = opened(tmp_path, flush_messages=1)
    events = fsyncs_and_acks(monkeypatch, store, [ALL_KINDS[:1], ALL_KINDS[1:3]])
    assert events == ["fsync", "ack", "fsync", "ack"]
    store.close()


def test_flush_messages_counts_records_and_the_default_leaves_syncing_to_the_timer(tmp_path, monkeypatch):
    store = opened(tmp_path, flush_messages=3)
    one = [ALL_KINDS[0]]
    assert fsyncs_and_acks(monkeypatch, store, [one, one, one, one]) == ["ack", "ack", "fsync", "ack", "ack"]
    store.close()
    default = opened(tmp_path / "default")
    events = fsyncs_and_acks(monkeypatch, default, [one] * 5)
    assert events == ["ack"] * 5
    default.flush_due(0)  # the control thread's flush timer, log.flush.interval.ms
    assert events == ["ack"] * 5 + ["fsync"]
    default.close()


def test_the_embedded_store_passes_the_brokers_flush_messages_to_the_journal(tmp_path):
    from mmlog.acceptor.main import open_store
    from mmlog.config.broker import BrokerConfig

    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path), "log.flush.interval.messages": "1"})
    assert open_store(config).offset_store().flush_messages == 1

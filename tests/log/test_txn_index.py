"""The transaction index file: Kafka's 34-byte entries, collected by fetch range, cut by truncation, torn tails ignored."""

from __future__ import annotations

from mmlog.log import txn_index
from mmlog.log.txn_index import AbortedTxn


def test_an_entry_is_kafkas_aborted_txn_layout(tmp_path):
    txn_index.append(tmp_path, 100, AbortedTxn(7, 101, 140, 120))
    data = txn_index.path(tmp_path, 100).read_bytes()
    assert data.hex() == ("0000" "0000000000000007" "0000000000000065" "000000000000008c" "0000000000000078")
    assert txn_index.path(tmp_path, 100).name == "00000000000000000100.txnindex"


def test_a_segment_without_aborts_has_no_file_and_no_entries(tmp_path):
    assert txn_index.read(tmp_path, 0) == []
    assert txn_index.last_abort(tmp_path, [0, 10]) == -1
    txn_index.flush(tmp_path, 0)
    txn_index.truncate(tmp_path, 0, 5)
    assert not txn_index.path(tmp_path, 0).exists()


def test_collect_keeps_what_overlaps_and_stops_at_a_last_stable_offset_past_the_bound():
    entries = [AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 22, 30, 31)]
    assert txn_index.collect(entries, 11, 25) == (entries[1:], True)  # 1 ended before 11; 3 begins below 25
    found, complete = txn_index.collect(entries, 0, 100)
    assert found == entries and not complete  # a later segment may hold more
    assert txn_index.collect(entries, 0, 5) == ([entries[0]], True)  # 2 begins at the bound: not in range


def test_truncation_keeps_the_entries_whose_marker_is_below_the_offset(tmp_path):
    for i in range(3):
        txn_index.append(tmp_path, 0, AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    txn_index.truncate(tmp_path, 0, 16)  # markers at 5, 15, 25: the log keeps offsets 0-15
    assert [t.producer_id for t in txn_index.read(tmp_path, 0)] == [0, 1]
    assert txn_index.last_abort(tmp_path, [0]) == 15


def test_a_torn_tail_is_ignored_by_readers_and_written_over_by_the_next_append(tmp_path):
    txn_index.append(tmp_path, 0, AbortedTxn(1, 0, 3, 4))
    with open(txn_index.path(tmp_path, 0), "ab") as f:
        f.write(b"\x00" * 20)
    assert txn_index.read(tmp_path, 0) == [AbortedTxn(1, 0, 3, 4)]
    size = txn_index.append(tmp_path, 0, AbortedTxn(2, 5, 8, 9))
    assert size == txn_index.ENTRY_SIZE
    assert txn_index.read(tmp_path, 0) == [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 5, 8, 9)]
    txn_index.cut(tmp_path, 0, size)
    assert txn_index.read(tmp_path, 0) == [AbortedTxn(1, 0, 3, 4)]

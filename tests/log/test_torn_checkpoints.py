"""Checkpoints that a power loss left empty, zero-filled or torn: the partition opens, rebuilds them from the
log with one WARNING, and serves as before (a file renamed before its data reached the disk comes back so)."""

from __future__ import annotations

import logging

import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import OutOfOrderSequenceNumber
from mmlog.log import offset_checkpoint
from mmlog.log.leader_epochs import FILE_NAME
from mmlog.log.producer_state import snapshot_offsets, snapshot_path
from mmlog.protocol import records as rec

PID = 4000
DAMAGE = {"empty": b"", "zero-filled": bytes(24), "torn": b"0\n2\n0 0\n"}


def batch(seq: int, n: int = 2) -> bytearray:
    return rec.build_batch([(None, f"v-{seq + i}".encode()) for i in range(n)], producer_id=PID, producer_epoch=0,
                           base_sequence=seq)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
@pytest.mark.parametrize("clean", [False, True], ids=["after a crash", "after a clean close"])
def test_an_unreadable_epoch_checkpoint_is_rebuilt_from_the_log(open_partition, partition_dir, caplog, damage, clean):
    p = open_partition()
    p.become_leader(0, (0,), (0,), 0)
    for i in range(3):
        p.append(rec.build_batch([(None, b"epoch 0")]))
    p.become_leader(2, (0,), (0,), 0)
    for i in range(2):
        p.append(rec.build_batch([(None, b"epoch 2")]))
    p.become_leader(5, (0,), (0,), 0)  # an epoch no batch carries yet: it starts at the log end
    p.close(clean=clean)
    (partition_dir / FILE_NAME).write_bytes(DAMAGE[damage])
    with caplog.at_level(logging.WARNING):
        again = open_partition()
    assert again.epochs.entries() == [(0, 0), (2, 3), (5, 5)]
    assert (partition_dir / FILE_NAME).read_text() == "0\n3\n0 0\n2 3\n5 5\n"
    assert len([m for m in warnings(caplog) if FILE_NAME in m]) == 1
    assert again.append(rec.build_batch([(None, b"after")])).base_offset == 5
    assert again.end_offset_for_epoch(2) == (2, 5)


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_an_unreadable_producer_snapshot_is_ignored_and_the_state_rebuilt_from_the_log(open_partition, partition_dir,
                                                                                      caplog, damage):
    cfg = LogConfig(segment_bytes=300, segment_index_bytes=1024)
    p = open_partition(cfg=cfg)
    for i in range(12):
        p.append(batch(2 * i))
    assert len(snapshot_offsets(partition_dir)) > 2
    p.close(clean=False)
    for offset in snapshot_offsets(partition_dir):
        snapshot_path(partition_dir, offset).write_bytes(DAMAGE[damage])
    with caplog.at_level(logging.WARNING):
        again = open_partition(cfg=cfg)
        assert again.append(batch(22)).base_offset == 22  # a retry: answered with its offsets, not appended
        assert again.log_end_offset == 24
        with pytest.raises(OutOfOrderSequenceNumber):  # the sequence never goes backwards or skips
            again.append(batch(30))
        assert again.append(batch(24)).base_offset == 24
    damaged = [m for m in warnings(caplog) if ".snapshot" in m]
    assert damaged and all("rebuilt" in m for m in damaged)


def test_an_unreadable_high_watermark_checkpoint_reads_as_none_with_a_warning(tmp_path, caplog):
    path = tmp_path / offset_checkpoint.HIGH_WATERMARKS
    offset_checkpoint.write(path, {("t", 0): 7})
    assert offset_checkpoint.read(path) == {("t", 0): 7}
    path.write_bytes(bytes(16))
    with caplog.at_level(logging.WARNING):
        assert offset_checkpoint.read(path) == {}
    assert len(warnings(caplog)) == 1

"""The compiled walk over stored batch headers hands producer state exactly the batches the Python walk would,
and producer state caught up either way is the same."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mmlog.config.settings import LogConfig
from mmlog.log import batch_walk, segment_view
from mmlog.log.producer_state import ProducerState
from mmlog.protocol import records as rec
from tests.log.test_transactions import Producer, plain

CONFIG = LogConfig(segment_bytes=4000)  # a roll every few dozen batches: the walk crosses segments


def mixed_log(p, rng: random.Random, batches: int) -> None:
    """Plain batches, idempotent ones and transactions with their markers, in a random mix."""
    idem, txn = Producer(9000), Producer(9001)
    open_txn = False
    for _ in range(batches):
        kind = rng.random()
        if kind < 0.6:
            p.append(plain(rng.randint(1, 3)))
        elif kind < 0.8:
            p.append(idem.batch(rng.randint(1, 3), transactional=False))
        elif not open_txn:
            p.append(txn.batch(2))
            open_txn = True
        else:
            p.append_marker(txn.pid, txn.epoch, rng.random() < 0.5, 0)
            open_txn = False


def walked(p, producers_only: bool) -> list:
    s = p.snapshot()
    return [(h.base_offset, h.producer_id, m) for h, m in p._stored_batches(s, s.log_start,
                                                                             producers_only=producers_only)]


@pytest.mark.parametrize("a_call", [1, 3, segment_view.PRODUCER_BATCHES_A_CALL])
def test_the_compiled_walk_yields_the_batches_with_a_producer_and_nothing_else(open_partition, monkeypatch, a_call):
    monkeypatch.setattr(segment_view, "PRODUCER_BATCHES_A_CALL", a_call)  # out full: the walk goes on where it was
    p = open_partition(cfg=CONFIG)
    mixed_log(p, random.Random(a_call), 300)
    assert len(p._bases) > 3
    every = walked(p, producers_only=False)
    assert walked(p, producers_only=True) == [b for b in every if b[1] != batch_walk.NO_PRODUCER]
    assert any(m is not None for _, _, m in every)  # markers came through, read whole


def test_producer_state_caught_up_through_the_walk_is_the_python_walks(open_partition, partition_dir):
    p = open_partition(cfg=CONFIG)
    mixed_log(p, random.Random(5), 400)
    s = p.snapshot()
    states = []
    for producers_only in (False, True):
        state = ProducerState(partition_dir)
        state.apply_batches(p._stored_batches(s, s.log_start, producers_only=producers_only))
        states.append(({pid: (e.epoch, e.batches, e.txn_first) for pid, e in state.producers.items()},
                       dict(state.ongoing)))
    assert states[0] == states[1] and states[0][0]


def test_a_walk_stops_at_the_log_end_and_leaves_an_odd_header_to_python(tmp_path):
    data = bytearray()
    for i, pid in enumerate([-1, 5, -1, 6]):
        b = rec.build_batch([(None, b"x")], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                            base_sequence=0 if pid >= 0 else -1)
        rec.set_base_offset(b, i)
        data += b
    path = tmp_path / "seg.log"
    path.write_bytes(bytes(data) + bytes(rec.HEADER_SIZE))  # zeros past the batches: a size of 12
    header, out = np.zeros(rec.HEADER_SIZE, np.uint8), np.zeros(8, np.int64)
    with open(path, "rb") as f:
        fd = np.int32(f.fileno())
        n, pos, why = batch_walk.producer_batches(fd, 0, len(data) + rec.HEADER_SIZE, 3, header, out)
        assert (n, why) == (1, batch_walk.LOG_END) and pos == 3 * (len(data) // 4)  # offset 3 is not stored yet
        n, pos, why = batch_walk.producer_batches(fd, 0, len(data) + rec.HEADER_SIZE, 10, header, out)
        assert (n, why) == (2, batch_walk.PYTHON) and pos == len(data)  # the zeros: Python's walk says what they are

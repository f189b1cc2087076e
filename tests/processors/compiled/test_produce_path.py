"""One Produce request in compiled code, called directly: what it refuses, it refuses before appending."""

from __future__ import annotations

import numpy as np

from mmlog.config.settings import LogConfig
from mmlog.ipc.metrics_block import REGION_WORDS
from mmlog.log.partition import Partition
from mmlog.log.partition_table import PartitionTable
from mmlog.processors.compiled import loop, produce_path
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import produce
from mmlog.protocol.records import build_batch


def serve(table, frame: bytes, wbuf: np.ndarray, wpos: int) -> int:
    buf = np.frombuffer(frame, np.uint8).copy()
    one = np.zeros(1, np.int64)
    shared = (np.zeros(REGION_WORDS, np.int64), one, one.copy(), one.copy(), *produce_path.no_quota_block())
    return produce_path.serve_frame(buf, 4, len(frame), wbuf, wpos, np.zeros(loop.COUNTER_FIELDS, np.int64),
                                    produce_path.make_scratch(), table.arrays(), shared, 0, -1, 0, False)


def test_a_request_whose_answer_has_no_room_is_left_to_python_before_anything_is_appended(tmp_path):
    part = Partition(tmp_path / "t-0", LogConfig())
    table = PartitionTable(8)
    table.ensure("t", 0, part)
    frame = bytes(encode_request(RequestHeader(produce.API_KEY, 8, 1, "direct"), produce.REQUEST(
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": build_batch([(None, b"v")])}]}])))
    wbuf = np.zeros(256, np.uint8)
    try:
        assert serve(table, frame, wbuf, 250) == -1  # 6 bytes left: the answer needs more
        assert part.high_watermark == 0  # nothing appended: Python serves the same bytes once
        assert serve(table, frame, wbuf, 0) > 0
        assert part.high_watermark == 1
    finally:
        table.clear()
        part.close()

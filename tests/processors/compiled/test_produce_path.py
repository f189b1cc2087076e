"""Produce requests in compiled code, called directly: what it refuses, it refuses before appending; the
requests of one read to one partition are one group commit whose answers and files are those of serving
them one by one."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from mmlog.config.settings import LogConfig
from mmlog.ipc.metrics_block import REGION_WORDS
from mmlog.log.partition import Partition
from mmlog.log.partition_table import PartitionTable
from mmlog.log.state import LOCK_SLOTS, STATE_FILE
from mmlog.processors.compiled import loop, produce_path
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import produce
from mmlog.protocol.records import build_batch
from tests.processors.compiled.test_differential import CLOCKS


def shared() -> tuple:
    one = np.zeros(1, np.int64)
    return (np.zeros(REGION_WORDS, np.int64), one, one.copy(), one.copy(), *produce_path.no_quota_block())


def serve(table, frame: bytes, wbuf: np.ndarray, wpos: int) -> int:
    buf = np.frombuffer(frame, np.uint8).copy()
    return produce_path.serve_frame(buf, 4, len(frame), wbuf, wpos, np.zeros(loop.COUNTER_FIELDS, np.int64),
                                    produce_path.make_scratch(), table.arrays(), shared(), 0, -1, 0, False)


def serve_group(table, frames: list[bytes], wbuf: np.ndarray, wpos: int = 0) -> int:
    buf = np.frombuffer(b"".join(frames), np.uint8).copy()
    return produce_path.serve_group(buf, 0, len(frames), wbuf, wpos, np.zeros(loop.COUNTER_FIELDS, np.int64),
                                    produce_path.make_scratch(), table.arrays(), shared(), 0)


def request(correlation_id: int, records: bytes | None, topic: str = "t", index: int = 0, acks: int = 1,
            version: int = 8, transactional_id: str | None = None) -> bytes:
    return bytes(encode_request(RequestHeader(produce.API_KEY, version, correlation_id, "direct"), produce.REQUEST(
        transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[
            {"name": topic, "partition_data": [{"index": index, "records": records}]}])))


def batch(rng: random.Random) -> bytes:
    return build_batch([(None, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
                        for _ in range(rng.randrange(1, 6))], base_timestamp=1_700_000_000_000)


def corrupt(records: bytes) -> bytes:
    """The batch with its last byte flipped: its CRC no longer holds."""
    return records[:-1] + bytes([records[-1] ^ 0xFF])


@pytest.fixture
def partitions(tmp_path):
    """open(name, topic="t", **config) -> (partition, its table); all closed at the end."""
    opened = []

    def open_(name: str, topic: str = "t", **config):
        part = Partition(tmp_path / name / f"{topic}-0", LogConfig(**config))
        table = PartitionTable(8)
        table.ensure(topic, 0, part)
        opened.append((part, table))
        return part, table

    yield open_
    for part, table in opened:
        table.clear()
        part.close()


def log_files(part) -> dict[str, object]:
    """The segment, index and time index files, and the state page but for its clocks and seqlock count."""
    files = {}
    for path in sorted(Path(part.directory).iterdir()):
        if path.suffix in (".log", ".index", ".timeindex"):
            files[path.name] = path.read_bytes()
        elif path.name == STATE_FILE:
            slots = np.fromfile(path, dtype=np.int64)
            slots[CLOCKS] = 0
            slots[LOCK_SLOTS] = 0
            files[path.name] = slots.tolist()
    return files


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


@pytest.mark.parametrize("acks", [1, 0])
def test_a_read_of_requests_to_one_partition_is_one_group_with_the_answers_and_files_of_one_by_one(partitions, acks):
    rng = random.Random(acks)
    first = request(1, batch(rng))  # a group into an empty segment is the kernel's to refuse: one request first
    frames = [request(2 + i, batch(rng), acks=acks, version=3 + i % 6) for i in range(12)]
    grouped, grouped_table = partitions("grouped", index_interval_bytes=300)  # index entries inside the group
    single, single_table = partitions("single", index_interval_bytes=300)
    wbuf = np.zeros(1 << 16, np.uint8)
    for table in (grouped_table, single_table):
        assert serve(table, first, wbuf, 0) > 0
    end = serve_group(grouped_table, frames, wbuf)
    one_by_one = np.zeros_like(wbuf)
    at = 0
    for frame in frames:
        at = serve(single_table, frame, one_by_one, at)
    assert end == at and (end > 0) == (acks == 1)
    assert bytes(wbuf[:end]) == bytes(one_by_one[:at])
    assert grouped.log_end_offset == single.log_end_offset > 13
    assert log_files(grouped) == log_files(single)


def test_what_is_not_one_partitions_plain_group_is_refused_with_nothing_appended(partitions):
    rng = random.Random(5)
    part, table = partitions("p", topic="t")
    wbuf = np.zeros(1 << 16, np.uint8)
    two = [request(1, batch(rng)), request(2, batch(rng))]
    assert serve_group(table, two, wbuf) == -1  # into the empty segment: the kernel's refusal
    assert part.log_end_offset == 0
    assert serve(table, two[0], wbuf, 0) > 0
    end = part.log_end_offset
    refused = {
        "another partition": [request(3, batch(rng)), request(4, batch(rng), index=1)],
        "another topic": [request(3, batch(rng)), request(4, batch(rng), topic="u")],
        "acks all": [request(3, batch(rng), acks=-1), request(4, batch(rng), acks=-1)],
        "mixed acks": [request(3, batch(rng), acks=1), request(4, batch(rng), acks=0)],
        "a transactional id": [request(3, batch(rng)), request(4, batch(rng), transactional_id="txn")],
        "a corrupt batch": [request(3, batch(rng)), request(4, corrupt(batch(rng)))],
        "null records": [request(3, batch(rng)), request(4, None)],
    }
    for why, frames in refused.items():
        assert serve_group(table, frames, wbuf) == -1, why
        assert part.log_end_offset == end, why
    frames = [request(5, batch(rng)), request(6, batch(rng))]
    assert serve_group(table, frames, wbuf, wbuf.shape[0] - 8) == -1  # no room for the answers
    assert part.log_end_offset == end
    assert serve_group(table, frames, wbuf) > 0
    assert part.log_end_offset > end

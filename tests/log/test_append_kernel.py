"""The compiled append against `Partition.append_many`: the same appends into two partition directories, one
through each, leave every file byte-identical and answer the same offsets; whatever the kernel does not cover
falls back with no byte changed, and the Python path then appends it."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from mmlog.config.settings import LogConfig
from mmlog.errors import CorruptMessage
from mmlog.log import append_kernel as ak
from mmlog.log import partition_table as pt
from mmlog.log.append_info import AppendInfo
from mmlog.log.partition import Partition
from mmlog.log.partition_table import PartitionTable
from mmlog.log.state import LOCK_SLOTS, STATE_FILE
from mmlog.protocol import records as rec
from tests.log.logtools import T0, assert_dense_and_valid, check_indexes, random_records

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def warm():
    ak.warm()


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file's bytes; the state page's without the writer lock's slots (a run's, not the log's)."""
    files = {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}
    if STATE_FILE in files:
        slots = np.frombuffer(files[STATE_FILE], np.int64).copy()
        slots[LOCK_SLOTS] = 0
        files[STATE_FILE] = slots.tobytes()
    return files


def random_buffer(rng: random.Random, now: int, max_batches: int = 3) -> bytearray:
    """1..max_batches batches of 1..4 records: keys null or not, headers, timestamps around now, out of order."""
    buf = bytearray()
    for _ in range(rng.randrange(1, max_batches + 1)):
        buf += rec.build_batch(random_records(rng, rng.randrange(1, 5), ts_base=now, ts_spread=2000))
    return buf


class Kernel:
    """One partition appended through the kernel, falling back to its Python path as a processor would."""

    def __init__(self, part: Partition, rng: random.Random | None = None) -> None:
        self.part = part
        self.table = PartitionTable(4)
        self.rng = rng or random.Random(0)
        self.appended = self.fell_back = 0
        self.reasons: dict[str, int] = {}

    def lay_out(self, bufs: list) -> tuple[np.ndarray, np.ndarray]:
        """A receive buffer holding the records fields with other bytes between them (or none), and their spans."""
        data = bytearray(self.rng.randbytes(self.rng.randrange(0, 9)))
        spans = []
        adjacent = self.rng.random() < 0.5
        for b in bufs:
            spans.append((len(data), len(b)))
            data += b
            if not adjacent:
                data += self.rng.randbytes(self.rng.randrange(1, 40))
        return np.frombuffer(data, dtype=np.uint8).copy(), np.array(spans, dtype=np.int64).reshape(-1, 2)

    def try_append(self, bufs: list, now: int, acks: int = 1):
        """(status, out, receive buffer, spans, the buffer before)."""
        row = self.table.ensure("t", 0, self.part)
        data, spans = self.lay_out(bufs)
        before = data.copy()
        out = np.full((len(bufs), 5), -7, dtype=np.int64)
        status = ak.append(self.table.rows, row, data, spans, len(bufs), now, acks, out)
        return status, out, data, spans, before, row

    def append(self, bufs: list, now: int, acks: int = 1) -> list:
        """(base, last, log start) per buffer, or the exception the Python path answered."""
        status, out, data, spans, before, row = self.try_append(bufs, now, acks)
        if status == ak.OK:
            self.appended += 1
            for i, (start, length) in enumerate(spans):
                bufs[i][:] = data[start:start + length].tobytes()  # what the kernel wrote, offsets assigned
            outside = np.ones(len(data), dtype=bool)
            for start, length in spans:
                outside[start:start + length] = False
            assert (data[outside] == before[outside]).all()
            return [tuple(int(v) for v in out[i, :3]) for i in range(len(bufs))]
        assert status == ak.FALLBACK
        assert (data == before).all(), "a fallback changed the buffer"
        self.fell_back += 1
        reason = ak.REASONS[self.table.rows[row, pt.FALLBACK_REASON]] if self.table.row_of("t", 0) == row else "gone"
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        return [answer(o) for o in self.part.append_many(bufs)]


def answer(outcome):
    return (outcome.base_offset, outcome.last_offset, outcome.log_start_offset) \
        if outcome.__class__ is AppendInfo else type(outcome)


def two_partitions(tmp_path, config, leader_epoch=None, clock=None):
    a = Partition(tmp_path / "python" / "t-0", config)
    b = Partition(tmp_path / "kernel" / "t-0", config)
    if leader_epoch is not None:
        for p in (a, b):
            p.become_leader(leader_epoch, (0,), (0,), 0, now=clock.now)
    return a, b


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("leader_epoch", [None, 3])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_kernel_leaves_the_files_the_python_path_leaves(tmp_path, clock, group, leader_epoch, seed):
    """Random appends (rolls by size, time and index capacity; flushes by count and time on the way), each
    through append_many in one directory and the kernel (or its fallback) in the other, where another writer
    appends now and then: the same answers, the same bytes in every file, checked along the way and at the
    end."""
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=12 * 1024, segment_index_bytes=640, index_interval_bytes=300,
                       segment_ms=60_000, flush_messages=400, flush_ms=90_000)
    a, b = two_partitions(tmp_path, config, leader_epoch, clock)
    kernel = Kernel(b, random.Random(seed + 100))
    other = Partition(b.directory, config, recover=False)  # another writer of the kernel's partition
    try:
        for step in range(250):
            clock.now += rng.choice((0, 1, 7, 300, 2500))
            bufs = [random_buffer(rng, clock.now) for _ in range(rng.randrange(1, group + 1))]
            expected = [answer(o) for o in a.append_many([bytearray(x) for x in bufs])]
            copies = [bytearray(x) for x in bufs]
            if rng.random() < 0.1:
                assert [answer(o) for o in other.append_many(copies)] == expected
            else:
                assert kernel.append(copies, clock.now) == expected
            if step % 50 == 49:
                assert files_of(a.directory) == files_of(b.directory)
        assert files_of(a.directory) == files_of(b.directory)
        assert kernel.appended > kernel.fell_back, kernel.reasons
        assert {"roll due", "flush due"} <= set(kernel.reasons), kernel.reasons
        check_indexes(b)
        assert_dense_and_valid(b.directory)
    finally:
        other.close()
        a.close()
        b.close()
    assert files_of(a.directory) == files_of(b.directory)  # clean closes alike


def test_the_offsets_stamped_in_the_buffer_are_the_python_paths(tmp_path, clock):
    a, b = two_partitions(tmp_path, LogConfig(index_interval_bytes=100), leader_epoch=9, clock=clock)
    kernel = Kernel(b)
    rng = random.Random(5)
    for i in range(20):
        bufs = [random_buffer(rng, clock.now) for _ in range(3 if i else 1)]  # a group never goes first
        python = [bytearray(x) for x in bufs]
        a.append_many(python)
        status, out, data, spans, _, _ = kernel.try_append(bufs, clock.now)
        assert status == ak.OK
        assert [data[s:s + n].tobytes() for s, n in spans] == [bytes(x) for x in python]
        for (s, n), (base, last, start, batches, records) in zip(spans, out):
            headers = rec.validate_batches(data[s:s + n].tobytes())
            assert (headers[0].base_offset, headers[-1].last_offset, start) == (base, last, 0)
            assert headers[0].partition_leader_epoch == 9
            assert (batches, records) == (len(headers), sum(h.records_count for h in headers))
    assert files_of(a.directory) == files_of(b.directory)
    a.close()
    b.close()


# ---------------------------------------------------------------- what falls back


def corrupt(offset: int, value: int):
    def change(buf: bytearray) -> bytearray:
        buf[offset] = value
        return buf
    return change


def _batch(**kw) -> bytearray:
    return rec.build_batch([(b"k", b"v" * 40)], base_timestamp=T0, **kw)


def _bad_length(buf: bytearray) -> bytearray:
    buf[8:12] = (40).to_bytes(4, "big")
    return buf


def _long_length(buf: bytearray) -> bytearray:
    buf[8:12] = (len(buf)).to_bytes(4, "big")
    return buf


def _wrong_count(buf: bytearray) -> bytearray:
    buf[57:61] = (2).to_bytes(4, "big")  # inside the CRC: the CRC catches it first
    return buf


CORRUPT_CASES = {
    "bad CRC": (corrupt(70, 0x55), CorruptMessage),
    "bad magic": (corrupt(16, 1), CorruptMessage),
    "length below a header": (_bad_length, CorruptMessage),
    "length past the buffer": (_long_length, CorruptMessage),
    "truncated": (lambda b: b[:-3], CorruptMessage),
    "truncated header": (lambda b: b[:10], CorruptMessage),
    "count against the CRC": (_wrong_count, CorruptMessage),
}


def assert_falls_back(kernel: Kernel, bufs: list, now: int, reason: str, acks: int = 1) -> None:
    """FALLBACK with the reason, and no byte of the buffer or of any file changed."""
    files = files_of(kernel.part.directory)
    status, _, data, _, before, row = kernel.try_append(bufs, now, acks)
    assert status == ak.FALLBACK
    assert ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]] == reason
    assert (data == before).all()
    assert files_of(kernel.part.directory) == files
    kernel.table.rows[row, pt.STALE] = 1  # as a processor does after the Python path handled it: fill again


@pytest.mark.parametrize("case", sorted(CORRUPT_CASES))
def test_a_corrupt_batch_falls_back_and_the_python_path_answers_the_error(open_partition, clock, case):
    change, error = CORRUPT_CASES[case]
    p = open_partition()
    p.append(_batch())
    kernel = Kernel(p)
    bad = change(_batch())
    assert_falls_back(kernel, [bad], clock.now, "corrupt batch")
    assert isinstance(p.append_many([bad])[0], error)
    good = _batch()
    assert_falls_back(kernel, [good, change(_batch())], clock.now, "corrupt batch")  # one bad buffer: all go back


@pytest.mark.parametrize("case", ["gzip", "transactional", "idempotent", "control", "idempotent second batch"])
def test_batches_other_than_plain_ones_fall_back(open_partition, clock, case):
    p = open_partition()
    p.append(_batch())
    kernel = Kernel(p)
    if case == "gzip":
        buf = _batch(compression=1)
    elif case == "transactional":
        buf = _batch(producer_id=4, producer_epoch=0, base_sequence=0, transactional=True)
    elif case == "idempotent":
        buf = _batch(producer_id=4, producer_epoch=0, base_sequence=0)
    elif case == "idempotent second batch":
        buf = _batch() + _batch(producer_id=4, producer_epoch=0, base_sequence=0)
    else:
        buf = rec.build_end_txn_marker(4, 0, True, 0, timestamp=T0)
    # an idempotent producer's batch alone is covered once the row holds the producers (test_producer_table.py)
    assert_falls_back(kernel, [buf], clock.now, "producers not in the table" if case == "idempotent" else
                      "not a plain batch")
    p.append_many([buf])  # the Python path answers it (appended, or the error a client gets)


@pytest.mark.parametrize("config, reason", [
    (LogConfig(cleanup_policy="compact"), "not a plain batch"),
    (LogConfig(compression_type="gzip"), "not a plain batch"),
    (LogConfig(max_message_bytes=100), "too large"),
    (LogConfig(segment_bytes=100), "too large"),
])
def test_topic_configs_the_kernel_does_not_cover_fall_back(open_partition, clock, config, reason):
    p = open_partition(cfg=config)
    kernel = Kernel(p)
    assert_falls_back(kernel, [_batch()], clock.now, reason)
    p.append_many([_batch()])  # the Python path appends it, or answers the error


def test_plain_batches_pass_where_compression_type_keeps_them(open_partition, partition_dir, clock):
    for n, kind in enumerate(("producer", "uncompressed")):
        p = open_partition(partition_dir.parent / f"c-{n}", LogConfig(compression_type=kind))
        status, *_ = Kernel(p).try_append([_batch()], clock.now)
        assert status == ak.OK


def test_a_roll_or_a_flush_due_falls_back(open_partition, clock):
    p = open_partition(cfg=LogConfig(segment_bytes=1000, segment_ms=10_000, flush_messages=5))
    kernel = Kernel(p)
    assert kernel.append([_batch()], clock.now)[0][0] == 0
    assert_falls_back(kernel, [_batch()], clock.now + 10_000, "roll due")  # segment.ms
    assert_falls_back(kernel, [_batch() for _ in range(9)], clock.now, "roll due")  # segment.bytes
    for _ in range(3):
        kernel.append([_batch()], clock.now)
    assert_falls_back(kernel, [_batch()], clock.now, "flush due")  # the fifth message
    p.append_many([_batch()])
    assert p.snapshot().unflushed == 0


def test_flush_ms_is_left_to_the_flush_timer_counted_from_the_oldest_unflushed_message(open_partition, clock):
    p = open_partition(cfg=LogConfig(flush_ms=1000))
    kernel = Kernel(p)
    kernel.append([_batch()], clock.now)
    assert p.snapshot().flushed_at_ms == clock.now
    assert kernel.append([_batch()], clock.now + 5000)[0][0] == 1  # no fsync in the append, whatever its age
    assert p.snapshot().flushed_at_ms == clock.now and p.snapshot().unflushed == 2


def test_a_group_into_an_empty_segment_falls_back(open_partition, clock):
    kernel = Kernel(open_partition())
    assert_falls_back(kernel, [_batch(), _batch()], clock.now, "group into an empty segment")
    assert kernel.append([_batch()], clock.now) == [(0, 0, 0)]
    assert kernel.append([_batch(), _batch()], clock.now) == [(1, 1, 0), (2, 2, 0)]


def test_acks_all_is_covered_where_the_isr_holds_min_insync_replicas(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    assert_falls_back(kernel, [_batch()], clock.now, "ISR", acks=-1)  # no roles: no ISR at all
    assert_falls_back(kernel, [_batch()], clock.now, "acks", acks=2)
    p.become_leader(1, (0, 1), (0,), 0)
    assert kernel.append([_batch()], clock.now, acks=-1) == [(0, 0, 0)]
    assert p.high_watermark == 1  # the leader alone is the ISR: committed at once
    p.become_leader(1, (0, 1), (0, 1), 1)
    assert kernel.append([_batch()], clock.now, acks=-1) == [(1, 1, 0)]
    assert kernel.append([_batch()], clock.now, acks=1) == [(2, 2, 0)]
    assert p.high_watermark == 1  # followers move it, as on the Python path (the answer waits for them)
    p2 = open_partition(p.directory.parent / "t-1", LogConfig(min_insync_replicas=2))
    p2.become_leader(0, (0, 1), (0,), 0)
    assert_falls_back(Kernel(p2), [_batch()], clock.now, "ISR", acks=-1)  # NOT_ENOUGH_REPLICAS is Python's
    assert Kernel(p2).append([_batch()], clock.now, acks=1) == [(0, 0, 0)]


def test_a_partition_that_does_not_serve_clients_falls_back(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    p.become_follower(1, 2, (0, 1), (0, 1), 0)
    assert_falls_back(kernel, [_batch()], clock.now, "not serving clients")
    p.stop_serving((0, 1))
    assert_falls_back(kernel, [_batch()], clock.now, "not serving clients")


def test_a_torn_state_falls_back_and_the_python_path_repairs_it(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    kernel.append([_batch()], clock.now)
    p.state.set_pending(1)  # a writer died mid-append
    assert_falls_back(kernel, [_batch()], clock.now, "torn state")
    assert answer(p.append_many([_batch()])[0]) == (1, 1, 0)
    assert kernel.append([_batch()], clock.now) == [(2, 2, 0)]


def test_an_open_transaction_falls_back(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    p.append(_batch(producer_id=4, producer_epoch=0, base_sequence=0, transactional=True))
    assert_falls_back(kernel, [_batch()], clock.now, "transactions")


def test_another_processs_roll_makes_the_row_stale(open_partition, clock):
    config = LogConfig(segment_bytes=1000)
    p = open_partition(cfg=config)
    kernel = Kernel(p)
    kernel.append([_batch()], clock.now)
    other = open_partition(cfg=config, recover=False)  # another process's view, as far as the files go
    for _ in range(10):
        other.append(_batch())
    row = kernel.table.row_of("t", 0)
    files = files_of(p.directory)
    status = ak.append(kernel.table.rows, row, np.frombuffer(_batch(), dtype=np.uint8).copy(),
                       np.array([[0, len(_batch())]]), 1, clock.now, 1, np.zeros((1, 3), dtype=np.int64))
    assert ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]] == "stale row"
    assert status == ak.FALLBACK and kernel.table.stale(row)
    assert files_of(p.directory) == files
    assert kernel.append([_batch()], clock.now) == [(11, 11, 0)]  # filled again


def test_a_partition_another_process_deleted_falls_back(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    kernel.append([_batch()], clock.now)
    open_partition(recover=False).delete()
    status, *_, row = kernel.try_append([_batch()], clock.now)
    assert status == ak.FALLBACK and ak.REASONS[kernel.table.rows[row, pt.FALLBACK_REASON]] == "deleted"


def test_the_index_blocks_reserved_run_out_and_a_fill_reserves_more(open_partition, clock):
    """A fill reserves a chunk of index blocks ahead; the append that would need more falls back, marks the
    row stale, and the next fill reserves the next chunk."""
    p = open_partition(cfg=LogConfig(index_interval_bytes=0, segment_index_bytes=1 << 20))
    kernel = Kernel(p)
    ts = T0
    reasons = []
    for _ in range(4200):  # the time index's first 64 KiB chunk holds 4096 entries
        ts += 1
        b = rec.build_batch([(b"k", b"v")], base_timestamp=ts)
        status, *_ = kernel.try_append([b], clock.now)
        if status == ak.FALLBACK:
            reasons.append(ak.REASONS[kernel.table.rows[kernel.table.row_of("t", 0), pt.FALLBACK_REASON]])
            p.append_many([b])
    assert reasons == ["index blocks"]
    assert p.snapshot().time_entries == 4199
    check_indexes(p)


@njit(cache=True)
def _compiled_appends(slots, rows, names, buf, name_at, name_len, spans, now, out):
    """A processor's compiled loop in miniature: find the partition by the name bytes, append each span."""
    row = pt.lookup(slots, rows, names, buf, name_at, name_len, 0)
    failed = 0
    for i in range(spans.shape[0]):
        failed += ak.append(rows, row, buf, spans[i:i + 1], 1, now, 1, out[i:i + 1])
    return failed


def test_compiled_code_finds_the_partition_and_appends_without_the_interpreter(open_partition, clock):
    p = open_partition()
    table = PartitionTable()
    table.fill("t", 0, p)
    batches = [rec.build_batch([(b"k", b"%d" % i)]) for i in range(5)]
    data = bytearray(b"..t..")
    spans = []
    for b in batches:
        spans.append((len(data), len(b)))
        data += b
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    out = np.zeros((5, 3), dtype=np.int64)
    assert _compiled_appends(*table.arrays(), buf, 2, 1, np.array(spans, dtype=np.int64), clock.now, out) == 0
    assert out[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert [r.value for b in assert_dense_and_valid(p.directory) for r in rec.decode_records(b.data)] == \
        [b"%d" % i for i in range(5)]


# ---------------------------------------------------------------- others see it


def test_another_partition_object_reads_what_the_kernel_appended(open_partition, clock):
    p = open_partition()
    kernel = Kernel(p)
    sent = [rec.build_batch([(b"k%d" % i, b"v%d" % i)]) for i in range(30)]
    for b in sent:
        kernel.append([bytearray(b)], clock.now)
    reader = open_partition(recover=False)
    data = reader.read(0, 1 << 20).slice.read()
    got = [r.value for _, h in rec.iter_batches(data) for r in rec.decode_records(data[_:_ + h.size])]
    assert got == [b"v%d" % i for i in range(30)]
    assert reader.read(12, 100).slice.read()[:8] == (12).to_bytes(8, "big")


_WRITER = textwrap.dedent("""
    import sys
    from mmlog.config.settings import LogConfig
    from mmlog.log.partition import Partition
    from mmlog.protocol import records as rec
    p = Partition(sys.argv[1], LogConfig(segment_bytes=20000, index_interval_bytes=200), recover=False)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(sys.argv[2])):
        p.append(rec.build_batch([(b"python", b"%d" % i)]))
    p.close()
""")


def test_a_python_writer_in_another_process_and_the_kernel_keep_offsets_dense(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=20000, index_interval_bytes=200))
    kernel = Kernel(p)
    n = 1500
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(p.directory), str(n)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready"
    writer.stdin.write("go\n")
    writer.stdin.close()
    for i in range(n):
        kernel.append([rec.build_batch([(b"kernel", b"%d" % i)])], int(time.time() * 1000))
    assert writer.wait(60) == 0
    batches = assert_dense_and_valid(p.directory)
    values = {}
    for b in batches:
        for r in rec.decode_records(b.data):
            values.setdefault(r.key, []).append(int(r.value))
    assert values == {b"kernel": list(range(n)), b"python": list(range(n))}
    keys = [b.data[-20:].count(b"kernel") for b in batches]
    assert sum(x != y for x, y in zip(keys, keys[1:])) > 2, "the writers never interleaved"
    assert kernel.appended > n // 2, kernel.reasons
    check_indexes(p)

"""`mmlog dump-log`: what it prints for a log written through Partition.append, and how it
reports the first corruption (one stderr line naming the file and the byte position)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from mmlog.cli.main import main
from mmlog.config.settings import LogConfig
from mmlog.log import Partition
from mmlog.protocol import records
from mmlog.cli import dump_log

# Records per batch: 8 batches with distinct counts, about 5 KiB in all.
COUNTS = [3, 1, 5, 2, 7, 1, 4, 6]
VALUE = b"v" * 150


def batch(count: int, first: int) -> bytearray:
    return records.build_batch([(b"key-%d" % (first + i), VALUE + b"%d" % (first + i)) for i in range(count)])


def write_partition(directory: Path, config: LogConfig | None = None, close: bool = True) -> tuple[Partition, list]:
    """Append the COUNTS batches; return the partition and, per batch, (base, last, count, size)."""
    part = Partition(directory, config or LogConfig())
    appended = []
    first = 0
    for count in COUNTS:
        buf = batch(count, first)
        info = part.append(buf)
        appended.append((info.base_offset, info.last_offset, count, len(buf)))
        first += count
    if close:
        part.close()
    return part, appended


def expected_lines(appended: list, bases: list[int]) -> list[dict]:
    """What each batch line must say, positions restarting at 0 in each segment."""
    out, pos, segment = [], 0, None
    for base, last, count, size in appended:
        seg = max(b for b in bases if b <= base)
        if seg != segment:
            segment, pos = seg, 0
        out.append({"baseOffset": base, "lastOffset": last, "count": count, "position": pos, "size": size})
        pos += size
    return out


def batch_lines(stdout: str) -> list[dict]:
    found = []
    for line in stdout.splitlines():
        if line.startswith("baseOffset:"):
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            found.append({k: int(fields[k]) for k in ("baseOffset", "lastOffset", "count", "position", "size")})
    return found


def dump(capsys, *argv) -> tuple[int, str, list[str]]:
    status = main(["dump-log", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


def log_file(directory: Path, base: int = 0) -> Path:
    return directory / f"{base:020d}.log"


def positions(appended: list) -> list[int]:
    return list(np.cumsum([0] + [size for *_, size in appended])[:-1])


# ---------------------------------------------------------------- valid logs


def test_a_partition_directory_prints_every_batch_of_every_segment_in_order(tmp_path, capsys):
    d = tmp_path / "t-0"
    _, appended = write_partition(d, LogConfig(segment_bytes=2000))
    bases = sorted(int(p.name[:20]) for p in d.glob("*.log"))
    assert len(bases) > 2  # the test is about several segments
    status, out, err = dump(capsys, d)
    assert status == 0 and err == []
    assert batch_lines(out) == expected_lines(appended, bases)
    assert [line.split()[1] for line in out.splitlines() if line.startswith("Dumping")] == [
        str(log_file(d, b)) for b in bases
    ]
    total_bytes = sum(size for *_, size in appended)
    assert out.splitlines()[-1] == (
        f"Summary: {len(bases)} files, {len(COUNTS)} batches, {sum(COUNTS)} records, {total_bytes} bytes"
    )


def test_a_single_log_file(tmp_path, capsys):
    _, appended = write_partition(tmp_path / "t-0")
    status, out, err = dump(capsys, log_file(tmp_path / "t-0"))
    assert status == 0 and err == []
    assert batch_lines(out) == expected_lines(appended, [0])
    line = next(line for line in out.splitlines() if line.startswith("baseOffset: 0 "))
    for field in ("baseTimestamp: ", "maxTimestamp: ", "compression: none", "producerId: -1", "producerEpoch: -1",
                  "baseSequence: -1", " ok"):
        assert field in line


def test_print_records_shows_keys_values_and_headers(tmp_path, capsys):
    part = Partition(tmp_path / "t-0")
    part.append(records.build_batch([
        records.Record(b"hello", b"k1", [("trace", b"abc"), ("bin", b"\x00\xff")], timestamp=1_700_000_000_000),
        records.Record(b"\x00\x01\x02", None, [], timestamp=1_700_000_000_005),
        records.Record(b"x" * 100, b"long", [("none", None)], timestamp=1_700_000_000_007),
        records.Record(None, b"tombstone", [], timestamp=1_700_000_000_009),
    ]))
    part.close()
    status, out, err = dump(capsys, "--print-records", "--max-width", "20", tmp_path / "t-0")
    assert status == 0 and err == []
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    assert lines == [
        '| offset: 0 timestamp: 1700000000000 keySize: 2 valueSize: 5 key: "k1" value: "hello" '
        'headers: ["trace"="abc", "bin"=0x00ff]',
        "| offset: 1 timestamp: 1700000000005 keySize: -1 valueSize: 3 key: null value: 0x000102 headers: []",
        '| offset: 2 timestamp: 1700000000007 keySize: 4 valueSize: 100 key: "long" '
        'value: "xxxxxxxxxxxxxxxxxxxx"...(+80 chars) headers: ["none"=null]',
        '| offset: 3 timestamp: 1700000000009 keySize: 9 valueSize: -1 key: "tombstone" value: null headers: []',
    ]


def test_a_compressed_batch_shows_its_codec_and_its_records(tmp_path, capsys):
    part = Partition(tmp_path / "t-0")
    part.append(records.build_batch([(b"a", b"one"), (b"b", b"two")], compression=1, base_timestamp=5))
    part.close()
    status, out, err = dump(capsys, "--deep", tmp_path / "t-0")
    assert status == 0 and err == []
    assert "compression: gzip" in out
    assert [line.split(" key: ")[1] for line in out.splitlines() if line.startswith("| ")] == [
        '"a" value: "one" headers: []', '"b" value: "two" headers: []',
    ]


def test_index_entries_are_printed_and_agree_with_the_log(tmp_path, capsys):
    d = tmp_path / "t-0"
    _, appended = write_partition(d, LogConfig(index_interval_bytes=1000))
    status, out, err = dump(capsys, "--index", d)
    assert status == 0 and err == []
    # An entry for every batch that starts >= 1000 bytes after the previous entry (none at 0).
    starts = positions(appended)
    want, since = [], 0
    for (base, *_), pos, (*_, size) in zip(appended, starts, appended):
        if since >= 1000 and pos > 0:
            want.append(f"offset: {base} position: {pos}")
            since = 0
        since += size
    assert [line for line in out.splitlines() if line.startswith("offset: ")] == want
    assert any(line.startswith("timestamp: ") for line in out.splitlines())
    assert "MISMATCH" not in out


def test_an_index_file_alone_prints_its_entries_only(tmp_path, capsys):
    d = tmp_path / "t-0"
    write_partition(d, LogConfig(index_interval_bytes=1000))
    status, out, err = dump(capsys, d / f"{0:020d}.index")
    assert status == 0 and err == []
    assert not batch_lines(out)
    assert any(line.startswith("offset: ") for line in out.splitlines())
    assert not any(line.startswith("timestamp: ") for line in out.splitlines())


def test_a_live_partition_is_dumped_read_only_up_to_its_committed_size(tmp_path, capsys):
    d = tmp_path / "t-0"
    part, appended = write_partition(d, LogConfig(index_interval_bytes=1000), close=False)
    try:
        end = sum(size for *_, size in appended)
        with open(log_file(d), "r+b") as f:  # a writer's append in progress: bytes past ACTIVE_SIZE
            f.seek(end)
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x99half a batch")
        before = {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in d.iterdir()}
        status, out, err = dump(capsys, "--index", "--print-records", d)
        after = {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in d.iterdir()}
        assert status == 0 and err == []
        assert batch_lines(out) == expected_lines(appended, [0])
        assert "Note: 00000000000000000000.log: 20 bytes past the committed size" in out
        assert after == before
        assert part.append(batch(1, sum(COUNTS))).base_offset == sum(COUNTS)  # the partition carries on
    finally:
        part.close()


def test_a_segment_newer_than_the_published_active_one_is_not_shown(tmp_path, capsys):
    d = tmp_path / "t-0"
    part, appended = write_partition(d, close=False)
    try:
        # A roll in progress: the next segment exists, with bytes, before the state names it.
        (d / f"{sum(COUNTS):020d}.log").write_bytes(bytes(batch(2, sum(COUNTS)))[:40])
        status, out, err = dump(capsys, d)
        assert status == 0 and err == []
        assert batch_lines(out) == expected_lines(appended, [0])
        assert f"Note: t-0: 1 segment(s) from offset {sum(COUNTS)} on not shown" in out
    finally:
        part.close(clean=False)


# ---------------------------------------------------------------- corrupt logs


def corrupt(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def flip(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x40]))


BAD = 3  # the batch that gets damaged


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda log, at, size: flip(log, at + 100), "bad CRC"),  # a byte of a record
        (lambda log, at, size: flip(log, at + records.CRC_OFFSET), "bad CRC"),  # the stored CRC itself
        (lambda log, at, size: flip(log, at + records.MAGIC_OFFSET), "bad magic"),
        (lambda log, at, size: corrupt(log, at + records.BATCH_LENGTH, (20).to_bytes(4, "big")), "bad length"),
        (lambda log, at, size: corrupt(log, at, (999).to_bytes(8, "big")), "bad offset"),  # outside the CRC
        (lambda log, at, size: corrupt(log, at + records.BATCH_LENGTH, (10**6).to_bytes(4, "big")), "torn batch"),
    ],
    ids=["record-byte", "crc-field", "magic", "length", "base-offset", "length-past-end"],
)
def test_the_first_corruption_is_one_line_naming_file_position_and_reason(tmp_path, capsys, damage, reason):
    d = tmp_path / "t-0"
    _, appended = write_partition(d)
    at = positions(appended)[BAD]
    damage(log_file(d), at, appended[BAD][3])
    status, out, err = dump(capsys, d)
    assert status == 1
    assert len(err) == 1
    assert err[0].startswith(f"mmlog: error: {log_file(d)}: {reason} at position {at}")
    # Everything before the bad batch printed; nothing after it.
    assert batch_lines(out)[:BAD] == expected_lines(appended, [0])[:BAD]
    assert all(line["position"] <= at for line in batch_lines(out))
    assert out.splitlines()[-1].startswith(f"Summary: 1 file, {BAD} batches, {sum(COUNTS[:BAD])} records")


def test_a_flipped_record_byte_shows_the_bad_batch_and_both_crcs(tmp_path, capsys):
    d = tmp_path / "t-0"
    _, appended = write_partition(d)
    at = positions(appended)[BAD]
    flip(log_file(d), at + 100)
    status, out, err = dump(capsys, log_file(d))
    assert status == 1
    assert re.fullmatch(
        rf"mmlog: error: {re.escape(str(log_file(d)))}: bad CRC at position {at}: batch of offsets "
        rf"{appended[BAD][0]}..{appended[BAD][1]}: stored CRC-32C 0x[0-9a-f]{{8}}, computed 0x[0-9a-f]{{8}}",
        err[0],
    )
    assert [line for line in out.splitlines() if line.endswith("<- INVALID")][0].startswith(
        f"baseOffset: {appended[BAD][0]} "
    )


def test_a_torn_tail(tmp_path, capsys):
    d = tmp_path / "t-0"
    _, appended = write_partition(d)
    last = positions(appended)[-1]
    os.truncate(log_file(d), last + 30)
    status, out, err = dump(capsys, d)
    assert status == 1
    assert err == [f"mmlog: error: {log_file(d)}: torn batch at position {last}: "
                   f"a batch of {appended[-1][3]} bytes, but the file ends 30 bytes into it"]
    assert len(batch_lines(out)) == len(COUNTS) - 1


def test_a_tail_shorter_than_a_batch_header(tmp_path, capsys):
    d = tmp_path / "t-0"
    _, appended = write_partition(d)
    end = sum(size for *_, size in appended)
    with open(log_file(d), "ab") as f:
        f.write(b"\x00" * 5)
    # The state says the log ends where the batches end: a closed partition's file
    # is cut there, so the extra bytes are not committed, and count as corruption
    # only when the file is dumped on its own, without the state's word.
    status, out, err = dump(capsys, d)
    assert status == 0 and err == []
    assert "Note: 00000000000000000000.log: 5 bytes past the committed size" in out
    single = tmp_path / "copy.log"
    single.write_bytes(log_file(d).read_bytes())
    status, _, err = dump(capsys, single)
    assert status == 1
    assert err == [f"mmlog: error: {single}: torn batch at position {end}: the file ends 5 bytes into a batch header"]


def test_segments_of_a_directory_must_follow_each_other(tmp_path, capsys):
    d = tmp_path / "t-0"
    write_partition(d, LogConfig(segment_bytes=2000))
    bases = sorted(int(p.name[:20]) for p in d.glob("*.log"))
    for suffix in (".log", ".index", ".timeindex"):
        (d / f"{bases[1]:020d}{suffix}").unlink()
    status, _, err = dump(capsys, d)
    assert status == 1
    assert len(err) == 1
    assert err[0].startswith(f"mmlog: error: {log_file(d, bases[2])}: bad offset at position 0: ")


def test_an_index_entry_that_misses_its_batch(tmp_path, capsys):
    d = tmp_path / "t-0"
    _, appended = write_partition(d, LogConfig(index_interval_bytes=1000))
    index = d / f"{0:020d}.index"
    entries = np.fromfile(index, dtype=np.int32).reshape(-1, 2)
    assert len(entries) >= 2
    entries[1, 1] += 1  # the second entry points one byte into its batch
    entries.tofile(index)
    status, out, err = dump(capsys, "--index", d)
    assert status == 1
    assert err == [f"mmlog: error: {index}: bad index entry at position 8: entry 1 (offset {entries[1, 0]}, "
                   f"position {entries[1, 1]}): position {entries[1, 1]} is not the start of a batch"]
    assert "MISMATCH" in out


# ---------------------------------------------------------------- the walk itself


@pytest.mark.parametrize("chunk", [61, 100, 700, 4096, 1 << 20])
def test_the_walk_gives_the_same_batches_whatever_the_chunk_size(tmp_path, chunk):
    d = tmp_path / "t-0"
    _, appended = write_partition(d)
    fd = os.open(log_file(d), os.O_RDONLY)
    try:
        walk = dump_log.Walk(next_offset=0)
        size = os.fstat(fd).st_size
        got = [(b.position, b.header.base_offset, b.header.size) for b in dump_log.walk_log(fd, 0, size, walk, chunk)]
    finally:
        os.close(fd)
    assert got == [(pos, base, size) for pos, (base, _, _, size) in zip(positions(appended), appended)]
    assert (walk.end, walk.next_offset) == (size, sum(COUNTS))


def test_paths_that_are_not_segments(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "empty").mkdir()
    for path, message in [
        (tmp_path / "notes.txt", "not a .log, .index or .timeindex file, nor a partition directory"),
        (tmp_path / "empty", "no segment (.log) files in this directory"),
        (tmp_path / "missing.log", "no such file or directory"),
    ]:
        status, out, err = dump(capsys, path)
        assert status == 1
        assert err == [f"mmlog: error: {path}: {message}"]
        assert out == ""


def test_transaction_markers_and_flags_are_shown(tmp_path, capsys):
    from mmlog.log.partition import Partition
    from mmlog.protocol import records as rec

    directory = tmp_path / "t-0"
    with Partition(directory) as p:
        p.append(rec.build_batch([(None, b"x")], producer_id=9, producer_epoch=0, base_sequence=0,
                                 transactional=True))
        p.append_marker(9, 0, commit=False, coordinator_epoch=4)
        p.append_marker(9, 0, commit=True, coordinator_epoch=4)
    status, out, _ = dump(capsys, directory, "--print-records")
    assert status == 0
    lines = [line for line in out.splitlines() if line.startswith("baseOffset")]
    assert lines[0].endswith("flags: transactional")
    assert lines[1].endswith("flags: transactional,control endTxnMarker: ABORT coordinatorEpoch: 4")
    assert lines[2].endswith("endTxnMarker: COMMIT coordinatorEpoch: 4")

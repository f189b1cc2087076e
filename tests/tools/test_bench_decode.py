"""tools/bench_decode.py at a tiny size: every row is timed on the same bytes, and its floor walks what the
decoders read."""

from __future__ import annotations

import numpy as np

from tools import bench_decode


def test_the_floor_walks_every_record_and_stops_at_one_that_does_not_parse():
    data = bytearray(bench_decode.chunk(1000, 50, 100))
    buf = np.frombuffer(bytes(data), np.uint8)
    assert bench_decode.floor_kernel(buf, len(buf)) > 0
    data[61] = 0xFF  # the first record's length: a varint that runs on
    bad = np.frombuffer(bytes(data), np.uint8)
    assert bench_decode._walk(bad, len(bad)) == -1


def test_the_table_has_every_row_once_in_fetch_sized_chunks(capsys):
    assert bench_decode.main(["--records", "3000", "--size", "50", "--batch-records", "100", "--rounds", "1",
                              "--chunk-bytes", "20000"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == ["floor: every record's fields walked twice", "decode kernel (`bulk._decode`, its columns made)",
                        "decode_chunk (scan, kernel, RecordArrays)", "decode_chunk with CRCs",
                        "Spark's one pass (`direct.decode_columns`, values copied)"]
    assert "in 10 chunk(s)" in out  # 30 batches of about 6 KB, three to a chunk

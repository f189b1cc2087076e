"""tools/bench_compaction.py's cleaning at a tiny size: timed, and traced for its peak heap."""

from __future__ import annotations

from mmlog.protocol import compression
from tools.bench_compaction import bench_cleaning


def test_a_traced_cleaning_reports_its_peak_heap_and_keeps_the_last_record_of_every_key():
    result = bench_cleaning(1, 100, 50, compression.LZ4, segment_mb=1, trace=True)
    assert result["kept"] == 100 and result["records"] > 100
    assert 0 < result["peak_mb"] < 100  # a window's arrays, not the 128 MiB offset map allocated before

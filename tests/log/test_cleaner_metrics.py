"""The cleaner's figures file: what a metrics endpoint reads, whole or not at all."""

from __future__ import annotations

from mmlog.log import cleaner_metrics
from mmlog.log.cleaner import CleanStats


def test_a_log_dir_without_a_cleaner_reads_as_zeros(tmp_path):
    assert cleaner_metrics.read(tmp_path) == cleaner_metrics.CleanerMetrics()


def test_passes_add_up_and_read_back_as_written(tmp_path):
    m = cleaner_metrics.CleanerMetrics()
    m.add_pass(CleanStats(bytes_read=100, bytes_written=40, records_read=10, records_kept=3, elapsed_s=0.5), 1_000)
    m.add_pass(CleanStats(bytes_read=50, bytes_written=10, records_read=5, records_kept=1, elapsed_s=0.25), 2_000)
    m.max_dirty_ratio = 0.5
    cleaner_metrics.write(tmp_path, m)
    got = cleaner_metrics.read(tmp_path)
    assert got == m
    assert (got.passes, got.bytes_read, got.bytes_written, got.last_pass_ms, got.last_pass_seconds) == \
        (2, 150, 50, 2_000, 0.25)


def test_a_damaged_file_reads_as_zeros_not_as_an_error(tmp_path):
    for junk in (b"{not json", b"[1, 2]", b'{"passes": "many"}'):
        (tmp_path / cleaner_metrics.METRICS_FILE).write_bytes(junk)
        assert cleaner_metrics.read(tmp_path) == cleaner_metrics.CleanerMetrics()

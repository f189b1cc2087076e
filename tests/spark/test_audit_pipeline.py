"""The paper's audit pipeline (tools/audit_pipeline.py) on the shared session and broker: it reports an
injected loss, reports none without one, resumes without duplicates, and recovers from its crash points."""

from __future__ import annotations

from tools import audit_pipeline as pipeline


def loaded_offsets(spark, out) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in spark.read.parquet(str(out / "data")).select("partition", "offset")
            .collect()]


def test_no_loss_is_reported_when_there_is_none(spark, broker, tmp_path, capsys):
    out = tmp_path / "audit"
    report = pipeline.demo(spark, broker.bootstrap, out, windows=8, per_window=40, events="ok-events",
                           audit="ok-audit")
    assert (report.windows, report.published, report.loaded, report.losses) == (24, 960, 960, [])
    assert "result: no loss" in capsys.readouterr().out
    offsets = loaded_offsets(spark, out)
    assert len(offsets) == len(set(offsets)) == 960
    assert len(list((out / "data").glob("hour=*"))) == 2  # 8 windows of 15 minutes: two hours
    assert [entry["rows"] for entry in pipeline.Ledger.read(out).loads] == [480, 480]


def test_an_injected_loss_is_reported(spark, broker, tmp_path, capsys):
    out = tmp_path / "audit"
    report = pipeline.demo(spark, broker.bootstrap, out, lose=7, windows=4, per_window=30, events="lossy-events",
                           audit="lossy-audit")
    assert report.lost == 7 and report.published - report.loaded == 7
    [(producer, window, published, loaded)] = report.losses
    assert (producer, published, loaded) == ("producer-0", 30, 23)
    printed = capsys.readouterr().out
    assert "LOSS producer-0 window" in printed and "result: 7 events lost" in printed


def test_a_load_resumes_after_its_crash_points(spark, broker, tmp_path):
    out, topics = tmp_path / "audit", {"events": "crash-events", "audit": "crash-audit"}
    pipeline.demo(spark, broker.bootstrap, out, windows=2, per_window=10, **topics)
    # a: a load's Spark job ran (or half ran) but the ledger never heard of it: its output is dropped
    debris = out / "staging" / "load-3" / "hour=x"
    debris.mkdir(parents=True)
    (debris / "part-0.parquet").write_bytes(b"half written")
    pipeline.produce(broker.bootstrap, windows=range(2, 3), per_window=10, epoch_ms=pipeline._epoch(), **topics)
    assert pipeline.load(spark, broker.bootstrap, out, **topics) == 30
    assert not (out / "staging").exists()
    # b: the ledger took a load whose files had not all moved: the next load moves them
    moved = next((out / "data").glob("hour=*/load-3-*.parquet"))
    stranded = out / "staging" / "load-3" / moved.parent.name / moved.name.removeprefix("load-3-")
    stranded.parent.mkdir(parents=True)
    moved.rename(stranded)
    assert pipeline.load(spark, broker.bootstrap, out, **topics) == 0
    assert moved.exists() and not stranded.exists()
    offsets = loaded_offsets(spark, out)
    assert len(offsets) == len(set(offsets)) == 90


def test_avro_events_are_counted_per_schema_id_through_an_evolution(spark, broker, tmp_path, capsys):
    out = tmp_path / "audit"
    report = pipeline.demo(spark, broker.bootstrap, out, lose=3, windows=4, per_window=20, events="typed-events",
                           audit="typed-audit", registry=broker.registry_urls[0])
    assert report.lost == 3
    (v1, (pub1, got1)), (v2, (pub2, got2)) = sorted(report.by_schema.items())
    assert v1 < v2 and (pub1, got1, pub2, got2) == (120, 120, 120, 117)  # the loss: in the later windows, v2
    rows = spark.read.parquet(str(out / "data")).select("schema_id", "seq").collect()
    assert {r.schema_id for r in rows} == {v1, v2} and max(r.seq for r in rows) == 19
    assert f"schema {v2}: 120 events published, 117 loaded" in capsys.readouterr().out

"""The README's Spark example runs, on the shared session and broker (tests/test_readme.py runs the others)."""

from __future__ import annotations

from tests.test_readme import README, python_blocks


def test_the_readme_spark_example_runs(spark, broker, tmp_path, capsys):
    [block] = [b for b in python_blocks(README.read_text()) if "mmlog.spark" in b]
    code = block.replace("127.0.0.1:9092", broker.bootstrap).replace("/tmp/", f"{tmp_path}/")
    namespace: dict = {}
    exec(compile(code, "README.md Spark block", "exec"), namespace)
    assert namespace["spark"] is spark
    assert namespace["pages"].count() == 100
    assert "|partition|count|" in capsys.readouterr().out
    streamed = spark.read.parquet(str(tmp_path / "page-views"))
    assert streamed.count() == 100 and streamed.columns == ["user", "value", "partition", "offset"]

"""Spark reads through the mmlog source beside a synthetic in-memory Arrow source and Parquet, in one session.

    python tools/bench_spark.py [--records 2000000] [--size 200] [--partitions 2] [--runs 5]
    python tools/bench_spark.py --records 10000000 --partitions 12 --markdown docs/benchmarks.md 

Starts a broker (EmbeddedBroker, loopback, temp dir) and a local[2] session,
fills a topic of `--partitions` partitions with `--records` values of `--size`
random bytes (send_many), then times a Spark job that consumes every column of
every row (`write.format("noop")`) reading:
  * mmlog: the topic, through the mmlog source (one task per partition range);
  * synthetic: a Python data source with the same schema and as many tasks, whose
    read() yields Arrow batches of 20,000 rows built once in memory: what any
    Python source costs Spark, with no fetching and no decoding;
  * segment files: the topic's segment files mapped by the tasks themselves, with no broker
    and no fetch, CRCs checked and decoded as the mmlog source does (tools/bench/segment_files.py):
    the ceiling of any way of getting the bytes to the executor;
  * parquet: the same rows (the mmlog source's columns and values), written once
    by Spark to Parquet files on local disk (its defaults: snappy), read with
    `spark.read.parquet` (the JVM's vectorised reader, no Python at all).
Each is counted once to warm up, then the four are run `--runs` times, in turn,
so that a busy moment on the shared machine does not favour one. Prints the best
and the median rows/s of each, the ratio of mmlog to each baseline and of each to
the synthetic source, and the CPU
seconds per million rows of Spark (its JVM and Python workers) and of the broker,
read from /proc: steadier than wall time on a shared machine.

`--profile PATH` records the Python workers Spark starts (py-spy, --subprocesses)
during one more mmlog read and writes a summary of their top frames to PATH.
`--markdown PATH` rewrites this benchmark's section of that page (docs/benchmarks.md).

`--stages` reads the topic in this process instead, with no Spark, one stage added at a time
(the fetch alone; then the CRCs and the one-pass decode into Arrow batches; then the Arrow
IPC write to a pipe, as a Python worker writes to the JVM), the three together reading the
mapped segment files instead of fetching, beside the synthetic source's
own part (the IPC write of its batches), `--runs` times in turn: the reader's CPU and the
broker's per million rows, which says where the mmlog source's cost beyond the synthetic
one goes. With `--markdown` it writes its own section.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_spark.py`: make `tools.bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

from mmlog.client import Admin, Producer  # noqa: E402
from mmlog.spark.schema import arrow_record_schema, record_schema  # noqa: E402
from mmlog.spark.session import local_session, stop_session  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402
from tools.bench import segment_files  # noqa: E402
from tools.bench.page import write_section  # noqa: E402
from tools.bench.profile import summarize  # noqa: E402
from tools.bench.servers import cpu_seconds, tree_cpu_seconds  # noqa: E402

BATCH = 20_000  # rows per synthetic Arrow batch: about what one 4 MiB fetch holds
SECTION = "bench_spark"  # its markers in docs/benchmarks.md


class SyntheticReader(DataSourceReader):
    """`rows` rows in `tasks` partitions, as the same Arrow batch yielded again and again."""

    def __init__(self, rows: int, tasks: int, size: int) -> None:
        self.rows, self.tasks, self.size = rows, tasks, size

    def partitions(self) -> list[InputPartition]:
        bounds = np.linspace(0, self.rows, self.tasks + 1).astype(int).tolist()
        return [InputPartition(b - a) for a, b in zip(bounds, bounds[1:])]

    def read(self, partition: InputPartition):
        schema = arrow_record_schema(False)
        batch = _batch(schema, BATCH, self.size)
        left = partition.value
        while left > 0:
            yield batch if left >= BATCH else batch.slice(0, left)
            left -= BATCH


def _batch(schema: pa.Schema, n: int, size: int) -> pa.RecordBatch:
    values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * size),
                                                    pa.py_buffer(np.zeros(n * size, np.uint8))])
    columns = [pa.nulls(n, pa.binary()), values, pa.repeat(pa.scalar("synthetic"), n),
               pa.array(np.zeros(n, np.int32)), pa.array(np.arange(n, dtype=np.int64)),
               pa.array(np.full(n, 1_700_000_000_000_000, np.int64), pa.timestamp("us", "UTC")),
               pa.array(np.zeros(n, np.int32))]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class SyntheticSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "synthetic"

    def schema(self):
        return record_schema(False)

    def reader(self, schema) -> SyntheticReader:
        return SyntheticReader(int(self.options["rows"]), int(self.options["tasks"]), int(self.options["size"]))


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    """`records` values of `size` random bytes, round-robin over the partitions. Random so that Parquet's
    encodings and snappy cannot shrink them (the broker stores them as they are either way); the block of
    200,000 values repeats, far beyond what a dictionary page or snappy's window spans."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions)
    values = np.random.default_rng(20).integers(0, 256, (200_000, size), np.uint8)
    with Producer(bootstrap, acks=1, batch_size=256 * 1024, buffer_memory=256 << 20) as producer:
        for start in range(0, records, len(values)):
            n = min(len(values), records - start)
            producer.send_many(topic, values[:n], partition=np.arange(start, start + n) % partitions)
        producer.flush()


@dataclass
class Case:
    """One way of reading the rows: its DataFrame, and per run the wall seconds and CPU seconds spent."""

    name: str
    df: object
    seconds: list[float] = field(default_factory=list)
    spark_cpu: list[float] = field(default_factory=list)
    broker_cpu: list[float] = field(default_factory=list)

    def rate(self, rows: int, how) -> float:
        return rows / how(self.seconds)

    def per_million(self, cpu: list[float], rows: int) -> float:
        return statistics.median(cpu) * 1e6 / rows


def spark_pids() -> list[int]:
    """The Spark JVM this process started (PySpark's gateway), whose descendants are the Python workers."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    return [proc.pid] if proc is not None else []


def timed(cases: list[Case], runs: int, expected: int, broker: EmbeddedBroker) -> None:
    """`runs` full reads of each case, in turn, after one count each to warm up (Python workers started,
    numba kernels loaded, files in the page cache)."""
    for case in cases:
        assert case.df.count() == expected, case.name
    [jvm] = spark_pids()
    for run in range(runs):
        for case in cases:
            spark0, broker0 = tree_cpu_seconds(jvm), cpu_seconds([broker.pid, *broker.processor_pids()])
            t = time.perf_counter()
            case.df.write.format("noop").mode("overwrite").save()
            case.seconds.append(time.perf_counter() - t)
            case.spark_cpu.append(tree_cpu_seconds(jvm) - spark0)
            case.broker_cpu.append(cpu_seconds([broker.pid, *broker.processor_pids()]) - broker0)
            print(f"run {run + 1}: {case.name} {expected / case.seconds[-1]:,.0f} rows/s", flush=True)


def profile(df, out: Path, workdir: Path) -> str:
    """One more read of `df` with py-spy recording every Python worker of Spark; the summary of top frames."""
    spy_bin = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if spy_bin is None:
        return "py-spy is not installed: no profile"
    [jvm] = spark_pids()
    # one daemon per worker module (data source lookup, planning, ...): the tasks' workers fork from pyspark.worker's
    daemons = [p for p in _children(jvm) if _argv(p)[-1:] == [b"pyspark.worker"]]
    if not daemons:
        return "no pyspark.daemon of pyspark.worker under the Spark JVM: no profile"
    raw = workdir / "py-spy.txt"  # py-spy's collapsed stacks, summarised into `out`
    spy = subprocess.Popen([spy_bin, "record", "--pid", str(daemons[0]), "--subprocesses", "--format", "raw",
                            "--nonblocking", "--nolineno", "--rate", "200", "--output", str(raw)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the read starts
    try:
        df.write.format("noop").mode("overwrite").save()
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on ^C
        spy.wait(60)
    summary = summarize(raw, top=20)
    out.write_text(summary)
    return summary


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # the thread ended
            continue
    return children


def report(cases: dict[str, Case], args, tasks: int, parquet_files: int, parquet_bytes: int) -> tuple[str, str]:
    """(the table as text, the section of docs/benchmarks.md)."""
    rows = args.records
    mmlog = cases["mmlog"]
    header = ["source", "best rows/s", "median rows/s", "mmlog / it (median)", "it / synthetic (median)",
              "Spark CPU s / M rows", "broker CPU s / M rows"]
    body = []
    median = lambda case: case.rate(rows, statistics.median)  # noqa: E731
    synthetic = cases["synthetic"]
    for case in cases.values():
        ratio = "-" if case is mmlog else f"{median(mmlog) / median(case):.0%}"
        of_synthetic = "-" if case is synthetic else f"{median(case) / median(synthetic):.0%}"
        body.append([case.name, f"{case.rate(rows, min):,.0f}", f"{median(case):,.0f}", ratio, of_synthetic,
                     f"{case.per_million(case.spark_cpu, rows):.2f}",
                     f"{case.per_million(case.broker_cpu, rows):.2f}" if case is mmlog else "-"])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    text = "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [header, *body])
    command = "python tools/bench_spark.py " + shlex.join(sys.argv[1:])
    md = "\n".join("| " + " | ".join(r) + " |" for r in [header, ["---"] + ["---:"] * (len(header) - 1), *body])
    section = "\n".join([
        "## Spark: the mmlog source against Parquet on local disk", "",
        f"Run of {time.strftime('%Y-%m-%d %H:%M %Z')}: `{command}`. {rows:,} records of {args.size} random bytes",
        f"in a topic of {args.partitions} partitions, read by a `local[2]` session in {tasks} tasks; every column of",
        "every row consumed (`write.format(\"noop\")`). The same rows (the source's columns, its values), written",
        f"once by Spark to Parquet ({parquet_files} files, {parquet_bytes / 1e6:,.0f} MB, snappy) and read with",
        "`spark.read.parquet`; the synthetic source yields the same columns from one in-memory Arrow batch (what",
        "any Python data source costs Spark); \"segment files\" maps the broker's segment files in the tasks and",
        "decodes them as the mmlog source decodes its fetches (`tools/bench/segment_files.py`: the ceiling of any",
        f"fetch path). {args.runs} runs of each, in turn, after a warm-up count. CPU:",
        "utime+stime from /proc of the Spark JVM and its Python workers, and of the broker's processes, per",
        "million rows (median run). Load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ".",
        "", md, ""])
    return text, section


STAGES = ("fetch (sendfile over loopback, batch headers scanned)", "+ CRCs and the one-pass decode into Arrow",
          "+ the Arrow IPC write to a pipe", "segment files mapped, no fetch: CRCs, decode and IPC write",
          "synthetic: the Arrow IPC write of its batches to a pipe")


def staged(broker: EmbeddedBroker, topic: str, records: int, size: int, runs: int) -> dict[str, list]:
    """--stages: {stage: [(reader CPU s, broker CPU s) per run]} for reading every record of `topic` here."""
    from mmlog.spark import direct
    from mmlog.spark.fetch import RangeFetcher

    schema = arrow_record_schema(False)
    with Admin(broker.bootstrap) as admin:
        ends = admin.latest_offsets(topic)
    pids = [broker.pid, *broker.processor_pids()]

    def chunks(p: int):
        return RangeFetcher(topic, p, broker.bootstrap, broker.bootstrap, max_bytes=4 << 20).scanned(0, ends[p])

    def decoded(chunks=chunks):
        for p, end in sorted(ends.items()):
            yield from direct.batches(chunks(p), end, topic, p, schema, None)

    files = segment_files.segment_files(broker.data_dir, topic, sorted(ends))

    def mapped(p: int):
        return segment_files.mapped_chunks(files[p], ends[p])

    def synthetic():
        batch = _batch(schema, BATCH, size)
        for start in range(0, records, BATCH):
            yield batch if records - start >= BATCH else batch.slice(0, records - start)

    def counted(batches):
        n = 0
        for batch in batches:
            n += batch.num_rows
            yield batch
        if n != records:
            raise RuntimeError(f"read {n:,} rows, not {records:,}")

    def written(batches) -> None:
        drain = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        with pa.ipc.new_stream(drain.stdin, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        drain.stdin.close()
        drain.wait()

    work = [lambda: [None for p in ends for _ in chunks(p)], lambda: [None for _ in counted(decoded())],
            lambda: written(counted(decoded())), lambda: written(counted(decoded(mapped))),
            lambda: written(counted(synthetic()))]
    out: dict[str, list] = {name: [] for name in STAGES}
    for run in range(runs + 1):  # the first run warms up (kernels loaded, pages cached)
        for name, fn in zip(STAGES, work):
            reader0, broker0 = time.process_time(), cpu_seconds(pids)
            fn()
            if run:
                out[name].append((time.process_time() - reader0, cpu_seconds(pids) - broker0))
    return out


def stages_report(out: dict[str, list], args) -> str:
    """The --stages table (markdown), medians over the runs, CPU seconds per million rows."""
    per_m = lambda xs: statistics.median(xs) * 1e6 / args.records  # noqa: E731
    lines = ["### Where the source's CPU goes, standing alone", "",
             f"Run of {time.strftime('%Y-%m-%d %H:%M %Z')}: `python tools/bench_spark.py {shlex.join(sys.argv[1:])}`. "
             f"{args.records:,} records of {args.size} bytes in {args.partitions} partition(s), read in one process "
             f"with no Spark, stage upon stage, {args.runs} runs in turn; medians, CPU seconds per million rows.", "",
             "| stage | reader | broker | together |", "|---|---:|---:|---:|"]
    for name, runs in out.items():
        reader, broker = per_m([r for r, _ in runs]), per_m([b for _, b in runs])
        lines.append(f"| {name} | {reader:.3f} | {broker:.3f} | {reader + broker:.3f} |")
    return "\n".join(lines + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fetch-bytes", type=int, default=None, help="the source's fetchMaxBytes option")
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy the Python workers during one more mmlog read; their top frames to this file")
    parser.add_argument("--markdown", type=Path, default=None,
                        help="rewrite this benchmark's section of the page (docs/benchmarks.md)")
    parser.add_argument("--stages", action="store_true", help="no Spark: the source's read stage by stage, "
                        "standing alone, beside the synthetic source's IPC write")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    try:
        with EmbeddedBroker(workdir / "broker", processors=2, ready_timeout=600) as broker:  # numba may compile
            t = time.perf_counter()
            fill(broker.bootstrap, "bench", args.records, args.size, args.partitions)
            print(f"filled: {args.records:,} records of {args.size} bytes in {time.perf_counter() - t:.1f} s",
                  flush=True)
            if args.stages:
                section = stages_report(staged(broker, "bench", args.records, args.size, args.runs), args)
                print(section)
                if args.markdown:
                    write_section(args.markdown, SECTION + " stages", section)
                return
            spark = local_session("mmlog-bench")
            try:
                spark.dataSource.register(SyntheticSource)
                spark.dataSource.register(segment_files.SegmentFilesSource)
                reader = spark.read.format("mmlog").option("bootstrap", broker.bootstrap).option("subscribe", "bench")
                if args.fetch_bytes:
                    reader = reader.option("fetchMaxBytes", str(args.fetch_bytes))
                mmlog_df = reader.load()
                with Admin(broker.bootstrap) as admin:
                    ends = admin.latest_offsets("bench")
                tasks = mmlog_df.rdd.getNumPartitions()
                t = time.perf_counter()
                parquet_dir = workdir / "parquet"
                mmlog_df.write.parquet(str(parquet_dir))
                files = list(parquet_dir.glob("*.parquet"))
                parquet_bytes = sum(f.stat().st_size for f in files)
                print(f"parquet: {len(files)} files, {parquet_bytes / 1e6:,.0f} MB in {time.perf_counter() - t:.1f} s",
                      flush=True)
                cases = {
                    "mmlog": Case("mmlog", mmlog_df),
                    "parquet": Case("parquet", spark.read.parquet(str(parquet_dir))),
                    "segment files": Case("segment files", spark.read.format("mmlog-segment-files")
                                          .options(**segment_files.options(broker.data_dir, "bench", ends)).load()),
                    "synthetic": Case("synthetic", spark.read.format("synthetic").option("rows", args.records)
                                      .option("tasks", tasks).option("size", args.size).load()),
                }
                timed(list(cases.values()), args.runs, args.records, broker)
                summary = profile(mmlog_df, args.profile, workdir) if args.profile else None
            finally:
                stop_session(spark)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text, section = report(cases, args, tasks, len(files), parquet_bytes)
    print(f"tasks: {tasks}  ({args.runs} runs each)")
    print(text)
    if summary:
        print(f"profile of the Python workers during one mmlog read ({args.profile}):\n{summary}")
    if args.markdown:
        write_section(args.markdown, SECTION, section)
        print(f"wrote its section of {args.markdown}")


if __name__ == "__main__":
    main()

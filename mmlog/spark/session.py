"""A local SparkSession with the mmlog source registered, for tools and tests."""

from __future__ import annotations

import os
import sys


def local_session(app_name: str, cores: int = 2, **conf: str):
    """getOrCreate a `local[cores]` session on 127.0.0.1: executors run this Python, no UI or progress bars,
    UTC session time, few shuffle partitions; `conf` adds settings (dots spelled as in Spark)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from mmlog.spark import register

    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def stop_session(session) -> None:
    """Stop the session and end its JVM: PySpark leaves the JVM running until this Python exits, but it
    quits when its stdin pipe closes, which this does (then waits), so a later session starts a new one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.stdin.close()
        proc.wait(60)
    SparkContext._gateway = SparkContext._jvm = None

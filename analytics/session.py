"""A SparkSession set up for Strata: the loopback address, this interpreter for the Python
workers, filter pushdown on, UTC, and the `strata` data source registered.

    spark = strata_session("local[2]")                 # or a cluster's master URL
    spark.read.format("strata").option("topic", "t").load()

What must hold: the Python workers run this very interpreter (PYSPARK_PYTHON), or they would
import another Python's packages (no pyarrow, no strata); `spark.sql.python.filterPushdown.enabled`
is true, since the source implements pushFilters and Spark refuses such a source otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_CONF = {
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "2g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def prepare_environment() -> None:
    """What the JVM and its Python workers need before the first session starts."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def strata_session(master: str = "local[*]", app_name: str = "strata", conf: dict[str, str] | None = None) -> Any:
    prepare_environment()
    from pyspark.sql import SparkSession

    from analytics.source import register

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark

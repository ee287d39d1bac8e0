"""The `strata` PySpark data source: a topic as a Spark table (batch and streaming), and the sink.

    register(spark)     # or analytics.session.strata_session(master)
    spark.read.format("strata").option("topic", "persistent://t/ns/x").load()
    spark.readStream.format("strata").option("topics", "a,b").load()
    df.write.format("strata").option("topic", "t").option("service.url", url).save()

Built on PySpark's Python Data Source API (4.1+ for filter pushdown, 4.2+ for admission control):
- batch: `StrataReader` plans at planning time (`analytics.plan`), a snapshot of every topic
  partition's ledgers and last confirmed entry, and returns one InputPartition per ledger slice
  (a row-group range of an offloaded object, or an entry range on the bookies). Executors read
  Arrow record batches (`analytics.read`). pushFilters prunes ledgers and row groups and hands
  every filter back to Spark, which re-applies them row by row.
- stream: `StrataStreamReader`, offsets = {topic partition: "L:E"} (the next position to read).
  No subscription is created, so nothing on the cluster pins storage for the query.
- sink: `analytics.sink` (exactly-once through the broker's deduplication).

What must hold: everything shipped to executors (partitions, the reader) is picklable plain
data; `read` keeps no state between calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

SOURCE_NAME = "strata"


def register(spark: Any) -> None:
    """Make `format("strata")` known to this session (and turn on filter pushdown, which Spark
    requires for a source that implements pushFilters)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(StrataDataSource)


def message_schema() -> StructType:
    """The Spark schema of a message row: offload.message_table.MESSAGE_ONLY_SCHEMA."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from offload.message_table import MESSAGE_ONLY_SCHEMA

    return from_arrow_schema(MESSAGE_ONLY_SCHEMA)


class StrataDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return message_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return StrataReader(dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StrataStreamReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from analytics.sink import SinkWriter

        return SinkWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from analytics.sink import SinkStreamWriter

        return SinkStreamWriter(dict(self.options), schema)


class SlicePartition(InputPartition):
    """One InputPartition: a list of `analytics.plan.Slice` (picklable dataclasses)."""

    def __init__(self, slices: Sequence[Any]) -> None:
        super().__init__(list(slices))


class StrataReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        raise NotImplementedError  # filled in by analytics.plan (lead)

    def partitions(self) -> Sequence[InputPartition]:
        raise NotImplementedError

    def read(self, partition: InputPartition) -> Iterator[Any]:
        raise NotImplementedError


class StrataStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        raise NotImplementedError

"""analytics: topics as Spark tables, and offloaded ledgers as Iceberg tables.

    from analytics.source import register
    register(spark)                                   # spark.read.format("strata") from now on
    df = spark.read.format("strata").option("topic", "persistent://public/default/t").load()

- `access`: how the source and sink reach the cluster (metadata store, admin, S3), picklable.
- `options`, `snapshot`, `plan`, `read`: the source, from options to Arrow record batches.
- `source`: the PySpark Python Data Sources (batch, stream) over them; `sink`: the exactly-once sink.

Nothing here imports `broker`: the source reads ledger lists from the metadata store, offloaded
ledgers straight from S3 and hot ledgers straight from the bookies (docs/architecture.md). pyspark is
imported only by `source`, `sink` and the pipelines, so `access`, `plan` and `read` load without it.
"""

"""Analytics pipelines over a topic's message rows (the `strata` source's schema,
`offload.message_table.MESSAGE_ONLY_SCHEMA`), behind `strata analytics` (cli/analytics_cmd.py).

    messages = spark.read.format("strata").option("topic", t).options(**access).load()
    report = summary.summarize(messages, top_keys=10)       # pyarrow Tables, small
    states = consumer_lag.fetch_ack_states(admin_url, t, "sub")
    lag = consumer_lag.backlog_report(messages, states)

- `summary`: messages and payload bytes per hour, top keys, producers, publish→event time lag.
- `consumer_lag`: a subscription's ack state from the admin REST API (no broker import), the
  messages it has not acked, and their count and age per publish-time bucket, per partition.
- `chart`: the PNG charts of both (matplotlib's Agg canvas, no pyplot state, no display).

What must hold: the functions take and return Spark DataFrames (aggregates are computed by
Spark, wherever it runs); only the small aggregated results come back to the driver, as Arrow.
"""

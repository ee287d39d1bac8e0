"""Benchmark tools behind `strata perf`, the native Pulsar-protocol load generator, and the process
launchers (bookie, standalone, PostgreSQL) that the perf tools and the tests start servers with.
Not part of the serving path: nothing in the product packages imports `perf`."""

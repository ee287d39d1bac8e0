"""Launching Strata's processes: every process Strata starts for a user, a perf tool or a test.

One class per process kind, each a real subprocess on real ports:

    bookie.BookieProcess          `strata bookie`
    broker.BrokerProcess          `strata broker`
    standalone.StandaloneProcess  `strata standalone` (a broker and its bookies in one session)
    standalone_children           the bookies and embedded S3 one `strata standalone` runs beside its broker
    cluster.LocalCluster          PostgreSQL, SeaweedFS, N bookies and M brokers (`strata cluster up`)
    postgres.PostgresServer       PostgreSQL from the machine's binaries (initdb + pg_ctl)
    seaweed.EmbeddedS3            SeaweedFS `weed mini`, the embedded S3 cold tier

They share one base (`process.NodeProcess`: spawn, ready-wait, stop, crash, freeze), one
parent-death helper (`parent_death.spawn`: PR_SET_PDEATHSIG, so a child dies with the process
that started it) and one ready-wait (`ready.wait_until_ready`: every wait has a bound).

What it may import: `common` and the product packages below it (`auth`, `metadata`, `offload`),
plus the standard library and the third-party libraries the product depends on. It never imports
`cli`, `perf`, `bench` or `tests`, which use it; and no product package (broker, bookie, ledger,
offload, metadata, ...) imports it: the product runs without launching anything
(tests/foundation/test_layering.py checks both).
"""

"""Wire codecs: the protocols Strata speaks, as pure functions over bytes (sans-IO).

`wire.pulsar` frames and parses Apache Pulsar's binary protocol (docs/protocol.md). The broker's
protocol front end, the perf load generator and the tests share it; a client needs nothing from
`broker/` to frame a command. `wire.kafka` does the same for Apache Kafka's protocol: request and
response frames from tables generated out of Kafka's schemas, and record batches v2.

What must hold: no module here opens a socket, starts a task or imports `broker`; it imports only
`proto` (the generated messages), `entries` (the stored entry format) and `common` (errors, limits).
"""

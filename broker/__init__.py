"""The broker: serves Pulsar's binary protocol and admin REST API over Strata's storage.

Packages, top to bottom; a package imports only packages below it (`TYPE_CHECKING` imports
included), and `tests/foundation/test_layering.py` checks it:

    server.py, memdebug.py    the process: the composition root, wires every layer
    protocol/, admin/         the front ends: Pulsar's binary protocol, the admin REST API
    service.py                the topics this broker serves and their lifecycle
    stats/, explain/          read-only views: stats JSON, metrics, explain-storage
    cluster/, retention/      broker-wide machinery: ownership, load, lease; TTL, retention, quotas, offload
    nonpersistent/            non-persistent topics (in memory)
    topics/                   persistent topics: producers, subscriptions, consumers, dispatch/
    compaction/               the compacted view of a topic
    schemas/, security/       schema registry; authorization and grants
    records/                  what the metadata store says exists: policies, tenants, namespaces, bundles
    context.py                BrokerContext and BrokerIdentity: the narrow things passed down

Below `protocol/` nothing knows Pulsar's command objects: the core (topics, subscriptions,
dispatchers) is protocol-neutral, and a front end translates its protocol into core calls.
Outside `broker/`, this package uses `wire`, `entries`, `cursor`, `ledger`, `offload`,
`metadata`, `auth` and `common`; nothing outside `cli` and `perf` imports it.
"""

SERVER_VERSION = "Strata-0.1.0"   # CONNECTED.server_version, and the broker's load report

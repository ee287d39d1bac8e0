"""The one Python client of Strata's admin REST API (Pulsar's `/admin/v2`, `/lookup/v2`, `/metrics`).

    from admin_client import AdminClient, Credentials
    admin = AdminClient(url, credentials=Credentials.build(token=jwt))
    admin.call("GET", "/admin/v2/tenants")               # JSON in, JSON out; typed errors

It owns the client side of the admin API: credentials (token, basic, a TLS client certificate,
Pulsar's authParams through `auth.params`) and TLS trust (`credentials`), the HTTP exchange with
its redirect rule (a 307/308 followed for every method, never https -> http with credentials),
its size cap, bounded waits and the translation of every failure into the AdminError classes of
`common.errors` (`transport`), and calls by path against one admin URL (`client`).

Who uses it: `strata admin` and `strata top` (cli), the Spark source and sink (analytics), the perf
tools (perf), bench and the tests. The broker's own broker-to-broker calls (aiohttp, inside the
event loop) do not: they stay in `broker/`.

What it may import: `common`, `auth` and the standard library, nothing else of Strata
(tests/foundation/test_layering.py). `broker`, `bookie`, `ledger`, `cursor`, `offload` and
`metadata` must not import it: it is a client, above them.
"""

from admin_client.client import AdminClient
from admin_client.credentials import NO_CREDENTIALS, Credentials
from admin_client.transport import ANSWER_BYTES_MAX, REDIRECTS_MAX, TIMEOUT_S, Answer, request, request_json

__all__ = ["ANSWER_BYTES_MAX", "NO_CREDENTIALS", "REDIRECTS_MAX", "TIMEOUT_S", "AdminClient", "Answer",
           "Credentials", "request", "request_json"]

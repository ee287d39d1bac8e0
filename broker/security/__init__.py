"""Who may do what: the authorization service, the grants it reads, and broker-to-broker auth.

- `authorization`: a role's right to produce, consume, look up or administer (superusers,
  tenant admins, namespace and topic grants);
- `permissions`: the grants as stored in namespace and topic policies;
- `peer_auth`: the credentials a broker sends when it calls another broker.

Authentication (who a client is) lives in the top-level `auth` package. May import
`broker.records` and below.
"""

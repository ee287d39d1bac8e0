"""Security shared by brokers, bookies and tools: who a peer is, and the TLS they speak.

- `auth.api`: the one interface every authentication provider implements (`Credentials` in,
  `Identity` out, `AuthenticationFailed` otherwise).
- `auth.service`: the configured providers behind one `AuthenticationService`.
- `auth.providers`: token (JWT), tls (client certificate CN) and basic (htpasswd).
- `auth.tokens`: making and checking JWTs (`strata tokens`).
- `auth.keys`: reading key material from `file:///`, `data:;base64,` and `env:` sources.
- `auth.params`: Pulsar's `authParams` strings (token, basic, tls), parsed by the Java client's rule;
  `strata admin --auth-params` and the Spark source's `pulsar.client.authParams` both use it.
- `auth.tls`: SSL contexts from settings, and the CN of a verified peer certificate.
- `auth.certs`: a CA and certificates (`strata standalone --secure`, tests).

Nothing here imports `broker` or `bookie`: both use it.
"""

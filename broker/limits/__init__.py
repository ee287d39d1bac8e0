"""Multi-tenant limits: Pulsar's per-namespace and per-topic policies that keep one tenant from
starving another (caps, rates, persistence, lifecycle), their REST and CLI shapes, and the view
the enforcing code reads them from.

- `spec`: what one policy is (`PolicySpec`); `caps`, `rates`, `persistence`, `lifecycle`: the
  policies of each kind, and how each is enforced; `registry`: all of them;
- `view`: each topic's effective value of a policy (topic, then namespace, then the broker's
  setting), cached, with listeners told when a policy changes.
"""

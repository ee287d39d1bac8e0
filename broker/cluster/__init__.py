"""The broker in a cluster: who owns which bundle, where a lookup goes, how load spreads.

- `listeners`: advertised listeners and the URLs a lookup answers;
- `registry`: the broker registry (ephemeral records of live brokers);
- `ownership`: bundle ownership and the lookup decision, unloads and splits;
- `placement`, `load_manager`, `load_report`: where bundles go and the load they carry;
- `lease_watch`: what the broker does when its metadata lease is in doubt.

May import `broker.nonpersistent`, `broker.topics` and below; it closes topics through
callbacks the service gives it, never by reaching into the service.
"""

"""What the metadata store says exists: Pulsar's `resources`.

- `policies`: partitioned topics, namespace and topic policies, the topic list;
- `tenancy`: tenants and namespaces (the defaults, a cache of which namespaces exist);
- `bundles`: a namespace's bundles (hash ranges of topic names) and their math.

May import: nothing from `broker` but `broker.context`; below it `metadata` and `common`.
"""

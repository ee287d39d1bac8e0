"""The schema registry (Pulsar's): versioned schemas per topic in the metadata store, checked by
Pulsar's compatibility strategies.

- `registry`: storage and versions (`common.schema_records` is the stored format);
- `compatibility`: the strategies (ALWAYS_COMPATIBLE ... FULL_TRANSITIVE; default FULL);
- `avro`: Avro's schema-resolution rules over fastavro-parsed schemas (AVRO and JSON);
- `validation`: is a definition well formed (malformed → InvalidSchemaData, unknown type →
  UnknownSchemaType);
- `policy`: the namespace / topic policies (strategy, auto update, validation enforced).
The wire commands (GET_SCHEMA, GET_OR_CREATE_SCHEMA, the schemas PRODUCER and SUBSCRIBE carry)
are `broker.protocol.schemas`; the admin API is `broker.admin.schemas`. May import
`broker.records` and below.
"""

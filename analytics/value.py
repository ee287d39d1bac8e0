"""Typed `value` columns: JSON payloads decoded with a schema the query gives (`valueSchema`, a
Spark StructType as JSON, e.g. `df.schema.json()`), as Pulsar's connector does for a topic with
a JSON schema.

    decoder = ValueDecoder(schema_json)      # once per partition
    batch = decoder.add_value(batch)         # + a `value` struct column

A payload that is not a JSON object, does not parse, or whose fields do not convert to the
schema's types gives a null `value` (the raw bytes stay in `payload`); fields the schema does
not name are ignored, missing ones are null.

What must hold: `value` has exactly the schema's type and one entry per row, whatever the payloads.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json

from common.errors import BadSourceOption

VALUE_COLUMN = "value"


def value_struct(schema_json: str) -> Any:
    """The Spark StructType of `valueSchema` (BadSourceOption if it is not one)."""
    from pyspark.sql.types import StructType

    try:
        parsed = StructType.fromJson(json.loads(schema_json))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadSourceOption("valueSchema must be a Spark StructType as JSON (e.g. df.schema.json())",
                              error=str(exc)[:200]) from None
    if not parsed.fields:
        raise BadSourceOption("valueSchema has no fields")
    return parsed


class ValueDecoder:
    def __init__(self, schema_json: str) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.arrow_schema = to_arrow_schema(value_struct(schema_json))
        self.arrow_type = pa.struct(list(self.arrow_schema))

    def add_value(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        values = self.decode(batch.column("payload"))
        return pa.RecordBatch.from_arrays([*batch.columns, values],
                                          schema=batch.schema.append(pa.field(VALUE_COLUMN, self.arrow_type)))

    def decode(self, payloads: pa.Array) -> pa.Array:
        items = payloads.to_pylist()
        if items and all(p and b"\n" not in p and p.lstrip()[:1] == b"{" for p in items):
            try:                        # every payload one JSON object: Arrow's reader, in C++
                table = pa_json.read_json(io.BytesIO(b"\n".join(items)), parse_options=pa_json.ParseOptions(
                    explicit_schema=self.arrow_schema, unexpected_field_behavior="ignore"))
                if table.num_rows == len(items):
                    return pa.StructArray.from_arrays([table.column(i).combine_chunks()
                                                       for i in range(table.num_columns)],
                                                      fields=list(self.arrow_schema))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass                   # some row does not fit: row by row below
        return pa.array([self._one(p) for p in items], type=self.arrow_type)

    def _one(self, payload: bytes | None) -> dict | None:
        if not payload:
            return None
        try:
            doc = json.loads(payload)
            if not isinstance(doc, dict):
                return None
            row = {name: doc.get(name) for name in self.arrow_schema.names}
            pa.array([row], type=self.arrow_type)          # converts, or raises
            return row
        except (ValueError, pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            return None

"""Which pushed filters the source answers, and that its row mask keeps exactly the rows Spark's
predicate would (analytics.filters; pure: no Spark, no cluster).

What must hold: comparisons of the statistics columns with a value of the column's type are
answered, everything else goes back to Spark as the same object; the mask treats NULL as not
passing; message ids name their ledger and entry for pruning.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from analytics.filters import RowFilter, message_id_positions, row_mask, split
from analytics.plan import Pruning
from offload.message_table import MESSAGE_ONLY_SCHEMA
from proto import pulsar_api_pb2 as pb

UTC = datetime.UTC
T0 = datetime.datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def _message_id(ledger: int, entry: int, batch_index: int = -1) -> bytes:
    message_id = pb.MessageIdData(ledgerId=ledger, entryId=entry, batch_index=batch_index)
    return message_id.SerializeToString()


def _batch() -> pa.RecordBatch:
    rows = {
        "topic": ["t-a", "t-b", "t-a", "t-b", "t-a"],
        "partition": [0, 1, 2, 0, 1],
        "ledger_id": [5, 5, 6, 6, 7],
        "entry_id": [0, 1, 0, 1, 0],
        "key": ["k1", None, "k2", "k1", "k10"],
        "message_id": [_message_id(5, 0), _message_id(5, 1), _message_id(6, 0), _message_id(6, 1), _message_id(7, 0)],
        "publish_time": [T0 + datetime.timedelta(microseconds=i * 1500) for i in range(5)],
    }
    schema = pa.schema([MESSAGE_ONLY_SCHEMA.field(name) for name in rows])
    return pa.RecordBatch.from_pydict(rows, schema=schema)


def test_comparisons_of_statistics_columns_are_answered_the_rest_goes_back_to_spark() -> None:
    answered = [EqualTo(("key",), "k1"), In(("partition",), (0, 2)), GreaterThan(("publish_time",), T0),
                LessThanOrEqual(("ledger_id",), 6), GreaterThanOrEqual(("entry_id",), 1),
                EqualTo(("message_id",), _message_id(5, 1)), LessThan(("topic",), "t-b")]
    back = [StringStartsWith(("key",), "k"), IsNull(("key",)), IsNotNull(("payload",)), Not(EqualTo(("key",), "k1")),
            GreaterThan(("message_id",), b"x"), EqualTo(("payload",), b"x"), EqualTo(("key",), 3),
            EqualTo(("ledger_id",), True), EqualTo(("key",), None), EqualTo(("properties", "a"), "b")]
    rows, rest = split(answered + back)
    assert [f.column for f in rows] == ["key", "partition", "publish_time", "ledger_id", "entry_id",
                                        "message_id", "topic"]
    assert len(rest) == len(back) and all(a is b for a, b in zip(rest, back, strict=True))
    assert rows[2].values == (int(T0.timestamp()) * 1_000_000,)
    naive = split([GreaterThan(("publish_time",), T0.replace(tzinfo=None))])[0][0]
    assert naive == rows[2], "a naive datetime is UTC (Spark's session time zone here)"


Row = dict[str, Any]
CASES: list[tuple[Any, Callable[[Row], bool]]] = [
    (EqualTo(("key",), "k1"), lambda r: r["key"] == "k1"),
    (IsNotNull(("key",)), lambda r: r["key"] is not None),
    (In(("key",), ("k2", "k10", None)), lambda r: r["key"] in ("k2", "k10")),
    (GreaterThan(("key",), "k1"), lambda r: r["key"] is not None and r["key"] > "k1"),
    (LessThan(("topic",), "t-b"), lambda r: r["topic"] < "t-b"),
    (In(("partition",), (0, 2)), lambda r: r["partition"] in (0, 2)),
    (GreaterThanOrEqual(("ledger_id",), 6), lambda r: r["ledger_id"] >= 6),
    (LessThanOrEqual(("entry_id",), 0), lambda r: r["entry_id"] <= 0),
    (GreaterThan(("publish_time",), T0 + datetime.timedelta(microseconds=1500)),
     lambda r: r["publish_time"] > T0 + datetime.timedelta(microseconds=1500)),
    (LessThan(("publish_time",), T0 + datetime.timedelta(microseconds=3000)),
     lambda r: r["publish_time"] < T0 + datetime.timedelta(microseconds=3000)),
    (EqualTo(("message_id",), _message_id(6, 1)), lambda r: r["message_id"] == _message_id(6, 1)),
    (In(("message_id",), (_message_id(5, 0), _message_id(7, 0))),
     lambda r: r["message_id"] in (_message_id(5, 0), _message_id(7, 0))),
]


@pytest.mark.parametrize(("spark_filter", "predicate"), CASES)
def test_the_row_mask_keeps_what_spark_would(spark_filter: Any, predicate: Callable[[Row], bool]) -> None:
    batch = _batch()
    answered, rest = split([spark_filter])
    assert not rest
    mask = row_mask(batch, answered)
    assert mask is not None and mask.null_count == 0
    kept = batch.filter(mask).to_pylist()
    assert kept == [r for r in batch.to_pylist() if predicate(r)]


def test_filters_are_anded_and_none_keeps_everything() -> None:
    batch = _batch()
    assert row_mask(batch, []) is None
    answered, _ = split([EqualTo(("topic",), "t-a"), GreaterThan(("ledger_id",), 5), LessThan(("entry_id",), 1)])
    assert batch.filter(row_mask(batch, answered)).column("ledger_id").to_pylist() == [6, 7]


def test_message_ids_prune_to_their_ledgers_and_entries() -> None:
    ids = [RowFilter("message_id", "in", (_message_id(5, 3), _message_id(9, 7, 2)))]
    assert message_id_positions(ids) == [(5, 3), (9, 7)]
    prune = Pruning.from_row_filters(ids)
    assert prune.ledgers == {5, 9} and (prune.entry_id.low, prune.entry_id.high) == (3, 7)
    both = ids + [RowFilter("message_id", "eq", (_message_id(9, 7, 2),)), RowFilter("message_id", "notnull", ())]
    assert Pruning.from_row_filters(both).ledgers == {9}
    assert message_id_positions([RowFilter("message_id", "eq", (b"\xff\xff",))]) is None, \
        "bytes that are no message id prune nothing (the mask still answers)"
    prune = Pruning.from_row_filters(split([GreaterThan(("publish_time",), T0), LessThan(("key",), "k2"),
                                            In(("partition",), (1, 3))])[0])
    assert prune.publish_ms.low == T0.timestamp() * 1000 and prune.key.high == "k2"
    assert prune.partitions == {1, 3} and (prune.partition.low, prune.partition.high) == (1, 3)

"""Pushed filters the source answers itself: which ones, and the Arrow mask that applies them.

    answered, rest = split(filters)      # in pushFilters; `rest` goes back to Spark
    mask = row_mask(batch, answered)     # on the executors, per record batch (None: keep all)

A filter is answered when the source can give exactly Spark's result for it: a comparison
(=, IN, <, <=, >, >=) of one top-level column that Parquet statistics or the ledger records
can prune by, with a value of the column's own type, or IS NOT NULL of such a column (Spark
infers it beside every comparison):

- `publish_time` (a timestamp; Spark sends an aware or naive-UTC datetime), `ledger_id`,
  `entry_id`, `partition` (integers), `topic`, `key` (strings, compared byte-wise as Spark's
  default UTF8_BINARY collation and Arrow both do);
- `message_id` (bytes), = and IN only: the rows' bytes are compared, and the ledger and entry
  parsed from the value prune ledgers and row groups.

Everything else (NOT, IS NULL, LIKE-like string filters, other columns, a value of another type,
a NULL value) is handed back to Spark, which applies it to the rows. An answered filter is
applied here to every row the source yields, so Spark does not apply it again.

What must hold: `row_mask` keeps a row exactly when Spark's predicate would be true for it
(a NULL column value never passes, as in a WHERE clause); `RowFilter` is plain picklable data.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from analytics.options import Position

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICROSECOND = datetime.timedelta(microseconds=1)
# column -> the kind of value a filter on it must carry to be answered
ANSWERED_COLUMNS = {"publish_time": "timestamp", "ledger_id": "int", "entry_id": "int", "partition": "int",
                    "topic": "str", "key": "str", "message_id": "bytes"}
# PySpark filter class name -> operator
_OPERATORS = {"EqualTo": "eq", "In": "in", "GreaterThan": "gt", "GreaterThanOrEqual": "ge",
              "LessThan": "lt", "LessThanOrEqual": "le", "IsNotNull": "notnull"}
_COMPARE = {"eq": pc.equal, "gt": pc.greater, "ge": pc.greater_equal, "lt": pc.less, "le": pc.less_equal}
_ARROW_TYPES = {"timestamp": pa.int64(), "int": pa.int64(), "str": pa.string(), "bytes": pa.binary()}


@dataclass(frozen=True)
class RowFilter:
    """One answered filter: `column op values` (values: one for a comparison, the set for "in";
    timestamps as microseconds since the epoch)."""
    column: str
    op: str                            # "eq", "in", "gt", "ge", "lt", "le", "notnull"
    values: tuple[Any, ...]            # () for "notnull"

    @property
    def kind(self) -> str:
        return ANSWERED_COLUMNS[self.column]


def split(filters: Iterable[Any]) -> tuple[list[RowFilter], list[Any]]:
    """(what the source answers, the filters Spark must still apply: the same objects)."""
    answered: list[RowFilter] = []
    rest: list[Any] = []
    for f in filters:
        row_filter = answerable(f)
        if row_filter is None:
            rest.append(f)
        else:
            answered.append(row_filter)
    return answered, rest


def answerable(f: Any) -> RowFilter | None:
    """`f` as a RowFilter, or None when the source cannot give exactly Spark's answer to it."""
    op = _OPERATORS.get(type(f).__name__)
    attribute = tuple(getattr(f, "attribute", ()))
    if op is None or len(attribute) != 1 or attribute[0] not in ANSWERED_COLUMNS:
        return None
    column = attribute[0]
    if op == "notnull":
        return RowFilter(column, op, ())
    kind = ANSWERED_COLUMNS[column]
    if kind == "bytes" and op not in ("eq", "in"):
        return None
    raw = list(f.value) if op == "in" else [f.value]
    values = [_typed(v, kind) for v in raw if v is not None]   # IN (1, NULL) passes what IN (1) does
    if not values or any(v is None for v in values) or (op != "in" and raw[0] is None):
        return None
    return RowFilter(column, op, tuple(values))


def _typed(value: Any, kind: str) -> Any:
    """The value as the mask compares it, or None if it is not of the column's type."""
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "str":
        return value if isinstance(value, str) else None
    if kind == "bytes":
        return bytes(value) if isinstance(value, bytes | bytearray) else None
    if isinstance(value, datetime.datetime):
        return timestamp_micros(value)
    return None


def timestamp_micros(value: datetime.datetime) -> int:
    """Microseconds since the epoch (a naive datetime is UTC, as Spark sends it in a UTC session)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - _EPOCH) // _MICROSECOND


def columns_of(row_filters: Sequence[RowFilter]) -> set[str]:
    return {f.column for f in row_filters}


def row_mask(batch: pa.RecordBatch, row_filters: Sequence[RowFilter]) -> pa.Array | None:
    """True for the rows every filter keeps (nulls never pass); None when there is no filter."""
    mask = None
    for f in row_filters:
        column = batch.column(f.column)
        if f.kind == "timestamp":
            column = column.cast(pa.int64())       # timestamp[us] -> its microseconds
        if f.op == "notnull":
            condition = pc.is_valid(column)
        elif f.op == "in":
            condition = pc.is_in(column, value_set=pa.array(f.values, _ARROW_TYPES[f.kind]))
        else:
            condition = _COMPARE[f.op](column, pa.scalar(f.values[0], _ARROW_TYPES[f.kind]))
        mask = condition if mask is None else pc.and_(mask, condition)
    return None if mask is None else pc.fill_null(mask, False)


def message_id_positions(row_filters: Sequence[RowFilter]) -> list[Position] | None:
    """(ledger, entry) of every message id an answered message_id filter allows; None when no
    such filter applies or a value does not parse (then it prunes nothing: the mask still holds).
    Several message_id filters are ANDed: each must be satisfied, so their positions intersect."""
    allowed: set[Position] | None = None
    for f in row_filters:
        if f.column != "message_id" or f.op not in ("eq", "in"):
            continue
        positions = {message_id_position(v) for v in f.values}
        if None in positions:
            continue
        known = {p for p in positions if p is not None}
        allowed = known if allowed is None else allowed & known
    return None if allowed is None else sorted(allowed)


def message_id_position(raw: bytes) -> Position | None:
    """(ledger, entry) of MessageIdData bytes, or None if they are not one."""
    from google.protobuf.message import DecodeError

    from proto import pulsar_api_pb2 as pb

    message_id = pb.MessageIdData()
    try:
        message_id.ParseFromString(raw)
    except DecodeError:
        return None
    if not message_id.IsInitialized():
        return None
    return int(message_id.ledgerId), int(message_id.entryId)

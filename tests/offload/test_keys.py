"""offload.keys: the documented key layout, and its inverse."""

from __future__ import annotations

import pytest

from common.errors import InvalidArgument
from offload import keys


def test_non_partitioned_topic_layout():
    ml = "acme/orders/persistent/paid"
    assert keys.topic_prefix("strata", ml) == "strata/acme/orders/paid/"
    assert keys.ledger_key("strata", ml, 42) == "strata/acme/orders/paid/ledger-00000000000000000042.parquet"
    assert keys.topic_origin(ml) == ("persistent://acme/orders/paid", -1)


def test_partition_layout_nests_under_the_partitioned_topic():
    ml = "acme/orders/persistent/paid-partition-3"
    assert keys.topic_prefix("strata", ml) == "strata/acme/orders/paid/partition-3/"
    assert keys.ledger_key("strata/", ml, 7).endswith("/paid/partition-3/ledger-00000000000000000007.parquet")
    assert keys.topic_origin(ml) == ("persistent://acme/orders/paid-partition-3", 3)


def test_empty_prefix_and_roundtrip():
    ml = "public/default/persistent/t-1.x=y:z%20"
    key = keys.ledger_key("", ml, 10 ** 19 + 5)
    assert key == "public/default/t-1.x=y:z%20/ledger-10000000000000000005.parquet"
    for ledger_id in (0, 1, 123456789, keys.LEDGER_ID_MAX):
        assert keys.ledger_id_of(keys.ledger_key("p", ml, ledger_id)) == ledger_id


def test_keys_sort_in_ledger_order():
    ml = "t/n/persistent/x"
    ids = [9, 10, 100, 2, 1_000_000]
    assert sorted(keys.ledger_key("p", ml, i) for i in ids) == [keys.ledger_key("p", ml, i) for i in sorted(ids)]


@pytest.mark.parametrize("key", ["p/t/n/x/ledger-42.parquet", "p/t/n/x/ledger-00000000000000000042.parquet.tmp",
                                 "p/t/n/x/other", "p/_probe/abc", "ledger-0000000000000000004a.parquet"])
def test_foreign_keys_name_no_ledger(key):
    assert keys.ledger_id_of(key) is None


@pytest.mark.parametrize("name", ["t/n/x", "t/n/non-persistent/x", "t//persistent/x", "t/n/persistent/x/y", ""])
def test_bad_ml_names_are_refused(name):
    with pytest.raises(InvalidArgument):
        keys.topic_prefix("p", name)


def test_ledger_id_out_of_range_is_refused():
    with pytest.raises(InvalidArgument):
        keys.ledger_key("p", "t/n/persistent/x", -1)
    with pytest.raises(InvalidArgument):
        keys.ledger_key("p", "t/n/persistent/x", keys.LEDGER_ID_MAX + 1)

"""internalStats' `individuallyDeletedMessages` (broker.stats.internal_stats.ack_ranges_text): Pulsar's
"[(L:E..L:E], ...]" text, one range per run of consecutive acked entries of a ledger, open below
and closed above, whichever of acked entries or gaps the walk goes over."""

from pyroaring import BitMap64

from broker.stats.internal_stats import ack_ranges_text


def test_no_acks_print_an_empty_list():
    assert ack_ranges_text({}) == "[]"
    assert ack_ranges_text({3: BitMap64()}) == "[]"


def test_runs_per_ledger_open_below_closed_above():
    acked = {5: BitMap64([4]), 3: BitMap64([0, 1, 2, 5, 7, 8])}
    assert ack_ranges_text(acked) == "[(3:-1..3:2], (3:4..3:5], (3:6..3:8], (5:3..5:4]]"


def test_dense_acks_walk_the_gaps_and_give_the_same_ranges():
    dense = BitMap64(range(0, 10_000))
    dense.remove(17)
    dense.remove(5_000)
    assert ack_ranges_text({9: dense}) == "[(9:-1..9:16], (9:17..9:4999], (9:5000..9:9999]]"
    sparse = BitMap64(range(0, 20, 2))
    assert ack_ranges_text({1: sparse}) == "[" + ", ".join(f"(1:{e - 1}..1:{e}]" for e in range(0, 20, 2)) + "]"

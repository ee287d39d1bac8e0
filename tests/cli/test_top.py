"""`strata top`: its pure parts over hand-made snapshots (merge, sort, sparkline, frames, the key
state machine), its keyboard on a real pseudo-terminal, and one run against a real standalone:
two topics with different backlogs, `--once --sort backlog`, the broker-stats route's JSON
against each topic's own stats, and a broker that never answers counted as failed within the bound.
"""

from __future__ import annotations

import os
import pty
import socket
import termios
import time
import uuid

import pytest

from admin_client import request_json
from cli import top
from cli.top import keys as k
from cli.top.keys import ViewState, apply_key, decode
from cli.top.model import (
    SPARK_BARS,
    History,
    Snapshot,
    in_namespace,
    merge,
    sorted_topics,
    sparkline,
    subscription_key,
)
from cli.top.render import KEYS_LINE, frame, to_text, window
from cli.top.source import gather
from cli.top.terminal import Keyboard
from common.human import human_bytes

B1, B2, B3 = "http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.0.0.3:8080"


def _sub(backlog: int, *, rate_out: float = 0.0, unacked: int = 0, consumers: int = 0,
         sub_type: str = "Exclusive", mark_delete: str = "3:-1") -> dict:
    return {"msgBacklog": backlog, "backlogSize": backlog * 100, "unackedMessages": unacked, "type": sub_type,
            "msgRateOut": rate_out, "markDeletePosition": mark_delete,
            "consumers": [{"consumerName": f"c{i}"} for i in range(consumers)]}


def _topic(backlog: int, storage: int, rate_in: float = 0.0, rate_out: float = 0.0, msg_in: int = 0,
           subs: dict | None = None) -> dict:
    return {"msgRateIn": rate_in, "msgRateOut": rate_out, "msgBacklog": backlog, "storageSize": storage,
            "msgInCounter": msg_in, "subscriptions": subs if subs is not None else {"s": _sub(backlog)}}


def _answer(topics: dict[str, dict], bundle: str = "0x00000000_0xffffffff") -> dict:
    out: dict = {}
    for name, stats in topics.items():
        namespace = name.split("://")[1].rsplit("/", 1)[0]
        out.setdefault(namespace, {}).setdefault(bundle, {}).setdefault("persistent", {})[name] = stats
    return out


def _name(local: str, namespace: str = "public/default") -> str:
    return f"persistent://{namespace}/{local}"


@pytest.fixture
def snapshot() -> Snapshot:
    return merge({
        B1: _answer({_name("busy"): _topic(10, 5_000, rate_in=900.0, rate_out=850.0, msg_in=10_000),
                     _name("stuck"): _topic(7_000, 2_000_000, msg_in=7_000,
                                            subs={"slow": _sub(7_000, unacked=12, consumers=1, sub_type="Shared",
                                                               mark_delete="5:99"),
                                                  "fast": _sub(0, rate_out=3.0, consumers=2)})}),
        B2: _answer({_name("big", "t/other"): _topic(200, 9 * 1024**3, rate_in=5.0, msg_in=300)},
                    bundle="0x80000000_0xffffffff"),
        B3: None,
    })


# --- model ------------------------------------------------------------------------------------------


def test_merge_counts_every_topic_once_and_the_brokers_that_failed(snapshot: Snapshot) -> None:
    assert sorted(snapshot.topics) == [_name("busy"), _name("stuck"), _name("big", "t/other")]
    assert snapshot.brokers_answered == (B1, B2)
    assert snapshot.brokers_failed == (B3,)
    assert snapshot.backlog_msgs == 10 + 7_000 + 200
    assert snapshot.storage_bytes == 5_000 + 2_000_000 + 9 * 1024**3
    assert snapshot.consumers == 3
    stuck = snapshot.topics[_name("stuck")]
    assert stuck.consumers == 3 and {s.name for s in stuck.subscriptions} == {"slow", "fast"}


def test_a_topic_two_brokers_report_keeps_the_copy_with_more_messages_in() -> None:
    merged = merge({B1: _answer({_name("x"): _topic(5, 1, msg_in=10)}),
                    B2: _answer({_name("x"): _topic(9, 1, msg_in=20)})})
    assert len(merged.topics) == 1 and merged.topics[_name("x")].backlog_msgs == 9


def test_malformed_answers_are_skipped_not_fatal() -> None:
    merged = merge({B1: {"public/default": {"b": {"persistent": {_name("ok"): _topic(1, 1), "bad": 3}}},
                         "junk": [1, 2]},
                    B2: ["not", "a", "map"]})
    assert list(merged.topics) == [_name("ok")]
    assert merged.brokers_answered == (B1, B2)


@pytest.mark.parametrize(("sort", "expected"), [
    ("rate", ["busy", "big", "stuck"]),
    ("backlog", ["stuck", "big", "busy"]),
    ("storage", ["big", "stuck", "busy"]),
])
def test_sorts_largest_first(snapshot: Snapshot, sort: str, expected: list[str]) -> None:
    assert [t.name.rsplit("/", 1)[1] for t in sorted_topics(snapshot, sort)] == expected
    assert len(sorted_topics(snapshot, sort, limit=2)) == 2


def test_ties_are_broken_by_name() -> None:
    merged = merge({B1: _answer({_name("b"): _topic(5, 1), _name("a"): _topic(5, 1), _name("c"): _topic(6, 1)})})
    assert [t.name for t in sorted_topics(merged, "backlog")] == [_name("c"), _name("a"), _name("b")]


def test_namespace_filter(snapshot: Snapshot) -> None:
    assert list(in_namespace(snapshot, "t/other").topics) == [_name("big", "t/other")]
    assert in_namespace(snapshot, None) is snapshot


def test_sparkline_scales_from_zero_to_the_largest_value() -> None:
    assert sparkline(range(8), width=8) == SPARK_BARS
    assert sparkline([0, 0, 0], width=3) == "▁▁▁"
    assert sparkline([5, 5], width=2) == "██"
    assert sparkline([0, 7], width=5) == "   ▁█"       # fewer samples than width: padded on the left
    assert sparkline([], width=4) == "    "
    long = list(range(100))
    assert len(sparkline(long)) == 30 and sparkline(long)[-1] == "█"


def test_history_keeps_the_last_samples_and_forgets_what_is_gone() -> None:
    history = History(samples_max=3)
    for backlog in (1, 2, 3, 4):
        history.record(merge({B1: _answer({_name("x"): _topic(backlog, 1, subs={"s": _sub(backlog * 10)})})}))
    assert history.of(_name("x")) == [2, 3, 4]
    assert history.of(subscription_key(_name("x"), "s")) == [20, 30, 40]
    history.record(merge({B1: _answer({_name("y"): _topic(1, 1)})}))
    assert history.of(_name("x")) == [] and set(history.backlogs) == {_name("y"), subscription_key(_name("y"), "s")}


@pytest.mark.parametrize(("size", "text"), [
    (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 * 1024**2, "5.0 MiB"), (9 * 1024**3, "9.0 GiB"),
    (3 * 1024**5, "3072.0 TiB")])
def test_human_bytes(size: int, text: str) -> None:
    assert human_bytes(size) == text


# --- frames -----------------------------------------------------------------------------------------


def _rows(text: str) -> list[list[str]]:
    """The table rows of a frame (after the two header lines; without the rule and the keys line)."""
    return [line.split() for line in text.splitlines()[2:] if line.strip() and "──" not in line
            and line != KEYS_LINE]


def test_topic_list_frame(snapshot: Snapshot) -> None:
    text = to_text(frame(snapshot, _history(snapshot), ViewState(sort="backlog"), clock_text="12:00:00"), 200)
    head = " ".join(text.splitlines()[:2])
    assert "sort: backlog" in head and "topics 3" in head and "backlog 7210 msgs" in head
    assert f"brokers 2/3 answered, 1 failed ({B3})" in head
    assert "BACKLOG ▼" in text
    rows = [r for r in _rows(text) if r[0] != "TOPIC"]
    assert [r[0] for r in rows] == ["public/default/stuck", "t/other/big", "public/default/busy"]
    stuck = rows[0]
    assert stuck[1:3] == ["0", "0"] and stuck[3] == "7000" and stuck[4:6] == ["1.9", "MiB"] and stuck[6] == "3"
    assert rows[1][4:6] == ["9.0", "GiB"] and rows[2][1:3] == ["900.0", "850.0"]
    assert rows[0][-1].endswith("▁█")    # two samples: 0 before, 7000 now
    assert "Enter subscriptions" not in text      # no keys line outside the live view


def test_limit_and_scrolling_keep_the_selection_visible(snapshot: Snapshot) -> None:
    text = to_text(frame(snapshot, History(), ViewState(sort="storage"), limit=1), 200)
    assert [r[0] for r in _rows(text) if r[0] != "TOPIC"] == ["t/other/big"]
    assert window(10, 0, 3) == (0, 3)
    assert window(10, 5, 3) == (3, 6)
    assert window(10, 9, 3) == (7, 10)
    assert window(2, 1, 5) == (0, 2)
    state = ViewState(sort="backlog", selected=_name("busy"))
    text = to_text(frame(snapshot, History(), state, interactive=True, rows_max=1), 200)
    assert [r[0] for r in _rows(text) if r[0] != "TOPIC"] == ["public/default/busy"]
    assert "q quit" in text


def test_drill_down_shows_the_subscriptions(snapshot: Snapshot) -> None:
    state = ViewState(sort="backlog", drilled=_name("stuck"))
    text = to_text(frame(snapshot, _history(snapshot), state), 200)
    line = text.splitlines()[2]
    assert line.startswith("public/default/stuck") and "backlog 7000 msgs" in line
    rows = [r for r in _rows(text)[1:] if r[0] != "SUBSCRIPTION"]
    assert [r[:7] for r in rows] == [["slow", "Shared", "0", "7000", "12", "1", "5:99"],
                                     ["fast", "Exclusive", "3.0", "0", "0", "2", "3:-1"]]
    missing = to_text(frame(snapshot, History(), ViewState(drilled=_name("gone"))), 200)
    assert "public/default/gone is not in the latest answers" in missing


def _history(snapshot: Snapshot) -> History:
    """Two samples: every backlog at 0, then as in `snapshot`."""
    history = History()
    zero = merge({B1: _answer({n: _topic(0, 0, subs={s.name: _sub(0) for s in t.subscriptions})
                               for n, t in snapshot.topics.items()})})
    history.record(zero)
    history.record(snapshot)
    return history


# --- keys -------------------------------------------------------------------------------------------


def test_decode_terminal_bytes() -> None:
    assert decode(b"\x1b[A\x1b[Bjk\x1bOA") == [k.UP, k.DOWN, "j", "k", k.UP]
    assert decode(b"\r\n\x7f\x08") == [k.ENTER, k.ENTER, k.BACKSPACE, k.BACKSPACE]
    assert decode(b"\x1b") == [k.ESC]
    assert decode(b"\x1bq") == [k.ESC, "q"]
    assert decode(b"\x1b[5~r\x1b[1;5Cb") == ["r", "b"]          # other CSI sequences are dropped
    assert decode(b"\x1b[") == []                                # a truncated sequence too
    assert decode(b"\x00\x01s") == ["s"]


def test_key_state_machine() -> None:
    order = ["a", "b", "c"]
    state = ViewState()
    assert apply_key(state, "b", order).sort == "backlog"
    assert apply_key(state, "s", order).sort == "storage"
    assert apply_key(apply_key(state, "s", order), "r", order).sort == "rate"
    state = apply_key(state, k.DOWN, order)
    assert state.selected == "b"
    state = apply_key(apply_key(state, "j", order), "j", order)
    assert state.selected == "c"                                  # clamped at the last row
    state = apply_key(apply_key(apply_key(state, "k", order), k.UP, order), k.UP, order)
    assert state.selected == "a"                                  # clamped at the first row
    state = apply_key(apply_key(state, "j", order), k.ENTER, order)
    assert state.drilled == "b"
    assert apply_key(state, "j", order) == state                  # no moving inside the drill-down
    assert apply_key(state, "b", order).drilled == "b"            # the sort still switches
    back = apply_key(state, k.ESC, order)
    assert back.drilled is None and back.selected == "b"
    assert apply_key(state, k.BACKSPACE, order).drilled is None
    assert apply_key(back, "q", order).quit and apply_key(state, "q", order).quit


def test_selection_follows_the_topic_and_falls_back_to_the_first_row() -> None:
    state = ViewState(selected="b")
    assert apply_key(state, k.DOWN, ["c", "b", "a"]).selected == "a"   # re-sorted: moves from b's new place
    assert apply_key(state, k.DOWN, ["x", "y"]).selected == "y"        # b is gone: from the first row
    assert apply_key(state, k.ENTER, ["x", "y"]).drilled == "x"
    assert apply_key(ViewState(), k.ENTER, []) == ViewState()          # nothing to drill into
    assert apply_key(ViewState(), k.DOWN, []) == ViewState()


# --- terminal ---------------------------------------------------------------------------------------


def test_keyboard_on_a_pty_reads_keys_and_restores_the_terminal() -> None:
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        with open(slave, closefd=False) as stream:
            with pytest.raises(RuntimeError), Keyboard(stream) as keyboard:
                assert keyboard.active
                assert not termios.tcgetattr(slave)[3] & termios.ICANON      # cbreak: no line buffering
                os.write(master, b"\x1b[Bq")
                assert keyboard.read(2.0) == [k.DOWN, "q"]
                assert keyboard.read(0.01) == []
                raise RuntimeError("the view crashed")
            assert termios.tcgetattr(slave) == before
            assert not keyboard.active
    finally:
        os.close(master)
        os.close(slave)


def test_keyboard_without_a_tty_handles_no_keys(tmp_path) -> None:
    with open(tmp_path / "f", "w+") as stream, Keyboard(stream) as keyboard:
        assert not keyboard.active and keyboard.read(0.01) == []


def test_bad_arguments_are_refused() -> None:
    for argv in (["--namespace", "nope"], ["--interval", "0"], ["--limit", "-1"], ["--sort", "size"]):
        with pytest.raises(SystemExit) as exc:
            top.parser().parse_args(argv)
        assert exc.value.code == 2


def test_no_broker_answering_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.standalone_proc import free_port
    assert top.main(["--admin-url", f"http://127.0.0.1:{free_port()}", "--once", "--timeout", "1"]) == 1
    captured = capsys.readouterr()
    assert "brokers 0/1 answered, 1 failed" in captured.out and "no broker answered" in captured.err


# --- against a real standalone ----------------------------------------------------------------------


def _get(url: str) -> object:
    return request_json("GET", url, timeout_s=15)


_RATES = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut")


def _without_rates(value: object) -> object:
    """Stats minus the rates, which may move between two calls (a sampler tick in between)."""
    if isinstance(value, dict):
        return {key: _without_rates(v) for key, v in value.items() if key not in _RATES}
    if isinstance(value, list):
        return [_without_rates(v) for v in value]
    return value


def test_top_once_against_a_standalone(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import pulsar

    from tests.support.standalone_proc import StandaloneProcess

    run = uuid.uuid4().hex[:8]
    small, large = _name(f"top-small-{run}"), _name(f"top-large-{run}")
    with StandaloneProcess.start(tmp_path / "data") as sa:
        client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            for topic, count in ((small, 3), (large, 11)):
                client.subscribe(topic, "sub").close()      # a durable subscription: the backlog counts
                producer = client.create_producer(topic, batching_enabled=False)
                for i in range(count):
                    producer.send(f"m{i}".encode())
                producer.close()
        finally:
            client.close()
        assert top.main(["--admin-url", sa.admin_url, "--once", "--sort", "backlog",
                         "--namespace", "public/default"]) == 0
        out = capsys.readouterr().out
        rows = {r[0]: r for r in _rows(out)}
        shown = [r[0] for r in _rows(out) if r[0] in (small[13:], large[13:])]
        assert shown == [large[13:], small[13:]]
        assert rows[large[13:]][3] == "11" and rows[small[13:]][3] == "3"
        assert "brokers 1/1 answered" in out.splitlines()[0]

        answer = _get(sa.admin_url + "/admin/v2/broker-stats/topics")
        assert isinstance(answer, dict)
        for topic in (small, large):
            local = topic.rsplit("/", 1)[1]
            bundle = _get(f"{sa.admin_url}/lookup/v2/topic/persistent/public/default/{local}/bundle")
            assert isinstance(bundle, str)
            from_route = answer["public/default"][bundle]["persistent"][topic]
            direct = _get(f"{sa.admin_url}/admin/v2/persistent/public/default/{local}/stats")
            assert _without_rates(from_route) == _without_rates(direct)
            assert from_route["msgBacklog"] == (3 if topic == small else 11)

        with socket.socket() as black_hole:                 # accepts connections, never answers
            black_hole.bind(("127.0.0.1", 0))
            black_hole.listen(8)
            silent = f"http://127.0.0.1:{black_hole.getsockname()[1]}"
            started_s = time.monotonic()
            merged = gather([sa.admin_url, silent], timeout_s=1.0)
            elapsed_s = time.monotonic() - started_s
        assert merged.brokers_answered == (sa.admin_url,) and merged.brokers_failed == (silent,)
        assert elapsed_s < 3.0 and merged.topics[large].backlog_msgs == 11

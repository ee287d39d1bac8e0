"""`strata perf fuzz`: the frame generator as pure bytes (hypothesis picks the seeds), short bursts
at a live broker from hypothesis-chosen seeds, the command end to end (a short run in the default
suite, the 1,000,000-frame run behind `slow`).

Why hypothesis only picks seeds here: the generator itself is a seeded `random.Random` mutator
(perf/fuzz/frames.py), fast enough for a million frames (~80,000 a second against hypothesis'
hundreds), and it has to run inside the product command, where hypothesis is not a dependency.
atheris (3.0.0 installs here from PyPI for Python 3.11) was not used: its value is coverage
feedback from instrumented code running in its own process, and the code under test runs in
the broker's process; its Fuzz() loop also owns the process, one input at a time, where this
needs many pipelined connections under asyncio.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perf.fuzz import frames
from perf.fuzz.command import UNEXPECTED
from perf.fuzz.driver import Budget, Driver
from perf.fuzz.frames import CLOSING, FATAL, PARTIAL, ROUTED, FrameSource, Names, fate_of
from tests.support.standalone_proc import StandaloneProcess

REPO = Path(__file__).resolve().parents[2]
NAMES = Names(topics=("persistent://public/default/fuzz-test-rt", "persistent://public/default/fuzz-test-b",
                      "non-persistent://public/default/fuzz-test-np"), subscriptions=("fuzz-shared", "fuzz-other"))
SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


# ------------------------------------------------------------------------------------------------
# The generator, as pure bytes


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, connected=st.booleans())
def test_same_seed_same_frames_each_bounded_and_fated_by_the_decoder(seed: int, connected: bool) -> None:
    one, two = FrameSource(random.Random(seed), NAMES), FrameSource(random.Random(seed), NAMES)
    for _ in range(200):
        a, b = one.draw(connected), two.draw(connected)
        assert a == b
        assert 0 < len(a.data) <= frames.FRAME_BYTES_OUT_MAX
        assert a.kind in frames.KINDS and (a.fate, a.connects) == fate_of(a.data, connected)


@settings(max_examples=10, deadline=None)
@given(seed=SEEDS)
def test_draw_fated_gives_what_was_asked(seed: int) -> None:
    source = FrameSource(random.Random(seed), NAMES)
    assert all(source.draw_fated(True, routed=True).fate == ROUTED for _ in range(100))
    assert all(source.draw_fated(True, routed=False).fate in (FATAL, CLOSING, PARTIAL) for _ in range(100))


def test_every_kind_and_fate_turns_up() -> None:
    source = FrameSource(random.Random(7), NAMES)
    drawn = [source.draw(True) for _ in range(3000)]
    assert {f.kind for f in drawn} == set(frames.KINDS)
    assert {f.fate for f in drawn} == {ROUTED, CLOSING, FATAL, PARTIAL}


def test_valid_templates_are_routed_and_connect_connects() -> None:
    for template in frames.valid_templates(NAMES):
        data = template.frame()
        fate, _ = fate_of(data, connected=True)
        assert fate == (CLOSING if template.body == frames.valid_templates(NAMES)[0].body else ROUTED)
    assert fate_of(frames.valid_templates(NAMES)[0].frame(), connected=False) == (ROUTED, True)


def test_wrong_sizes() -> None:
    ping = frames.valid_templates(NAMES)[7].frame()
    assert fate_of(b"\xff\xff\xff\xff" + ping[4:], True)[0] == FATAL          # huge: FrameTooLarge
    assert fate_of(b"\x00\x00\x10\x00" + ping[4:], True)[0] == PARTIAL        # bigger than sent
    assert fate_of(b"\x00\x00\x00\x02" + ping[4:], True)[0] == FATAL          # smaller than its cmd_size
    assert fate_of(ping[:4] + b"\x7f\xff\xff\xff" + ping[8:], True)[0] == FATAL


def test_no_exclusive_producer_on_the_round_trip_topic() -> None:
    """Exclusive access modes lock other producers out by design: never on the real client's topic."""
    source = FrameSource(random.Random(3), NAMES)
    from proto import pulsar_api_pb2 as pb
    seen = 0
    for _ in range(20_000):
        template = source.fields_template()
        cmd = pb.BaseCommand.FromString(template.body)
        if cmd.HasField("producer") and cmd.producer.topic == NAMES.topics[0]:
            seen += 1
            assert not cmd.producer.HasField("producer_access_mode")
    assert seen


# ------------------------------------------------------------------------------------------------
# Short bursts at a live broker, from hypothesis-chosen seeds


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("fuzz") / "data") as sa:
        yield sa
        log = sa.log_path.read_text(errors="replace")
    unexpected = [line for line in log.splitlines() if UNEXPECTED.match(line)]
    assert not unexpected, "\n".join(unexpected[:20])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=SEEDS)
def test_bursts_from_any_seed_leave_the_broker_serving(standalone: StandaloneProcess, seed: int) -> None:
    driver = Driver("127.0.0.1", standalone.port, NAMES, seed, connections=4, close_timeout_s=10)
    tally = asyncio.run(driver.run(Budget(1500, 150)))
    assert tally.frames >= 1500 and tally.frames_before_connect == 150
    assert tally.hung == 0 and tally.bad_replies == 0 and tally.connect_failures == 0 and tally.session_timeouts == 0
    assert tally.closed_by_broker > 0 and tally.error_replies > 0
    assert standalone.alive()
    with socket.create_connection(("127.0.0.1", standalone.port), timeout=5):
        pass


# ------------------------------------------------------------------------------------------------
# The command end to end


def perf_fuzz(*args: str, timeout_s: float) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "fuzz", "--json", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"rc={proc.returncode}\nstdout:{proc.stdout[-2000:]}\nstderr:{proc.stderr[-3000:]}"
    return proc.returncode, json.loads(lines[-1])


def assert_held_up(rc: int, report: dict, frames_sent: int) -> None:
    assert rc == 0 and report["failures"] == [], report
    assert report["frames"] == frames_sent
    assert report["frames_before_connect"] == frames_sent // 10
    assert report["roundtrips"] >= 1 and report["roundtrip_max_ms"] > 0
    assert report["rss_start_mb"] <= report["rss_peak_mb"] <= report["rss_bound_mb"]
    assert report["closed_by_broker"] > 0 and report["answered_error"] > 0 and report["hung_connections"] == 0
    assert report["unexpected_log_records"] == 0


def test_short_run_holds_up() -> None:
    rc, report = perf_fuzz("--frames", "30000", "--seed", "11", timeout_s=120)
    assert_held_up(rc, report, 30_000)


@pytest.mark.slow
def test_a_million_frames_hold_up() -> None:
    rc, report = perf_fuzz("--frames", "1000000", "--seed", "27", timeout_s=3600)
    assert_held_up(rc, report, 1_000_000)

"""What one `strata standalone` runs beside its broker (launch/standalone_children.py): real
bookies, the ports they keep in `D/standalone.json`, one-line start errors.

What must hold: a bookie never gets the broker's or the admin port (they bind later); ports are
recorded once and come back on the next start; the bookies serve, share the standalone's
process group, and are gone after stop(); a bookie that cannot start is reported in one line
naming its port and its own error.
"""

from __future__ import annotations

import json
import os

import pytest

from common.config import default_config
from common.errors import StrataError
from launch import standalone_children
from launch.process import pid_alive
from launch.standalone_children import StandaloneChildren


def test_bookie_ports_avoid_broker_and_admin_ports(tmp_path, monkeypatch):
    offered = iter([6000, 6001, 6000, 6002, 6003])
    monkeypatch.setattr(standalone_children, "free_port", lambda host: next(offered))
    ports = standalone_children.bookie_ports(tmp_path, 2, {6000, 6001})
    assert ports == [6002, 6003]
    # kept for restarts: the same ports come back without probing
    monkeypatch.setattr(standalone_children, "free_port", lambda host: 1 / 0)
    assert standalone_children.bookie_ports(tmp_path, 2, {6000, 6001}) == [6002, 6003]


def test_bookies_serve_keep_their_ports_and_stop(tmp_path):
    config = default_config()
    children = StandaloneChildren(tmp_path, config, bookies=2, config_path=None, bookie_env={}, embed_s3=False)
    try:
        assert children.s3 is None
        children.launch()
        children.wait_bookies()
        pids = [b.pid for b in children.bookies]
        assert all(os.getpgid(pid) == os.getpgid(0) for pid in pids)    # the standalone's group
        for index, port in enumerate(children.ports):
            log = (tmp_path / f"bookie-{index}" / "bookie.log").read_text()
            assert f"bookie ready 127.0.0.1:{port}" in log
    finally:
        children.stop()
    assert not any(pid_alive(pid) for pid in pids)
    state = json.loads((tmp_path / "standalone.json").read_text())
    assert state["bookie_ports"] == children.ports and state["bookie_metrics_ports"] == children.metrics_ports
    assert not {config.broker_port, config.broker_admin_port} & set(children.ports + children.metrics_ports)
    again = StandaloneChildren(tmp_path, config, bookies=2, config_path=None, bookie_env={}, embed_s3=False)
    assert again.ports == children.ports and again.metrics_ports == children.metrics_ports


def test_a_bookie_that_cannot_start_is_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_setting = 1\n")
    children = StandaloneChildren(tmp_path, default_config(), bookies=1, config_path=str(bad), bookie_env={},
                                  embed_s3=False)
    try:
        children.launch()
        with pytest.raises(StrataError) as info:
            children.wait_bookies()
    finally:
        children.stop()
    assert str(info.value).startswith("a bookie exited during start-up (")
    assert info.value.details["port"] == children.ports[0]
    assert "unknown setting 'no_such_setting'" in info.value.details["reason"]

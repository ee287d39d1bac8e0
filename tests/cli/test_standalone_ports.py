"""The standalone never gives a bookie the broker's or the admin port (they bind later)."""

from cli import standalone


def test_bookie_ports_avoid_broker_and_admin_ports(tmp_path, monkeypatch):
    offered = iter([6000, 6001, 6000, 6002, 6003])
    monkeypatch.setattr(standalone, "free_port", lambda host: next(offered))
    ports = standalone.bookie_ports(tmp_path, 2, {6000, 6001})
    assert ports == [6002, 6003]
    # kept for restarts: the same ports come back without probing
    monkeypatch.setattr(standalone, "free_port", lambda host: 1 / 0)
    assert standalone.bookie_ports(tmp_path, 2, {6000, 6001}) == [6002, 6003]

"""common.write_cork: inside a scope writes are held per connection and leave, in order, in one
flush per connection when the outermost scope ends."""

from __future__ import annotations

from common import write_cork


class Holder:
    """A connection-like holder, as ServerConnection uses the cork."""

    def __init__(self, sent: list[tuple[str, list[bytes]]], name: str) -> None:
        self.sent, self.name, self.held = sent, name, None

    def write(self, data: bytes) -> None:
        if write_cork.scope.depth:
            if self.held is None:
                self.held = []
                write_cork.hold(self)
            self.held.append(data)
        else:
            self.sent.append((self.name, [data]))

    def flush_corked(self) -> None:
        held, self.held = self.held, None
        if held:
            self.sent.append((self.name, held))


def test_writes_in_a_scope_leave_once_per_holder_in_order() -> None:
    sent: list[tuple[str, list[bytes]]] = []
    a, b = Holder(sent, "a"), Holder(sent, "b")
    write_cork.begin()
    a.write(b"1")
    b.write(b"x")
    write_cork.begin()           # nested: nothing leaves at the inner end
    a.write(b"2")
    write_cork.end()
    assert sent == []
    a.write(b"3")
    write_cork.end()
    assert sent == [("a", [b"1", b"2", b"3"]), ("b", [b"x"])]
    a.write(b"4")                # outside a scope: at once
    assert sent[-1] == ("a", [b"4"])
    assert write_cork.scope.depth == 0 and write_cork.scope.holders == []


def test_a_failing_flush_does_not_keep_the_others() -> None:
    sent: list[tuple[str, list[bytes]]] = []

    class Broken(Holder):
        def flush_corked(self) -> None:
            raise OSError("gone")

    broken, ok = Broken(sent, "broken"), Holder(sent, "ok")
    write_cork.begin()
    broken.write(b"1")
    ok.write(b"2")
    write_cork.end()
    assert sent == [("ok", [b"2"])]
    assert write_cork.scope.holders == []

"""`strata top`'s keys: bytes from a cbreak terminal → key names → the next view state. Pure.

Keys: r / b / s sort by rate, backlog, storage; ↑ ↓ (or k j) move the selection; Enter shows the
selected topic's subscriptions; Esc or Backspace goes back to the topics; q quits.

`ViewState` is the whole state of the view; `apply_key` is its one transition function. The
selection is held by topic name, not by row number, so it stays on the same topic when the sort
or the numbers change; when that topic is gone it falls back to the first row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cli.top.model import SORT_KEYS

UP, DOWN, LEFT, RIGHT = "up", "down", "left", "right"
ENTER, ESC, BACKSPACE = "enter", "esc", "backspace"

_ARROWS = {"A": UP, "B": DOWN, "C": RIGHT, "D": LEFT}
_SORT_BY_KEY = {"r": "rate", "b": "backlog", "s": "storage"}
assert set(_SORT_BY_KEY.values()) == set(SORT_KEYS)


@dataclass(frozen=True)
class ViewState:
    sort: str = "rate"            # one of model.SORT_KEYS
    selected: str | None = None   # the selected topic's name; None: the first row
    drilled: str | None = None    # the topic whose subscriptions are shown; None: the topic list
    quit: bool = False


def decode(data: bytes) -> list[str]:
    """Key names in `data` as a cbreak terminal sends them: arrows (ESC [ A / ESC O A) → "up"...,
    CR/LF → "enter", DEL/BS → "backspace", a lone ESC → "esc", other CSI sequences dropped,
    printable characters as themselves."""
    keys: list[str] = []
    i = 0
    while i < len(data):
        byte = data[i]
        if byte == 0x1B:
            i = _escape(data, i, keys)
            continue
        if byte in (0x0D, 0x0A):
            keys.append(ENTER)
        elif byte in (0x7F, 0x08):
            keys.append(BACKSPACE)
        elif 0x20 <= byte < 0x7F:
            keys.append(chr(byte))
        i += 1
    return keys


def _escape(data: bytes, i: int, keys: list[str]) -> int:
    """Decode the escape sequence at data[i] (ESC) into `keys`; returns the index after it."""
    if i + 1 >= len(data) or data[i + 1] not in (ord("["), ord("O")):
        keys.append(ESC)
        return i + 1
    j = i + 2
    while j < len(data) and not 0x40 <= data[j] <= 0x7E:   # parameter bytes, up to the final byte
        j += 1
    if j >= len(data):
        return j                                          # truncated sequence: dropped
    final = chr(data[j])
    if j == i + 2 and final in _ARROWS:
        keys.append(_ARROWS[final])
    return j + 1


def selection(state: ViewState, order: list[str]) -> str | None:
    """The selected topic among `order` (the rows shown, top to bottom): the chosen one if shown,
    else the first row; None when there are no rows."""
    if state.selected in order:
        return state.selected
    return order[0] if order else None


def apply_key(state: ViewState, key: str, order: list[str]) -> ViewState:
    """The view after `key`, with `order` the topic rows shown (top to bottom)."""
    if key == "q":
        return replace(state, quit=True)
    if key in _SORT_BY_KEY:
        return replace(state, sort=_SORT_BY_KEY[key])
    if state.drilled is not None:
        if key in (ESC, BACKSPACE, LEFT):
            return replace(state, drilled=None, selected=state.drilled)
        return state
    current = selection(state, order)
    if key in (UP, "k", DOWN, "j"):
        if current is None:
            return state
        step = -1 if key in (UP, "k") else 1
        index = min(max(order.index(current) + step, 0), len(order) - 1)
        return replace(state, selected=order[index])
    if key in (ENTER, RIGHT) and current is not None:
        return replace(state, selected=current, drilled=current)
    return state

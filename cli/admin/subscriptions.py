"""`strata admin topics ...` subscription commands: pulsar-admin's names and flags over the REST API
(`broker.admin.subscriptions`).

    strata admin topics subscriptions TOPIC
    strata admin topics create-subscription TOPIC -s S [-m latest|earliest|L:E]
    strata admin topics unsubscribe TOPIC -s S [-f]                       (asks first; -y: don't)
    strata admin topics skip TOPIC -s S -n N                              (asks first)
    strata admin topics clear-backlog TOPIC -s S                          (asks first)
    strata admin topics reset-cursor TOPIC -s S (-t 10m | -m L:E|earliest|latest [-e])   (asks first)
    strata admin topics expire-messages TOPIC -s S (-t 100 | -p L:E [-e])                (asks first)
    strata admin topics expire-messages-all-subscriptions TOPIC -t 100                   (asks first)
    strata admin topics peek-messages TOPIC -s S [-n N]
    strata admin topics examine-messages TOPIC [-i latest|earliest] [-m 1]
    strata admin topics get-message-by-id TOPIC -l L -e E

Times are pulsar-admin 3.x's (`cli.admin.units`): a bare `-t 100` is seconds, or `30s 10m 3h 2d 1w`;
`reset-cursor -t 10m` rewinds to ten minutes before now (computed here, as pulsar-admin does).

`peek-messages` asks for one message position per REST call (`.../position/1`, `/2`, ...), as
pulsar-admin does, and splits a batch entry into its messages (each counts towards `-n`), until
`-n` messages are shown or the subscription has no more. Each message is printed with its id
(`L:E`, or `L:E:i` inside a batch), its `X-Pulsar-*` headers (a batch member's are the entry's with
its own partition key and sequence id), properties and payload (text when it
is UTF-8, else a hex dump); `-o json` prints a list of `{"messageId", "headers", "properties",
"payload" (text or null), "payloadBase64"}`.

Progress bars (stderr) on clear-backlog, reset-cursor and expire when the subscription's backlog
is at least PROGRESS_BACKLOG_MIN entries: the call runs in a thread while the subscription's
`msgBacklog` (entries, from topic stats; summed over the partitions of a partitioned topic) is
polled every PROGRESS_POLL_INTERVAL_S. The bar measures that backlog: for clear-backlog and expire,
the entries acked so far out of the backlog at the start; for reset-cursor, the backlog the
subscription has now (a rewind makes it grow; the bar's total follows the largest seen). Polling
stops when the call returns (itself bounded by the client's timeout).
"""

from __future__ import annotations

import argparse
import base64
import json
import string
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cli.admin.commands import Groups, command, destructive, routed, topic_path
from cli.admin.console import AdminConsole
from cli.admin.units import positive_time_seconds
from common.errors import AdminError, AdminNotFound, MalformedPayload
from entries.batch import BatchMessage, parse_batch

PROGRESS_BACKLOG_MIN = 10_000      # entries: smaller backlogs are cleared before a bar could draw
PROGRESS_POLL_INTERVAL_S = 0.2
PEEK_COUNT_MAX = 100_000           # messages one peek-messages may ask for
I64_MAX = 2**63 - 1
_HEX_LINE_BYTES = 16
_KEY_HEADER, _SEQUENCE_HEADER = "X-Pulsar-partition-key", "X-Pulsar-sequence-id"


def message_id(text: str) -> dict[str, int]:
    """`earliest`, `latest` or `L:E` as the MessageIdImpl body pulsar-admin sends (argparse type)."""
    value = text.strip().lower()
    if value == "earliest":
        return {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
    if value == "latest":
        return {"ledgerId": I64_MAX, "entryId": I64_MAX, "partitionIndex": -1}
    ledger, sep, entry = value.partition(":")
    if not sep or not (ledger + entry).isascii() or not ledger.isdigit() or not entry.isdigit():
        raise argparse.ArgumentTypeError(f"bad message id {text!r}: use earliest, latest or LEDGER:ENTRY")
    return {"ledgerId": int(ledger), "entryId": int(entry), "partitionIndex": -1}


def _positive(text: str) -> int:
    if not (text.strip().isascii() and text.strip().isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"bad count {text!r}: a whole number >= 1")
    return int(text)


def _natural(text: str) -> int:
    if not (text.strip().isascii() and text.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"bad id {text!r}: a whole number >= 0")
    return int(text)


def sub_path(topic: str, sub: str) -> str:
    return f"{topic_path(topic)}/subscription/{urllib.parse.quote(sub, safe='')}"


def add_parsers(groups: Groups) -> None:
    topics = groups["topics"]
    command(topics, "subscriptions", _list, "list the subscriptions of a topic").add_argument("topic")
    create = _with_sub(command(topics, "create-subscription", routed(
        lambda a: ("PUT", sub_path(a.topic, a.subscription), a.message_id)), "create a subscription"))
    create.add_argument("-m", "--messageId", dest="message_id", type=message_id, default=message_id("latest"),
                        help="where it starts: latest (default), earliest or LEDGER:ENTRY")
    unsubscribe = _with_sub(destructive(command(topics, "unsubscribe", _unsubscribe, "delete a subscription")))
    unsubscribe.add_argument("-f", "--force", action="store_true", help="disconnect its consumers first")
    skip = _with_sub(destructive(command(topics, "skip", _skip, "skip the next N messages")))
    skip.add_argument("-n", "--count", type=_positive, required=True)
    _with_sub(destructive(command(topics, "clear-backlog", _clear_backlog, "skip every message")))
    _reset_and_expire(topics)
    peek = _with_sub(command(topics, "peek-messages", _peek, "show the next messages without consuming"))
    peek.add_argument("-n", "--count", type=_positive, default=1)
    examine = command(topics, "examine-messages", _examine, "show the n-th message from the start or end")
    examine.add_argument("topic")
    examine.add_argument("-i", "--initialPosition", dest="initial", choices=("latest", "earliest"), default="latest")
    examine.add_argument("-m", "--messagePosition", dest="position", type=_positive, default=1)
    by_id = command(topics, "get-message-by-id", _get_by_id, "show the message at LEDGER:ENTRY")
    by_id.add_argument("topic")
    by_id.add_argument("-l", "--ledgerId", dest="ledger", type=_natural, required=True)
    by_id.add_argument("-e", "--entryId", dest="entry", type=_natural, required=True)


def _with_sub(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("topic")
    parser.add_argument("-s", "--subscription", required=True)
    return parser


def _reset_and_expire(topics: argparse._SubParsersAction) -> None:
    reset = _with_sub(destructive(command(topics, "reset-cursor", _reset_cursor, "move a subscription back or on")))
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("-t", "--time", type=positive_time_seconds,
                       help="to this long before now (seconds, or 10m/3h/2d)")
    where.add_argument("-m", "--messageId", dest="message_id", type=message_id,
                       help="to LEDGER:ENTRY, earliest or latest")
    reset.add_argument("-e", "--exclude-reset-position", dest="exclude", action="store_true",
                       help="start after the message id, not at it")
    expire = _with_sub(destructive(command(topics, "expire-messages", _expire, "ack messages older than a time")))
    when = expire.add_mutually_exclusive_group(required=True)
    when.add_argument("-t", "--expireTime", dest="time", type=positive_time_seconds,
                      help="older than this (seconds, or 10m/3h/2d)")
    when.add_argument("-p", "--position", dest="message_id", type=message_id, help="up to LEDGER:ENTRY")
    expire.add_argument("-e", "--exclude-reset-position", dest="exclude", action="store_true",
                        help="not the message at --position itself")
    everyone = destructive(command(topics, "expire-messages-all-subscriptions", _expire_all,
                                   "ack messages older than a time on every subscription"))
    everyone.add_argument("topic")
    everyone.add_argument("-t", "--expireTime", dest="time", type=positive_time_seconds, required=True,
                          help="older than this (seconds, or 10m/3h/2d)")


def _list(args: argparse.Namespace, client: AdminConsole) -> int:
    client.show(client.call("GET", topic_path(args.topic) + "/subscriptions"), title="subscription")
    return 0


# --- commands that move a cursor ------------------------------------------------------------------

def _unsubscribe(args: argparse.Namespace, client: AdminConsole) -> int:
    client.confirm(f"Delete subscription {args.subscription} of {args.topic} and its position?")
    client.call("DELETE", sub_path(args.topic, args.subscription), query={"force": "true"} if args.force else None)
    return 0


def _skip(args: argparse.Namespace, client: AdminConsole) -> int:
    client.confirm(f"Skip {args.count} messages of subscription {args.subscription} on {args.topic}?")
    client.call("POST", f"{sub_path(args.topic, args.subscription)}/skip/{args.count}")
    return 0


def _clear_backlog(args: argparse.Namespace, client: AdminConsole) -> int:
    client.confirm(f"Skip every message of subscription {args.subscription} on {args.topic}?")
    _with_progress(client, args.topic, [args.subscription], "clearing backlog", rewind=False,
                   run=lambda: client.call("POST", f"{sub_path(args.topic, args.subscription)}/skip_all"))
    return 0


def _reset_cursor(args: argparse.Namespace, client: AdminConsole) -> int:
    path = sub_path(args.topic, args.subscription) + "/resetcursor"
    if args.time is not None:
        path += f"/{int(time.time() * 1000) - args.time * 1000}"
        body: object = None
    else:
        body = {**args.message_id, "batchIndex": -1, "isExcluded": bool(args.exclude)}
    client.confirm(f"Move subscription {args.subscription} of {args.topic}? Its consumers reconnect.")
    _with_progress(client, args.topic, [args.subscription], "resetting cursor", rewind=True,
                   run=lambda: client.call("POST", path, body))
    return 0


def _expire(args: argparse.Namespace, client: AdminConsole) -> int:
    path = sub_path(args.topic, args.subscription) + "/expireMessages"
    if args.time is not None:
        path += f"/{args.time}"
        body: object = None
    else:
        body = {**args.message_id, "batchIndex": -1, "isExcluded": bool(args.exclude)}
    client.confirm(f"Acknowledge old messages of subscription {args.subscription} on {args.topic}?")
    _with_progress(client, args.topic, [args.subscription], "expiring", rewind=False,
                   run=lambda: client.call("POST", path, body))
    return 0


def _expire_all(args: argparse.Namespace, client: AdminConsole) -> int:
    client.confirm(f"Acknowledge messages older than {args.time} s on every subscription of {args.topic}?")
    path = f"{topic_path(args.topic)}/all_subscription/expireMessages/{args.time}"
    _with_progress(client, args.topic, None, "expiring", rewind=False, run=lambda: client.call("POST", path))
    return 0


def subscription_backlog(client: AdminConsole, topic: str, subs: list[str] | None, partitioned: bool) -> int:
    """msgBacklog of `subs` (every subscription when None), from (partitioned) topic stats."""
    suffix = "/partitioned-stats?perPartition=false" if partitioned else "/stats"
    stats = client.call("GET", topic_path(topic) + suffix) or {}
    found = stats.get("subscriptions") or {}
    return sum(int(s.get("msgBacklog", 0)) for name, s in found.items() if subs is None or name in subs)


def _with_progress(client: AdminConsole, topic: str, subs: list[str] | None, description: str, *,
                   rewind: bool, run: Callable[[], object]) -> object:
    """`run()` (the REST call), with a bar over the subscriptions' backlog when it is big (see
    the module docstring for what the bar measures)."""
    try:
        partitioned = bool((client.call("GET", topic_path(topic) + "/partitions") or {}).get("partitions"))
        before = subscription_backlog(client, topic, subs, partitioned)
    except (AdminError, ValueError):
        before = 0          # no stats: no bar; the call itself says what is wrong
    if before < PROGRESS_BACKLOG_MIN:
        return run()
    with ThreadPoolExecutor(max_workers=1) as pool, client.progress(description, before) as update:
        future = pool.submit(run)
        largest = before
        while True:
            try:
                future.result(timeout=PROGRESS_POLL_INTERVAL_S)
                break
            except TimeoutError:
                pass
            try:
                now = subscription_backlog(client, topic, subs, partitioned)
            except (AdminError, ValueError):
                continue
            largest = max(largest, now)
            if rewind:
                update(now, largest)
            else:
                update(max(0, before - now))
        return future.result()


# --- commands that read messages ----------------------------------------------------------------------

def _peek(args: argparse.Namespace, client: AdminConsole) -> int:
    shown: list[dict[str, Any]] = []
    position = 1
    while len(shown) < min(args.count, PEEK_COUNT_MAX):
        try:
            raw, headers = client.call_raw("GET", f"{sub_path(args.topic, args.subscription)}/position/{position}")
        except AdminNotFound:
            if shown:
                break                       # no more messages: show what there is
            raise
        shown.extend(split_entry(raw, headers)[:args.count - len(shown)])
        position += 1
    _print_messages(client, shown)
    return 0


def _examine(args: argparse.Namespace, client: AdminConsole) -> int:
    raw, headers = client.call_raw("GET", topic_path(args.topic) + "/examinemessage",
                                   query={"initialPosition": args.initial, "messagePosition": str(args.position)})
    _print_messages(client, split_entry(raw, headers))
    return 0


def _get_by_id(args: argparse.Namespace, client: AdminConsole) -> int:
    raw, headers = client.call_raw("GET", f"{topic_path(args.topic)}/ledger/{args.ledger}/entry/{args.entry}")
    _print_messages(client, split_entry(raw, headers))
    return 0


def split_entry(raw: bytes, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The messages of one peek/examine answer: a batch is split into its members (pulsar-admin's
    `L:E:i` ids, each member's own properties), a plain message is one."""
    pulsar = {k: v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}
    entry_id = _header(headers, "X-Pulsar-Message-ID") or "?"
    properties = json.loads(_header(headers, "X-Pulsar-PROPERTY") or "{}")
    batch = _header(headers, "X-Pulsar-num-batch-message")
    if batch is None:
        return [_message(entry_id, pulsar, properties, raw)]
    try:
        members = parse_batch(raw, int(batch))
    except (MalformedPayload, ValueError):
        return [_message(entry_id, pulsar, properties, raw)]    # shown whole rather than not at all
    return [_message(f"{entry_id}:{i}", _member_headers(pulsar, m), dict(m.properties), m.payload)
            for i, m in enumerate(members)]


def _member_headers(headers: dict[str, str], member: BatchMessage) -> dict[str, str]:
    """A batch member's headers: the entry's, but its own key and sequence id (the entry's headers
    carry the first member's, which a later member shown under them would wrongly claim)."""
    own = {_KEY_HEADER: member.partition_key,
           _SEQUENCE_HEADER: None if member.sequence_id is None else str(member.sequence_id)}
    out = {k: v for k, v in headers.items() if k.lower() not in {name.lower() for name in own}}
    out.update({name: value for name, value in own.items() if value is not None})
    return out


def _header(headers: dict[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def _message(message_id: str, headers: dict[str, str], properties: dict, payload: bytes) -> dict[str, Any]:
    try:
        text: str | None = payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"messageId": message_id, "headers": headers, "properties": properties, "payload": text,
            "payloadBase64": base64.b64encode(payload).decode()}


def _print_messages(client: AdminConsole, messages: list[dict[str, Any]]) -> None:
    if client.output == "json":
        client.show(messages)
        return
    for number, msg in enumerate(messages, 1):
        print(f"Message ID: {msg['messageId']}")
        for key, value in sorted(msg["headers"].items()):
            print(f"  {key}: {value}")
        if msg["properties"]:
            print(f"  Properties: {json.dumps(msg['properties'], sort_keys=True)}")
        payload = base64.b64decode(msg["payloadBase64"])
        text = msg["payload"]
        if text is not None and all(c in string.printable for c in text):
            print(text)
        else:
            print(hex_dump(payload))
        if number < len(messages):
            print("-" * 40)


def hex_dump(data: bytes) -> str:
    """Offset, hex and printable ASCII, 16 bytes a line (as pulsar-admin's hexdump)."""
    lines = []
    for offset in range(0, len(data), _HEX_LINE_BYTES):
        chunk = data[offset:offset + _HEX_LINE_BYTES]
        ascii_part = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}  {chunk.hex(' '):<{_HEX_LINE_BYTES * 3}} |{ascii_part}|")
    return "\n".join(lines)


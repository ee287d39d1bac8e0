"""Topic lists for multi-topic and pattern consumers: GET_TOPICS_OF_NAMESPACE and topic-list watchers.

GET_TOPICS_OF_NAMESPACE (`get_topics_of_namespace`) answers the topics of a namespace, partitions
named `<topic>-partition-N` (the client strips the suffix):
- `mode` PERSISTENT (default) lists the persistent topics recorded under `/topics` (every topic
  and partition ever created, `broker.records.policies.register_topic`); NON_PERSISTENT lists the live
  non-persistent topics this broker serves (`front.non_persistent.names(tenant, ns)`,
  `broker.nonpersistent.topic`: they live in memory only); ALL lists both.
- `topics_pattern` filters on the broker, as Pulsar's `TopicList.filterTopics`: the pattern loses
  its domain prefix (`persistent://`, `non-persistent://`, as `removeTopicDomainScheme`) and must
  match ALL of the topic's name without its domain and without the partition suffix
  (`t/ns/orders-1`). The answer then says `filtered=true`. A pattern longer than
  `broker_subscription_pattern_length_max` is not applied (Pulsar's `subscriptionPatternMaxLength`):
  the whole list goes back with `filtered=false`, and the client filters. A pattern that does not
  compile is refused with ERROR (InvalidTopicsPattern: Pulsar answers such a failure of the
  listing as MetadataError) whose message names the pattern and the reason.
- `topics_hash` is Pulsar's `TopicList.calculateHash`: CRC32C over the sorted names joined by
  `,` (UTF-8), printed as Guava's `HashCode.toString()` (the 4 bytes little-endian, in hex). When
  the client sends the hash it already has and it matches, the answer is `changed=false` with no
  topics.

Watchers (PIP-145; WATCH_TOPIC_LIST / _SUCCESS / WATCH_TOPIC_UPDATE / WATCH_TOPIC_LIST_CLOSE):
a watcher holds the persistent topics of one namespace that match its pattern (as Pulsar's
TopicListWatcher, persistent topics only). WATCH_TOPIC_LIST_SUCCESS carries them and their hash
(no topics if the client's `topics_hash` matches); then every create or delete of a matching
topic (partition) sends WATCH_TOPIC_UPDATE with the new hash. Changes come from one metadata-store
watch on `/topics` per broker (`TopicListRegistry`), so a watcher on any broker of a cluster sees
topics created through any other, within the store's watch delay (about 0.1 s). A watcher is
registered before its initial list is read and buffers events until then, so no change between
the read and the subscription is lost; applying them after the read is idempotent (add/remove).
Past `_BUFFERED_CHANGES_MAX` buffered changes the request fails with ServiceNotReady (retried).
WATCH_TOPIC_LIST_CLOSE answers SUCCESS (as Pulsar); a connection's watchers go when it closes.
Authorization is checked on every WATCH_TOPIC_LIST, a repeated one too; a watcher whose role loses
its grant is dropped by `broker.protocol.revocation` (no more updates).
At most `broker_topic_list_watchers_per_connection_max` watchers per connection
(TooManyTopicListWatchers beyond).

What must hold: an update is sent only after the watcher's SUCCESS, and only when its topic set
changed; nothing is written to a closed connection (`conn.write` drops it); no watcher outlives
its connection.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from crc32c import crc32c

from broker.records import policies
from common.errors import InvalidTopicsPattern, ServiceNotReady, TooManyTopicListWatchers
from common.topic_names import TOPICS_ROOT, parse_namespace
from metadata.api import AsyncStore, EventKind, Watch, WatchEvent
from proto import pulsar_api_pb2 as pb
from wire.pulsar import (
    encode_get_topics_of_namespace_response,
    encode_success,
    encode_watch_topic_list_success,
    encode_watch_topic_update,
)

if TYPE_CHECKING:
    from broker.protocol.connection import ServerConnection
    from broker.protocol.frontend import FrontEnd

log = logging.getLogger(__name__)

_MODE = pb.CommandGetTopicsOfNamespace
_PARTITION_SUFFIX = re.compile(r"-partition-\d+$")
_DOMAINS = ("non-persistent", "persistent")   # longest first: "persistent" ends "non-persistent"
_BUFFERED_CHANGES_MAX = 10_000   # changes a new watcher holds while its list is read; more: retry


# --- names, patterns, hashes ----------------------------------------------------------------------

def calculate_hash(topics: list[str]) -> str:
    """Pulsar's TopicList.calculateHash: CRC32C of the sorted names joined by ',', as Guava prints it."""
    crc = crc32c(",".join(sorted(topics)).encode())
    return crc.to_bytes(4, "little").hex()


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The pattern without its domain prefix, compiled; InvalidTopicsPattern if it cannot be."""
    text = pattern
    if "://" in pattern:
        prefix, _, rest = pattern.partition("://")
        for domain in _DOMAINS:
            if prefix.endswith(domain):
                prefix = prefix[:-len(domain)]
                break
        else:
            raise InvalidTopicsPattern(f"topics pattern {pattern!r}: unknown topic domain {prefix!r} "
                                       "(persistent or non-persistent)", pattern=pattern)
        text = prefix + rest
    try:
        return re.compile(text)
    except re.error as exc:
        raise InvalidTopicsPattern(f"topics pattern {pattern!r} does not compile: {exc}",
                                   pattern=pattern) from None


def matches(compiled: re.Pattern[str], topic: str) -> bool:
    """Whether `topic` (full name, maybe a partition) matches, as Pulsar's TopicList.filterTopics."""
    without_domain = topic.partition("://")[2]
    return compiled.fullmatch(_PARTITION_SUFFIX.sub("", without_domain)) is not None


def filter_topics(topics: list[str], compiled: re.Pattern[str]) -> list[str]:
    return [t for t in topics if matches(compiled, t)]


# --- GET_TOPICS_OF_NAMESPACE ------------------------------------------------------------------------

async def namespace_topics(front: FrontEnd, tenant: str, namespace: str, mode: int) -> list[str]:
    """Sorted full names of the namespace's topics (partitions included) of the given mode;
    NamespaceNotFound if the namespace does not exist."""
    names: list[str] = []
    if mode in (_MODE.PERSISTENT, _MODE.ALL):
        names.extend(await front.service.topics_of_namespace(tenant, namespace))
    else:
        await front.namespaces.require(tenant, namespace)
    if mode in (_MODE.NON_PERSISTENT, _MODE.ALL):
        names.extend(await _non_persistent_topics(front, tenant, namespace))
    return sorted(names)


async def _non_persistent_topics(front: FrontEnd, tenant: str, namespace: str) -> list[str]:
    """The live non-persistent topics this broker serves (`broker.nonpersistent.topic`)."""
    return [str(name) for name in front.non_persistent.names(tenant, namespace)]


async def get_topics_of_namespace(conn: ServerConnection, cmd: pb.CommandGetTopicsOfNamespace) -> None:
    """Answer GET_TOPICS_OF_NAMESPACE (see the module docstring)."""
    tenant, namespace = parse_namespace(cmd.namespace)
    await conn.front.authorization.check_namespace(conn.role, tenant, namespace)   # before any read
    topics = await namespace_topics(conn.front, tenant, namespace, cmd.mode)
    filtered = False
    if cmd.HasField("topics_pattern") and \
            len(cmd.topics_pattern) <= conn.config.broker_subscription_pattern_length_max:
        topics = filter_topics(topics, compile_pattern(cmd.topics_pattern))
        filtered = True
    topics_hash = calculate_hash(topics)
    changed = not (cmd.HasField("topics_hash") and cmd.topics_hash == topics_hash)
    conn.write(encode_get_topics_of_namespace_response(
        cmd.request_id, topics if changed else [], filtered=filtered, topics_hash=topics_hash,
        changed=changed))


# --- watchers ---------------------------------------------------------------------------------------

class TopicListWatcher:
    """One client's watcher: the matching persistent topics of a namespace, kept current."""

    def __init__(self, conn: ServerConnection, watcher_id: int, tenant: str, namespace: str,
                 compiled: re.Pattern[str]) -> None:
        self.conn = conn
        self.watcher_id = watcher_id
        self.tenant = tenant
        self.namespace = namespace
        self.compiled = compiled
        self.topics: set[str] = set()
        self.live = False                                   # SUCCESS was sent; updates flow
        self._buffered: list[tuple[str, bool]] = []         # (topic, created) before live
        self.overflowed = False                             # more than _BUFFERED_CHANGES_MAX came

    def on_change(self, topic: str, created: bool) -> None:
        if not matches(self.compiled, topic):
            return
        if not self.live:
            if len(self._buffered) < _BUFFERED_CHANGES_MAX:
                self._buffered.append((topic, created))
            else:
                self.overflowed = True
            return
        if self._apply(topic, created):
            new, deleted = ([topic], []) if created else ([], [topic])
            self.conn.write(encode_watch_topic_update(self.watcher_id, new, deleted,
                                                      calculate_hash(list(self.topics))))

    def _apply(self, topic: str, created: bool) -> bool:
        """Add or remove `topic`; True if the set changed."""
        if created == (topic in self.topics):
            return False
        if created:
            self.topics.add(topic)
        else:
            self.topics.discard(topic)
        return True

    def go_live(self, initial: list[str]) -> None:
        """Start from the list read after registering, plus the changes seen meanwhile."""
        self.topics = set(filter_topics(initial, self.compiled))
        for topic, created in self._buffered:
            self._apply(topic, created)
        self._buffered.clear()
        self.live = True


class TopicListRegistry:
    """Every watcher of this broker, fed by one metadata-store watch on `/topics`."""

    def __init__(self, astore: AsyncStore) -> None:
        self._astore = astore
        self._by_namespace: dict[tuple[str, str], set[TopicListWatcher]] = {}
        self._by_connection: dict[ServerConnection, dict[int, TopicListWatcher]] = {}
        self._watch: Watch | None = None
        self._stopped = False

    def watchers_of(self, conn: ServerConnection) -> dict[int, TopicListWatcher]:
        return self._by_connection.get(conn, {})

    async def _ensure_watch(self) -> None:
        if self._watch is None:
            watch = await self._astore.watch(TOPICS_ROOT, self._on_event)
            if self._watch is not None or self._stopped:   # another caller won, or stopped meanwhile
                watch.cancel()
            else:
                self._watch = watch

    def _on_event(self, event: WatchEvent) -> None:
        if event.kind is EventKind.UPDATED:
            return
        parts = event.path[len(TOPICS_ROOT) + 1:].split("/")
        if len(parts) != 3:
            return
        tenant, namespace, local = parts
        topic = f"persistent://{tenant}/{namespace}/{local}"
        for watcher in list(self._by_namespace.get((tenant, namespace), ())):
            watcher.on_change(topic, event.kind is EventKind.CREATED)

    async def add(self, watcher: TopicListWatcher) -> None:
        await self._ensure_watch()
        per_conn = self._by_connection.setdefault(watcher.conn, {})
        per_conn[watcher.watcher_id] = watcher
        self._by_namespace.setdefault((watcher.tenant, watcher.namespace), set()).add(watcher)

    def remove(self, watcher: TopicListWatcher) -> None:
        per_conn = self._by_connection.get(watcher.conn)
        if per_conn is not None and per_conn.get(watcher.watcher_id) is watcher:
            del per_conn[watcher.watcher_id]
            if not per_conn:
                del self._by_connection[watcher.conn]
        key = (watcher.tenant, watcher.namespace)
        of_ns = self._by_namespace.get(key)
        if of_ns is not None:
            of_ns.discard(watcher)
            if not of_ns:
                del self._by_namespace[key]

    def release(self, conn: ServerConnection) -> None:
        for watcher in list(self._by_connection.get(conn, {}).values()):
            self.remove(watcher)

    def count(self) -> int:
        return sum(len(w) for w in self._by_namespace.values())

    def all(self) -> list[TopicListWatcher]:
        """Every watcher (a snapshot; `broker.protocol.revocation` drops those whose grant went)."""
        return [w for of_ns in self._by_namespace.values() for w in of_ns]

    def stop(self) -> None:
        self._stopped = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._by_namespace.clear()
        self._by_connection.clear()


async def watch_topic_list(conn: ServerConnection, cmd: pb.CommandWatchTopicList) -> None:
    """Create a watcher and answer WATCH_TOPIC_LIST_SUCCESS with its topics and hash."""
    registry = conn.front.topic_lists
    tenant, namespace = parse_namespace(cmd.namespace)
    await conn.front.authorization.check_namespace(conn.role, tenant, namespace)   # before any read
    existing = registry.watchers_of(conn).get(cmd.watcher_id)
    if existing is not None:   # the client asked again for the same watcher: the same answer
        _write_success(conn, cmd, sorted(existing.topics))
        return
    watchers_max = conn.config.broker_topic_list_watchers_per_connection_max
    if len(registry.watchers_of(conn)) >= watchers_max:
        raise TooManyTopicListWatchers(
            f"this connection already has {watchers_max} topic-list watchers "
            "(broker_topic_list_watchers_per_connection_max)", watchers_max=watchers_max)
    watcher = TopicListWatcher(conn, cmd.watcher_id, tenant, namespace, compile_pattern(cmd.topics_pattern))
    await conn.front.namespaces.require(tenant, namespace)
    await registry.add(watcher)
    try:
        names = await policies.topics_of_namespace(conn.front.ctx.astore, tenant, namespace)
    except BaseException:
        registry.remove(watcher)
        raise
    if _closed(conn):   # closed meanwhile (maybe before add: release() had nothing to drop)
        registry.remove(watcher)
        return
    if registry.watchers_of(conn).get(cmd.watcher_id) is not watcher:
        return   # the client closed it meanwhile
    if watcher.overflowed:
        registry.remove(watcher)
        raise ServiceNotReady("the topic list changed too often while the watcher was being created",
                              namespace=cmd.namespace)
    watcher.go_live([str(n) for n in names])
    _write_success(conn, cmd, sorted(watcher.topics))


def _closed(conn: ServerConnection) -> bool:
    return conn.transport is None or conn.transport.is_closing()


def _write_success(conn: ServerConnection, cmd: pb.CommandWatchTopicList, topics: list[str]) -> None:
    topics_hash = calculate_hash(topics)
    unchanged = cmd.HasField("topics_hash") and cmd.topics_hash == topics_hash
    conn.write(encode_watch_topic_list_success(cmd.request_id, cmd.watcher_id,
                                               [] if unchanged else topics, topics_hash))


def close_watcher(conn: ServerConnection, cmd: pb.CommandWatchTopicListClose) -> None:
    """WATCH_TOPIC_LIST_CLOSE: drop the watcher (if any) and answer SUCCESS, as Pulsar."""
    registry = conn.front.topic_lists
    watcher = registry.watchers_of(conn).get(cmd.watcher_id)
    if watcher is not None:
        registry.remove(watcher)
    conn.write(encode_success(cmd.request_id))


def release(conn: ServerConnection) -> None:
    """The connection closed: its watchers go."""
    conn.front.topic_lists.release(conn)

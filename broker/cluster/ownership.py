"""Bundle ownership: which broker serves which namespace bundle, and the lookup decision.

A bundle is owned through an ephemeral key `/namespace/<t>/<ns>/<0xLO_0xHI>` (Pulsar's path)
holding NamespaceEphemeralData `{"nativeUrl", "nativeUrlTls", "httpUrl", "disabled", ...}` and bound to the
owner's metadata session: it goes when the owner stops, or within the lease when it dies.
Creating it is the compare-and-set that makes one broker the owner; a broker serves a topic only
while it holds the key of the topic's bundle (`check_owned`, called before a topic is loaded).

Lookup (`resolve`), for a topic's bundle:
- owned by us: Connect to us; owned by a live broker: Connect to it (authoritative);
- owned, but `disabled` (its owner is unloading it) or the owner refuses connections (it died;
  its key stays until the lease runs out): wait for the key to go, at most
  `broker_lookup_owner_wait_ms`, then treat it as unowned. Waiting here, rather than sending the
  client to retry with its growing back-off, is what keeps failover at about lease + 1 s;
- unowned: the assignment hint left by an unload, if its broker is live, else the least-loaded
  live broker (`placement`). Us: acquire and Connect. Another: Redirect there with
  authoritative=true, and that broker acquires when the authoritative lookup arrives.

Unloading (`unload`) is graceful: the key is first marked `disabled` (lookups anywhere wait), the
bundle's topics are closed (cursors flushed, ledgers closed; clients get CLOSE_PRODUCER /
CLOSE_CONSUMER and look up again), then the key is deleted, so the next owner never races the
old one. A destination (given, or the least-loaded other broker) is left as a hint.

Losing the lease (`drop_all`): every bundle stops being served at once; the keys are not touched
(writes are refused anyway): they are still ours if the lease comes back, or gone with the session.

What must hold: at most one broker holds a bundle's key; this broker serves a topic only while its
`_mine` holds the topic's bundle; a bundle being released accepts no new producer or consumer.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from broker.cluster import listeners as listeners_mod
from broker.cluster import placement
from broker.records import bundles as bundle_math
from broker.records.bundles import BundleRange, NamespaceBundles
from common.errors import (
    AlreadyExists,
    BadVersion,
    BundleNotOwned,
    InvalidBundle,
    NoOwner,
    NotFound,
    OwnedElsewhere,
    StrataError,
)
from common.topic_names import TopicName
from metadata.api import EventKind, Versioned, Watch, WatchEvent

if TYPE_CHECKING:
    from broker.cluster.identity import BrokerIdentity
    from broker.cluster.registry import BrokerInfo, BrokerRegistry
    from broker.context import BrokerContext
    from broker.nonpersistent.topic import NonPersistentTopics
    from broker.records.tenancy import NamespaceCache
    from broker.topics.loaded import LoadedTopics
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

NAMESPACE_ROOT = "/namespace"
HINTS_ROOT = "/loadbalance/assignment-hints"
HINT_TTL_MS = 30_000             # an unload's destination hint is honoured this long
PROBE_TIMEOUT_S = 0.5            # a connect to a possibly dead owner
PROBE_CACHE_S = 0.5
_WAIT_POLL_S = 0.25              # a waiting lookup re-reads the key at least this often
UNLOAD_TOPIC_CLOSE_S = 10.0      # closing one topic while unloading


def ownership_path(tenant: str, namespace: str, bundle: BundleRange) -> str:
    return f"{NAMESPACE_ROOT}/{tenant}/{namespace}/{bundle.key}"


def _split_path(path: str) -> tuple[str, str, BundleRange] | None:
    parts = path[len(NAMESPACE_ROOT) + 1:].split("/")
    if len(parts) != 3:
        return None
    try:
        return parts[0], parts[1], bundle_math.parse_bundle(parts[2])
    except InvalidBundle:
        return None


@dataclass(frozen=True)
class OwnerInfo:
    native_url: str
    http_url: str
    mine: bool
    disabled: bool = False
    # its advertised listeners, from its ownership record (broker.cluster.listeners; none: {})
    listeners: Mapping[str, listeners_mod.Listener] = field(default_factory=dict, compare=False)
    native_url_tls: str = ""     # its pulsar+ssl:// URL ('' : it serves no TLS port)


class LookupKind(enum.Enum):
    CONNECT = "connect"
    REDIRECT = "redirect"


@dataclass(frozen=True)
class LookupAnswer:
    kind: LookupKind
    native_url: str
    http_url: str
    authoritative: bool
    # the advertised listeners of the broker answered (a lookup naming one answers its URL)
    listeners: Mapping[str, listeners_mod.Listener] = field(default_factory=dict, compare=False)
    native_url_tls: str = ""     # its pulsar+ssl:// URL ('' : none), LOOKUP_RESPONSE's brokerServiceUrlTls


TLS_SCHEME = "pulsar+ssl://"


def broker_urls(answer: LookupAnswer, listener_name: str) -> tuple[str, str]:
    """(pulsar URL, pulsar+ssl URL) a lookup answers: the broker's own service URL and TLS URL ('' :
    it serves no such port; a broker with only a TLS port is known by its TLS URL), or with a
    listener name that listener's URLs (UnknownListener if the broker has no such listener)."""
    if not listener_name:
        plain = "" if answer.native_url.startswith(TLS_SCHEME) else answer.native_url
        return plain, answer.native_url_tls
    listener = listeners_mod.choose(answer.listeners, listener_name)
    return listener.pulsar_url, listener.pulsar_tls_url


def _decode_owner(raw: bytes | None) -> tuple[str, str, bool] | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode())
        return str(data["nativeUrl"]), str(data.get("httpUrl", "")), bool(data.get("disabled", False))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _decode_extras(raw: bytes) -> tuple[dict[str, listeners_mod.Listener], str]:
    """(advertised listeners, nativeUrlTls) of an ownership record ({} and '' when absent)."""
    try:
        data = json.loads(raw.decode())
    except ValueError:
        return {}, ""
    if not isinstance(data, dict):
        return {}, ""
    url_tls = data.get("nativeUrlTls")
    return listeners_mod.decode(data.get("advertisedListeners")), url_tls if isinstance(url_tls, str) else ""


class Ownership:
    def __init__(self, ctx: BrokerContext, identity: BrokerIdentity, registry: BrokerRegistry,
                 namespaces: NamespaceCache, loaded: LoadedTopics, non_persistent: NonPersistentTopics) -> None:
        self._ctx = ctx
        self._astore = ctx.astore
        self._config = ctx.config
        self._identity = identity
        self._registry = registry
        self._namespaces = namespaces
        self._loaded = loaded                  # the persistent topics this broker serves: closed on unload
        self._non_persistent = non_persistent  # and the non-persistent ones
        self.draining = False                  # stopping: acquire nothing more, send lookups elsewhere
        self._bundles: dict[tuple[str, str], NamespaceBundles] = {}
        self._view: dict[str, tuple[str, str, bool]] = {}      # every ownership key: (native, http, disabled)
        self._mine: dict[str, int] = {}                         # our keys -> version
        self._releasing: set[str] = set()
        self._provisional: dict[str, tuple[str, float]] = {}    # redirected, not yet acquired: (url, until)
        self._gone: dict[str, asyncio.Event] = {}               # waiting lookups, woken when a key goes
        self._probes: dict[str, tuple[bool, float]] = {}        # url -> (reachable, monotonic when)
        self._watches: list[Watch] = []

    # --- state -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._watches.append(await self._astore.watch(NAMESPACE_ROOT, self._owner_changed))
        self._watches.append(await self._astore.watch(bundle_math.LOCAL_POLICIES_ROOT, self._bundles_changed))
        for path, versioned in await self._astore.list_prefix(NAMESPACE_ROOT):
            owner = _decode_owner(versioned.value)
            if owner is not None:
                self._view[path] = owner

    def stop(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()

    def _owner_changed(self, event: WatchEvent) -> None:
        if event.kind is EventKind.DELETED:
            self._view.pop(event.path, None)
            waiting = self._gone.get(event.path)
            if waiting is not None:
                waiting.set()
            if event.path in self._mine and event.path not in self._releasing:
                self._ctx.spawn(self._check_lost(event.path))
            return
        owner = _decode_owner(event.value)
        if owner is not None:
            self._view[event.path] = owner
            self._provisional.pop(event.path, None)

    def _bundles_changed(self, event: WatchEvent) -> None:
        rest = event.path[len(bundle_math.LOCAL_POLICIES_ROOT) + 1:].split("/")
        if len(rest) == 2:
            self._bundles.pop((rest[0], rest[1]), None)

    def owned(self) -> list[tuple[str, str, BundleRange]]:
        out = []
        for path in self._mine:
            parsed = _split_path(path)
            if parsed is not None:
                out.append(parsed)
        return sorted(out)

    def view_items(self) -> list[tuple[str, tuple[str, str, bool]]]:
        """Every ownership key this broker knows of: (path, (nativeUrl, httpUrl, disabled))."""
        return list(self._view.items())

    def owner_counts(self) -> dict[str, int]:
        """Bundles per broker service URL, as the view (plus recent redirects) has them."""
        counts: dict[str, int] = {}
        for native, _, _ in self._view.values():
            counts[native] = counts.get(native, 0) + 1
        now = time.monotonic()
        for path, (url, until) in list(self._provisional.items()):
            if until < now:
                del self._provisional[path]
            elif path not in self._view:
                counts[url] = counts.get(url, 0) + 1
        return counts

    # --- bundles -------------------------------------------------------------------------------------

    async def namespace_bundles(self, tenant: str, namespace: str) -> NamespaceBundles:
        cached = self._bundles.get((tenant, namespace))
        if cached is None:
            cached = await bundle_math.load_bundles(self._astore, tenant, namespace,
                                                    self._config.broker_default_namespace_bundles)
            self._bundles[(tenant, namespace)] = cached
        return cached

    async def bundle_of(self, name: TopicName) -> BundleRange:
        return (await self.namespace_bundles(name.tenant, name.namespace)).find(str(name))

    def _me(self) -> OwnerInfo:
        return OwnerInfo(self._identity.service_url, self._identity.web_url, True,
                         listeners=self._identity.listeners.by_name, native_url_tls=self._identity.service_url_tls)

    def _record(self, me: OwnerInfo, *, disabled: bool) -> bytes:
        """Our ownership record: NamespaceEphemeralData, with our advertised listeners."""
        return json.dumps({"nativeUrl": me.native_url, "nativeUrlTls": me.native_url_tls, "httpUrl": me.http_url,
                           "httpUrlTls": self._identity.web_url_tls, "disabled": disabled,
                           "advertisedListeners": self._identity.listeners.to_json()}).encode()

    # --- owning --------------------------------------------------------------------------------------

    async def owner_of(self, path: str) -> OwnerInfo | None:
        """The owner recorded in the store (not the view), or None."""
        found = await self._astore.get(path)
        return self._owner_from(path, found)

    def _owner_from(self, path: str, found: Versioned | None) -> OwnerInfo | None:
        if found is None:
            return None
        decoded = _decode_owner(found.value)
        if decoded is None:
            return None
        native, http, disabled = decoded
        mine = found.ephemeral_owner == self._astore.session_id
        if mine and path not in self._mine and path not in self._releasing:
            self._mine[path] = found.version      # ours from before a lapse of the lease
        owner_listeners, url_tls = _decode_extras(found.value)
        return OwnerInfo(native, http, mine, disabled, owner_listeners, url_tls)

    async def acquire(self, tenant: str, namespace: str, bundle: BundleRange) -> OwnerInfo:
        """Own the bundle if nobody does; the owner (us or the winner) either way."""
        path = ownership_path(tenant, namespace, bundle)
        me = self._me()
        value = self._record(me, disabled=False)
        if self.draining:
            raise BundleNotOwned("this broker is stopping", bundle=f"{tenant}/{namespace}/{bundle.key}")
        for _ in range(3):
            if path in self._mine and path not in self._releasing:
                return me
            try:
                self._mine[path] = await self._astore.create(path, value, ephemeral=True)
                self._view[path] = (me.native_url, me.http_url, False)
                log.info("acquired bundle %s/%s/%s", tenant, namespace, bundle.key)
                return me
            except AlreadyExists:
                found = await self._astore.get(path)
            owner = self._owner_from(path, found)
            if owner is None:
                continue
            if owner.mine or owner.native_url != me.native_url:
                return owner
            try:   # our previous incarnation's key (same address, older session): take it over
                await self._astore.delete(path, expected_version=found.version if found else None)
            except (NotFound, BadVersion):
                pass
        raise NoOwner("could not acquire the bundle", bundle=f"{tenant}/{namespace}/{bundle.key}")

    async def serving(self, name: TopicName) -> bool:
        """May this broker still serve `name` now: lease valid, its bundle ours and not being
        released (a load re-checks this before it serves what it loaded)."""
        if not self._astore.lease_valid():
            return False
        path = ownership_path(name.tenant, name.namespace, await self.bundle_of(name))
        return path in self._mine and path not in self._releasing

    async def check_owned(self, name: TopicName) -> None:
        """Return if this broker may serve `name`; acquire its bundle if nobody owns it.
        BundleNotOwned while it is being released or the lease is lost; OwnedElsewhere (with the
        owner's URLs) when another broker owns it."""
        if not self._astore.lease_valid():
            raise BundleNotOwned("this broker's metadata lease has lapsed", topic=str(name))
        bundle = await self.bundle_of(name)
        path = ownership_path(name.tenant, name.namespace, bundle)
        if path in self._releasing:
            raise BundleNotOwned("the bundle is being unloaded", topic=str(name), bundle=bundle.key)
        if path in self._mine:
            return
        owner = await self.acquire(name.tenant, name.namespace, bundle)
        if not owner.mine:
            raise OwnedElsewhere("the topic is served by another broker", topic=str(name),
                                 native_url=owner.native_url, http_url=owner.http_url)

    async def owns(self, name: TopicName) -> bool:
        """This broker holds `name`'s bundle now (never acquires it; False while releasing it)."""
        if not self._astore.lease_valid():
            return False
        bundle = await self.bundle_of(name)
        path = ownership_path(name.tenant, name.namespace, bundle)
        return path in self._mine and path not in self._releasing

    # --- lookup --------------------------------------------------------------------------------------

    async def resolve(self, name: TopicName, *, authoritative: bool) -> LookupAnswer:
        """The lookup decision of the module docstring (NamespaceNotFound: never created)."""
        await self._namespaces.require(name.tenant, name.namespace)
        bundle = await self.bundle_of(name)
        path = ownership_path(name.tenant, name.namespace, bundle)
        if not self._astore.lease_valid():   # answer only with other owners; assign nothing
            owner = self._owner_from_view(path)
            if owner is None:
                raise NoOwner("this broker's metadata lease has lapsed", topic=str(name))
            return self._connect(owner)
        if path in self._mine and path not in self._releasing:
            return self._connect(self._me())
        owner = await self.owner_of(path)
        if owner is not None and owner.mine and path not in self._releasing:
            return self._connect(owner)
        if owner is not None and not owner.mine and not owner.disabled and await self._reachable(owner.native_url):
            return self._connect(owner)
        if owner is not None:
            await self._wait_gone(path, str(name))
        return await self._assign(name.tenant, name.namespace, bundle, path, authoritative)

    def _owner_from_view(self, path: str) -> OwnerInfo | None:
        seen = self._view.get(path)
        if seen is None or seen[0] == self._identity.service_url or seen[2]:
            return None
        registered = self._registry.by_service_url(seen[0])    # its listeners, from its registry entry
        if registered is None:
            return OwnerInfo(seen[0], seen[1], False)
        return OwnerInfo(seen[0], seen[1], False, listeners=registered.listeners,
                         native_url_tls=registered.service_url_tls)

    def _connect(self, owner: OwnerInfo) -> LookupAnswer:
        return LookupAnswer(LookupKind.CONNECT, owner.native_url, owner.http_url, True, owner.listeners,
                            owner.native_url_tls)

    async def _assign(self, tenant: str, namespace: str, bundle: BundleRange, path: str,
                      authoritative: bool) -> LookupAnswer:
        target = None if authoritative else await self._choose(tenant, namespace, bundle)
        if self.draining and (target is None or target.service_url == self._identity.service_url):
            raise NoOwner("this broker is stopping and no other broker is live")
        if target is None or target.service_url == self._identity.service_url:
            owner = await self.acquire(tenant, namespace, bundle)
            return self._connect(owner)
        self._provisional[path] = (target.service_url, time.monotonic() + 5.0)
        return LookupAnswer(LookupKind.REDIRECT, target.service_url, target.web_url, True, target.listeners,
                            target.service_url_tls)

    async def _choose(self, tenant: str, namespace: str, bundle: BundleRange) -> BrokerInfo | None:
        """The broker to own an unowned bundle. Another broker is confirmed in the store first:
        the watch-fed view may still list a broker whose session was just reaped (it then looks
        idle, having lost every bundle), and a client sent there waits for nothing."""
        live = self._registry.live()
        if self.draining:
            live = {k: b for k, b in live.items() if b.service_url != self._identity.service_url}
        hint = await self._hint(tenant, namespace, bundle)
        for _ in range(len(live) + 1):
            target = live[hint] if hint is not None and hint in live else \
                placement.least_loaded(live.values(), self.owner_counts())
            if target is None or target.service_url == self._identity.service_url:
                return target
            if await self._registry.is_registered(target.key):
                return target
            live.pop(target.key, None)
        return None

    async def _hint(self, tenant: str, namespace: str, bundle: BundleRange) -> str | None:
        found = await self._astore.get(f"{HINTS_ROOT}/{tenant}/{namespace}/{bundle.key}")
        if found is None:
            return None
        try:
            data = json.loads(found.value.decode())
            return str(data["broker"]) if int(data["until_ms"]) > time.time() * 1000 else None
        except (ValueError, KeyError, TypeError):
            return None

    async def _wait_gone(self, path: str, topic: str) -> None:
        """Wait (bounded) for a disabled or dead owner's key to go; NoOwner if it stays."""
        deadline = time.monotonic() + self._config.broker_lookup_owner_wait_ms / 1000
        event = self._gone.setdefault(path, asyncio.Event())
        try:
            while time.monotonic() < deadline:
                try:
                    await asyncio.wait_for(event.wait(), min(_WAIT_POLL_S, deadline - time.monotonic()))
                except TimeoutError:
                    pass
                found = await self._astore.get(path)
                owner = self._owner_from(path, found)
                if owner is None:
                    return
                if not owner.disabled and (owner.mine or await self._reachable(owner.native_url)):
                    return   # a new, live owner (this broker too): the assignment below answers with it
                event.clear()
        finally:
            if not event.is_set():
                self._gone.pop(path, None)
        raise NoOwner("the bundle's owner is unloading it or unreachable", topic=topic)

    async def _reachable(self, native_url: str) -> bool:
        now = time.monotonic()
        cached = self._probes.get(native_url)
        if cached is not None and now - cached[1] < PROBE_CACHE_S:
            return cached[0]
        parsed = urlparse(native_url)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(parsed.hostname, parsed.port),
                                               PROBE_TIMEOUT_S)
            writer.close()
            ok = True
        except (OSError, TimeoutError):
            ok = False
        self._probes[native_url] = (ok, now)
        return ok

    # --- releasing -----------------------------------------------------------------------------------

    def topics_in(self, tenant: str, namespace: str, bundle: BundleRange) -> list[PersistentTopic]:
        out = []
        for topic in list(self._loaded.topics.values()):
            n = topic.name
            if (n.tenant, n.namespace) == (tenant, namespace) and bundle.holds(bundle_math.topic_hash(str(n))):
                out.append(topic)
        return out

    async def unload(self, tenant: str, namespace: str, bundle: BundleRange, *,
                     destination: str | None = None) -> bool:
        """Release a bundle we own (see the module docstring); False if we do not own it."""
        path = ownership_path(tenant, namespace, bundle)
        version = self._mine.get(path)
        if version is None or path in self._releasing:
            return False
        self._releasing.add(path)
        try:
            version = await self._disable(path, version)
            await self._leave_hint(tenant, namespace, bundle, destination)
            # a load that passed its ownership check before we began must end (it closes itself,
            # seeing the bundle released) before the key goes: a load finishing after the next
            # owner took over would open the managed ledger under its feet
            await self._loaded.settle_loads(lambda n: (n.tenant, n.namespace) == (tenant, namespace)
                                            and bundle.holds(bundle_math.topic_hash(str(n))), UNLOAD_TOPIC_CLOSE_S)
            await self._close_topics(self.topics_in(tenant, namespace, bundle))
            await self._non_persistent.close_where(lambda n: (n.tenant, n.namespace) == (tenant, namespace)
                                                           and bundle.holds(bundle_math.topic_hash(str(n))))
            try:
                await self._astore.delete(path, expected_version=version)
            except (NotFound, BadVersion):
                pass
            log.info("unloaded bundle %s/%s/%s", tenant, namespace, bundle.key)
        finally:
            self._mine.pop(path, None)
            self._releasing.discard(path)
            self._view.pop(path, None)
        return True

    async def _disable(self, path: str, version: int) -> int:
        value = self._record(self._me(), disabled=True)
        try:
            return await self._astore.put(path, value, expected_version=version)
        except (NotFound, BadVersion):
            return version

    async def _leave_hint(self, tenant: str, namespace: str, bundle: BundleRange, destination: str | None) -> None:
        live = self._registry.live()
        if destination is None:
            others = [b for b in live.values() if b.service_url != self._identity.service_url]
            chosen = placement.least_loaded(others, self.owner_counts())
            destination = chosen.key if chosen is not None else None
        if destination is None:
            return
        value = json.dumps({"broker": destination, "until_ms": int(time.time() * 1000) + HINT_TTL_MS}).encode()
        await self._astore.put(f"{HINTS_ROOT}/{tenant}/{namespace}/{bundle.key}", value)

    async def _close_topics(self, topics: Iterable[PersistentTopic]) -> None:
        async def close_one(topic: PersistentTopic) -> None:
            try:
                await asyncio.wait_for(self._loaded.release(topic), UNLOAD_TOPIC_CLOSE_S)
            except (StrataError, TimeoutError) as exc:
                log.warning("closing %s while unloading: %s", topic.name, exc)

        await asyncio.gather(*(close_one(t) for t in topics))

    async def unload_namespace(self, tenant: str, namespace: str) -> int:
        """Unload every bundle of the namespace this broker owns; returns how many."""
        owned = [b for t, ns, b in self.owned() if (t, ns) == (tenant, namespace)]
        done = await asyncio.gather(*(self.unload(tenant, namespace, b) for b in owned))
        return sum(done)

    async def unload_all(self) -> None:
        """Graceful stop: release every bundle, each to a live other broker if there is one."""
        await asyncio.gather(*(self.unload(t, ns, b) for t, ns, b in self.owned()))

    async def _check_lost(self, path: str) -> None:
        """A DELETED event for a key we hold: ours is really gone, or the event is the previous
        holder's delete arriving after we created the key anew (a bundle moved here: the watch
        runs ~0.1 s behind the store), which must not stop us serving it."""
        try:
            found = await self._astore.get(path)
        except StrataError:
            found = None
        if found is not None and found.ephemeral_owner == self._astore.session_id:
            self._view.setdefault(path, (self._identity.service_url, self._identity.web_url, False))
            log.info("%s: the delete seen is its previous holder's; ours stands", path)
            return
        if path in self._mine and path not in self._releasing:
            log.error("ownership key %s vanished while we held it; no longer serving it", path)
            await self._lost(path)

    async def _lost(self, path: str) -> None:
        """Our key is gone (our session was reaped): stop serving that bundle without writing."""
        parsed = _split_path(path)
        self._mine.pop(path, None)
        if parsed is not None:
            await self._close_topics(self.topics_in(*parsed))

    async def drop_all(self, reason: str) -> None:
        """The lease is lost: stop serving every bundle at once, leave the keys as they are."""
        paths = list(self._mine)
        if paths:
            log.error("%s: no longer serving %d bundle(s)", reason, len(paths))
        self._mine.clear()
        self._view.clear()
        await self._close_topics(list(self._loaded.topics.values()))
        await self._non_persistent.close_where(lambda _name: True)

    async def split(self, tenant: str, namespace: str, bundle: BundleRange, *,
                    unload: bool) -> tuple[BundleRange, BundleRange]:
        """range_equally_divide a bundle we own into two halves, which we then own (or release,
        with `unload`). InvalidBundle if it is not a bundle of the namespace; BundleNotOwned if
        another broker (or none) owns it."""
        current = await bundle_math.load_bundles(self._astore, tenant, namespace,
                                                 self._config.broker_default_namespace_bundles)
        current.get(bundle)
        path = ownership_path(tenant, namespace, bundle)
        if path not in self._mine or path in self._releasing:
            owner = await self.owner_of(path)
            if owner is not None and not owner.mine:
                raise OwnedElsewhere("the bundle is owned by another broker", bundle=bundle.key,
                                     native_url=owner.native_url, http_url=owner.http_url)
            raise BundleNotOwned("this broker does not own the bundle", bundle=bundle.key)
        split, halves = current.split(bundle)
        self._releasing.add(path)
        try:
            stored = await bundle_math.store_split(self._astore, split)
            self._bundles[(tenant, namespace)] = stored
            for half in halves:
                await self.acquire(tenant, namespace, half)
            try:
                await self._astore.delete(path)
            except NotFound:
                pass
        finally:
            self._mine.pop(path, None)
            self._releasing.discard(path)
            self._view.pop(path, None)
        log.info("split bundle %s/%s/%s into %s and %s", tenant, namespace, bundle.key, *halves)
        if unload:
            for half in halves:
                await self.unload(tenant, namespace, half)
        return halves

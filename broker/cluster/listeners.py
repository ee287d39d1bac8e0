"""Advertised listeners: the named addresses a broker is reachable at, and which one a lookup answers.

A broker behind NAT, a proxy or a Kubernetes service has one address for other brokers and
clients inside and another for clients outside. Pulsar's `advertisedListeners` names each:

    advertised_listeners = "internal:pulsar://10.0.0.5:6650,external:pulsar://broker-1.example.com:6652"
    internal_listener_name = "internal"          # '' : the first listener named

Each entry is `name:url`; a listener has at most one URL per scheme (`pulsar`, `pulsar+ssl`, `http`,
`https`), at least one of `pulsar` / `pulsar+ssl`, and two listeners never share a host:port
(Pulsar's MultipleListenerValidator rules). The internal listener's `pulsar` URL is the broker's
own service URL (what a lookup without a listener name answers, and what other brokers use).

Binding (`bind_listener_ports`): besides `broker_port` on `broker_bind_host`, the broker listens
on each listener's `pulsar` host:port whose port differs from `broker_port` when that host is an
address of this machine (so `external:pulsar://127.0.0.1:6652` works as written). A host that is
not (a NAT or proxy address: EADDRNOTAVAIL) is only advertised: whatever sits in front must lead
to one of the broker's ports. A local address whose port is taken stops the broker at start.

A lookup (LOOKUP's `advertised_listener_name`, the HTTP lookup's `?listenerName=` or header
`X-Pulsar-ListenerName`) that names a listener is answered with the owner's URL for that listener,
read from the owner's ownership record or registry entry (both carry `advertisedListeners`, in
Pulsar's JSON shape `{name: {brokerServiceUrl, brokerServiceUrlTls, brokerHttpUrl, brokerHttpsUrl}}`).
A name the owner does not have is refused with UnknownListener, whose message is Pulsar's
("the broker do not have <name> listener").

What must hold: a `Listeners` that exists is valid (`parse` raises ConfigError otherwise); a lookup
naming a listener never answers another listener's URL.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from common.config import Config
from common.errors import ConfigError, UnknownListener

log = logging.getLogger(__name__)

SCHEMES = ("pulsar", "pulsar+ssl", "http", "https")
# the JSON field each scheme's URL is kept under (Pulsar's AdvertisedListener)
_FIELD_OF = {"pulsar": "brokerServiceUrl", "pulsar+ssl": "brokerServiceUrlTls",
             "http": "brokerHttpUrl", "https": "brokerHttpsUrl"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
LISTENERS_MAX = 32
LISTENER_NAME_HEADER = "X-Pulsar-ListenerName"
LISTENER_NAME_QUERY = "listenerName"


@dataclass(frozen=True)
class Listener:
    """One named listener: its URL per scheme ('' when it has none)."""

    name: str
    pulsar_url: str = ""
    pulsar_tls_url: str = ""
    http_url: str = ""
    https_url: str = ""

    def to_json(self) -> dict[str, str]:
        return {"brokerServiceUrl": self.pulsar_url, "brokerServiceUrlTls": self.pulsar_tls_url,
                "brokerHttpUrl": self.http_url, "brokerHttpsUrl": self.https_url}


@dataclass(frozen=True)
class Listeners:
    """A broker's listeners in configuration order, and the name of the internal one ('' : none
    configured, the broker has no named listener)."""

    by_name: Mapping[str, Listener]
    internal_name: str = ""

    @property
    def internal(self) -> Listener | None:
        return self.by_name.get(self.internal_name)

    def to_json(self) -> dict[str, dict[str, str]]:
        return {name: listener.to_json() for name, listener in self.by_name.items()}


NO_LISTENERS = Listeners({})


def _bad(text: str, why: str) -> ConfigError:
    return ConfigError(f"advertised_listeners entry {text!r}: {why}; expected name:scheme://host:port "
                       f"with scheme one of {', '.join(SCHEMES)}")


def _split_entry(entry: str) -> tuple[str, str, str]:
    """(name, scheme, url) of one `name:scheme://host:port` entry."""
    name, sep, url = entry.partition(":")
    name, url = name.strip(), url.strip()
    if not sep or not name or url.startswith("//"):   # "pulsar://h:1": a URL with no name before it
        raise _bad(entry, "no listener name before the URL")
    if not _NAME.match(name):
        raise _bad(entry, "a listener name is letters, digits, '_', '.', '-' (at most 64)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _bad(entry, f"not a URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise _bad(entry, f"unknown scheme {parts.scheme!r}")
    if not parts.hostname or port is None or port == 0:
        raise _bad(entry, "the URL needs a host and a port (1-65535)")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise _bad(entry, "the URL is scheme://host:port and nothing more")
    return name, parts.scheme, f"{parts.scheme}://{parts.netloc}"


def parse(text: str, internal_name: str = "") -> Listeners:
    """The listeners of `advertised_listeners` (see the module docstring); ConfigError names the
    entry at fault. An empty text is no listeners (and then `internal_name` must be empty too)."""
    entries = [e for e in (part.strip() for part in text.split(",")) if e]
    if not entries:
        if internal_name:
            raise ConfigError(f"internal_listener_name {internal_name!r} is set but advertised_listeners is empty")
        return NO_LISTENERS
    if len(entries) > LISTENERS_MAX * len(SCHEMES):
        raise ConfigError(f"advertised_listeners has {len(entries)} entries; at most {LISTENERS_MAX} listeners")
    urls: dict[str, dict[str, str]] = {}
    owner_of_address: dict[str, str] = {}
    for entry in entries:
        name, scheme, url = _split_entry(entry)
        mine = urls.setdefault(name, {})
        if scheme in mine:
            raise _bad(entry, f"listener {name!r} already has a {scheme} URL ({mine[scheme]})")
        address = url.split("://", 1)[1]
        other = owner_of_address.setdefault(address, name)
        if other != name:
            raise _bad(entry, f"{address} is already listener {other!r}'s: two listeners cannot share a host:port")
        mine[scheme] = url
    if len(urls) > LISTENERS_MAX:
        raise ConfigError(f"advertised_listeners names {len(urls)} listeners; at most {LISTENERS_MAX}")
    by_name = {}
    for name, mine in urls.items():
        if "pulsar" not in mine and "pulsar+ssl" not in mine:
            raise ConfigError(f"advertised_listeners: listener {name!r} has no pulsar:// or pulsar+ssl:// URL")
        by_name[name] = Listener(name, mine.get("pulsar", ""), mine.get("pulsar+ssl", ""),
                                 mine.get("http", ""), mine.get("https", ""))
    internal = internal_name or next(iter(by_name))
    if internal not in by_name:
        raise ConfigError(f"internal_listener_name {internal!r} is not one of advertised_listeners "
                          f"({', '.join(by_name)})")
    if not by_name[internal].pulsar_url:
        raise ConfigError(f"the internal listener {internal!r} needs a pulsar:// URL "
                          "(it is the broker's own service URL)")
    return Listeners(by_name, internal)


def from_config(config: Config) -> Listeners:
    return parse(config.advertised_listeners, config.internal_listener_name)


def decode(raw: object) -> dict[str, Listener]:
    """Listeners from a record's `advertisedListeners` (Pulsar's JSON shape); a malformed entry is
    skipped (a record written by something else must not break lookups of other listeners)."""
    out: dict[str, Listener] = {}
    if not isinstance(raw, dict):
        return out
    for name, fields in raw.items():
        if isinstance(name, str) and isinstance(fields, dict):
            values = {scheme: fields.get(field, "") for scheme, field in _FIELD_OF.items()}
            if all(isinstance(v, str) for v in values.values()):
                out[name] = Listener(name, values["pulsar"], values["pulsar+ssl"], values["http"], values["https"])
    return out


def choose(listeners: Mapping[str, Listener], name: str) -> Listener:
    """The listener `name` of a broker whose listeners are `listeners`; UnknownListener if it has none
    of that name (Pulsar's message)."""
    listener = listeners.get(name)
    if listener is None:
        known = ", ".join(sorted(listeners)) or "none"
        raise UnknownListener(f"the broker do not have {name} listener (its advertised listeners: {known})")
    return listener


async def bind_listener_ports(listeners: Listeners, broker_port: int,
                              protocol_factory: Callable[[], asyncio.Protocol]) -> list[asyncio.Server]:
    """Servers (not yet serving) on the listeners' local `pulsar` addresses whose port is not
    `broker_port` (see the module docstring); ConfigError when such an address is taken."""
    loop = asyncio.get_running_loop()
    servers: list[asyncio.Server] = []
    for listener in listeners.by_name.values():
        if not listener.pulsar_url:
            continue
        parts = urlsplit(listener.pulsar_url)
        port = parts.port
        if port is None or port == broker_port:
            continue
        try:
            servers.append(await loop.create_server(protocol_factory, host=parts.hostname, port=port,
                                                    reuse_address=True, backlog=1024, start_serving=False))
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                log.info("listener %s: %s is not an address of this machine; advertised only",
                         listener.name, listener.pulsar_url)
                continue
            for server in servers:
                server.close()
            raise ConfigError(f"listener {listener.name!r}: cannot listen on {listener.pulsar_url}: {exc}") from None
        log.info("listener %s: listening on %s", listener.name, listener.pulsar_url)
    return servers

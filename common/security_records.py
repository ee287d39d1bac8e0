"""What a cluster enforces, recorded in the metadata store for tools that read the store directly.

    await publish(astore, config)                      # every broker, at start (BrokerService.start_cluster)
    record = read(store)                                # the Spark source, before it lists a topic

Key `/admin/security`, JSON `{"authenticationEnabled": bool, "authorizationEnabled": bool,
"adminTlsUrl": "https://host:port"}` (`adminTlsUrl` only when the broker has an HTTPS admin port).
The Spark source and other readers of the metadata store, bookies and S3 bypass the broker's
checks; when the record says authorization is on, they must ask the broker, with the caller's
credentials, before reading a topic (analytics/authorization.py).

What must hold: the record carries no secret (no key, token or role list); every broker writes it
at start, the last one to start winning (brokers of one cluster share their security settings); a
missing or unreadable record reads as "nothing enforced", which is what a cluster from before this
record enforced. This module does no I/O of its own beyond the store calls it is handed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from common.config import Config

SECURITY_PATH = "/admin/security"


@dataclass(frozen=True)
class SecurityRecord:
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    admin_tls_url: str = ""           # "" = no HTTPS admin port advertised

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {"authenticationEnabled": self.authentication_enabled,
                               "authorizationEnabled": self.authorization_enabled}
        if self.admin_tls_url:
            doc["adminTlsUrl"] = self.admin_tls_url
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SecurityRecord:
        """The record in `raw`; anything that is not a JSON object reads as nothing enforced."""
        try:
            doc = json.loads(raw)
        except ValueError:
            return cls()
        if not isinstance(doc, dict):
            return cls()
        return cls(doc.get("authenticationEnabled") is True, doc.get("authorizationEnabled") is True,
                   str(doc.get("adminTlsUrl") or ""))


def of_config(config: Config, admin_tls_url: str = "") -> SecurityRecord:
    """The record a broker with these settings publishes."""
    return SecurityRecord(bool(config.authentication_enabled), bool(config.authorization_enabled), admin_tls_url)


def admin_tls_url(config: Config) -> str:
    """The HTTPS admin URL the settings fix (a configured port, not an ephemeral 0), else ""."""
    port = config.broker_admin_tls_port
    return f"https://{config.broker_advertised_host}:{port}" if port > 0 else ""


async def publish(astore: Any, config: Config) -> None:
    """Write this broker's record (an AsyncStore's unconditional put)."""
    await astore.put(SECURITY_PATH, of_config(config, admin_tls_url(config)).to_json())


def read(store: Any) -> SecurityRecord:
    """The cluster's record from a (synchronous) MetadataStore; none stored = nothing enforced."""
    found = store.get(SECURITY_PATH)
    return SecurityRecord.from_json(found.value) if found is not None else SecurityRecord()

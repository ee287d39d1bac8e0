"""What one multi-tenant policy is: its Pulsar names, levels, body check and broker default.

A `PolicySpec` describes one of Pulsar's namespace/topic policies the way the admin REST API,
the namespace Policies JSON, `strata admin` and the enforcing code all see it:

- `route`: the namespace route segment (`/admin/v2/namespaces/{t}/{ns}/<route>`), also the
  policy's name in errors and logs (e.g. `maxProducersPerTopic`); None: topic level only;
- `topic_route`: the topic route segment (`/admin/v2/persistent/{t}/{ns}/{topic}/<topic_route>`,
  e.g. `maxProducers`); None: namespace level only;
- `key`: the field of Pulsar's namespace Policies JSON, which is also where the value is stored,
  in the namespace's policies document and in the topic's (`broker.records.policies`);
- `check(body)`: the REST body (or a create body's field) as the value stored: BadRequestBody
  (400) for a wrong type, NotAllowed (412) for a value out of range, with Pulsar's text where
  Pulsar has one; `checked(body, config)` is what the REST routes call: `check_config` instead
  when the policy's bounds are broker settings (persistence: Pulsar's managedLedgerMax*);
- `default(config)`: the broker's value, applied when neither the topic nor its namespace sets
  one (Pulsar's broker.conf setting of the same meaning);
- `per_cluster`: Pulsar's Policies JSON keeps the value in a map keyed by cluster
  (`publishMaxMessageRate`, `topicDispatchRate`, ...): Strata has one cluster, so it stores the
  value itself and shows `{cluster: value}`;
- `cli`: the pulsar-admin command stem (`set-<cli>`, `get-<cli>`, `remove-<cli>`) and its flags.

What must hold: `check` never returns a value `default` could not have produced (the enforcing
code reads one shape); a topic's value wins over its namespace's, which wins over the default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.config import Config
from common.errors import BadRequestBody, NotAllowed


@dataclass(frozen=True)
class CliFlag:
    """One pulsar-admin flag of a `set-*` command: its names, where it goes in the body, how it
    is parsed, and its default (None and not `required`: left out of the body)."""

    names: tuple[str, ...]
    field: str
    parse: Callable[[str], Any] = int
    default: Any = None
    required: bool = False
    switch: bool = False          # a flag without a value: True when given
    help: str = ""


@dataclass(frozen=True)
class PolicySpec:
    key: str
    check: Callable[[object], Any]
    default: Callable[[Config], Any]
    route: str | None = None
    topic_route: str | None = None
    per_cluster: bool = False
    cli: str = ""
    topic_cli: str = ""
    flags: tuple[CliFlag, ...] = ()
    scalar: bool = False          # the body is the value itself (an int), not a JSON object
    cli_body: Callable[[dict[str, Any]], Any] | None = None   # the CLI flags' values -> the REST body
    check_config: Callable[[object, Config], Any] | None = None   # `check` with the broker's bounds
    doc: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.route or self.topic_route or self.key

    def checked(self, body: object, config: Config | None) -> Any:
        """`check`, with the bounds `config` sets where the policy has such bounds."""
        if self.check_config is not None and config is not None:
            return self.check_config(body, config)
        return self.check(body)


# --- body checks ------------------------------------------------------------------------------------


def int_at_least(name: str, low: int, *, message: str | None = None) -> Callable[[object], int]:
    """An integer body >= low (Pulsar: "<name> must be 0 or more", 412)."""
    def check(body: object) -> int:
        value = integer(body, name)
        if value < low:
            raise NotAllowed(message or f"{name} must be {low} or more", value=value)
        return value
    return check


def int_field(low: int, text: str) -> Callable[[object, str], int]:
    """A body field's check: an integer >= low, else NotAllowed "<field> <text>" (412)."""
    def check(value: object, name: str) -> int:
        got = integer(value, name)
        if got < low:
            raise NotAllowed(f"{name} {text}", value=got)
        return got
    return check


def integer(body: object, name: str) -> int:
    if isinstance(body, bool) or not isinstance(body, int):
        raise BadRequestBody(f"{name} must be an integer")
    return body


def number(body: object, name: str) -> float:
    if isinstance(body, bool) or not isinstance(body, (int, float)):
        raise BadRequestBody(f"{name} must be a number")
    return float(body)


def boolean(body: object, name: str) -> bool:
    if not isinstance(body, bool):
        raise BadRequestBody(f"{name} must be true or false")
    return body


def obj(body: object, name: str, fields: dict[str, Callable[[object, str], Any]],
        defaults: dict[str, Any]) -> dict[str, Any]:
    """A JSON object body: each known field checked by its type (absent: its default; fields
    Pulsar does not know are ignored, as Pulsar's JSON reader ignores them)."""
    if not isinstance(body, dict):
        raise BadRequestBody(f"{name} must be a JSON object with {', '.join(fields)}")
    out: dict[str, Any] = {}
    for key, kind in fields.items():
        raw = body.get(key)
        if raw is None:
            out[key] = defaults.get(key)
        else:
            out[key] = kind(raw, f"{name}.{key}")
    return out


def cluster_value(body: object, cluster: str) -> object:
    """A per-cluster Policies field of a create body (`{cluster: value}`) as its value here."""
    if not isinstance(body, dict):
        raise BadRequestBody("a per-cluster policy is a JSON object keyed by cluster name")
    unknown = [c for c in body if c != cluster]
    if unknown:
        raise NotAllowed("Clusters do not exist", clusters=unknown)
    return body.get(cluster)


def switch_pair(on: str, off: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `set-*` command's `--enable/-e` / `--disable/-d` pair as one boolean field (one of the
    two must be given, as pulsar-admin requires)."""
    def body(flags: dict[str, Any]) -> dict[str, Any]:
        enabled, disabled = bool(flags.pop(on, False)), bool(flags.pop(off, False))
        if enabled == disabled:
            raise BadRequestBody("give exactly one of --enable/-e and --disable/-d")
        flags[on] = enabled
        return {k: v for k, v in flags.items() if v is not None}
    return body

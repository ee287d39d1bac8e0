"""Generates `wire/kafka/schemas.py` from Apache Kafka's JSON message schemas.

Run `python -m wire.kafka.gen_schemas` after changing `APIS` or upgrading kafka-python. The JSON files are
the copies kafka-python ships (`kafka/protocol/schemas/resources/*.json`, Apache License 2.0); they use
`//` full-line comments, which are stripped before parsing. The output is plain literals (dicts, tuples):
the codec (`wire.kafka.codec`) interprets them; nothing at run time reads JSON or imports kafka-python.

What the tables keep per field: the JSON name, the snake_case key the codec uses in body dicts, the type
(`int8`..`int64`, `uint16`, `float64`, `bool`, `uuid`, `string`, `bytes`, `records`, `struct`, or `[]`
plus one of those), the versions it exists in, the nullable versions, tag and taggedVersions (flexible
tagged fields), a field-level `flexibleVersions` override (only ClientId in the request header uses it:
"none" = always a classic int16-length string), the default as a Python value, and the nested fields of a
struct (commonStructs are resolved inline). A version range is `(low, high)`, `None` = no version; "N+"
becomes `(N, VERSION_MAX)`.

What must hold: the output is deterministic (same input, same bytes), so the committed file diffs only
when the schemas change.

Patch (documented deviation from the JSON): Kafka 4 removed ListOffsets v0 (KIP-896), but librdkafka
before 2.x used it and the broker must still answer it (KAFKA-FACTS §9 trap 2). The request JSON still
carries `MaxNumOffsets` (versions "0"), so only its validVersions are widened to 0; the response gets back
v0's `OldStyleOffsets` ([]int64, v0 only) in place of Timestamp/Offset, which become "1+". Produce v0–2
and Fetch v0–3 stay removed (magic 0/1 message sets; no client we serve needs them).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

VERSION_MAX = 0x7FFF

# api key -> schema name (without Request/Response)
APIS: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 22: "InitProducerId", 32: "DescribeConfigs", 33: "AlterConfigs",
    36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups", 44: "IncrementalAlterConfigs",
    47: "OffsetDelete", 60: "DescribeCluster",
}

_COMMENTS = re.compile(r"(?m)^\s*//.*\n?")
_INT_TYPES = {"int8", "int16", "int32", "int64", "uint16"}


def resources_dir() -> Path:
    """kafka-python's copy of the schemas, found without importing kafka-python (a test dependency)."""
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.origin is None:
        raise SystemExit("kafka-python is not installed: pip install -e '.[test]'")
    return Path(spec.origin).parent / "protocol" / "schemas" / "resources"


def load(name: str) -> dict[str, Any]:
    text = (resources_dir() / f"{name}.json").read_text()
    data: dict[str, Any] = json.loads(_COMMENTS.sub("", text))
    return data


def versions(spec: str | None) -> tuple[int, int] | None:
    """'3+' -> (3, MAX), '0-7' -> (0, 7), '2' -> (2, 2), 'none'/None -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), VERSION_MAX
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def snake(name: str) -> str:
    """'ApiKeys' -> 'api_keys', 'TopicId' -> 'topic_id', 'ThrottleTimeMs' -> 'throttle_time_ms'."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _default(ftype: str, raw: Any) -> Any:
    """The field's default as a Python value. A struct's is {} (the codec builds it from its fields'
    defaults) or None when its default is "null"."""
    if raw == "null":
        return None
    if ftype.startswith("[]"):
        return []
    if ftype == "struct":
        return {}
    if ftype == "records":
        return None
    if raw is None:
        return {"bool": False, "string": "", "bytes": b"", "uuid": bytes(16), "float64": 0.0}.get(ftype, 0)
    if ftype == "bool":
        return raw in (True, "true")
    if ftype in _INT_TYPES:
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if ftype == "float64":
        return float(raw)
    if ftype == "bytes":
        return raw.encode()
    return raw


def field(spec: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    jtype: str = spec["type"]
    inner = jtype[2:] if jtype.startswith("[]") else jtype
    is_struct = inner[:1].isupper()
    ftype = ("[]" if jtype.startswith("[]") else "") + ("struct" if is_struct else inner)
    out: dict[str, Any] = {"name": spec["name"], "key": snake(spec["name"]), "type": ftype,
                           "versions": versions(spec["versions"]),
                           "nullable": versions(spec.get("nullableVersions"))}
    if "tag" in spec:
        out["tag"] = int(spec["tag"])
        out["tagged"] = versions(spec["taggedVersions"])
    if "flexibleVersions" in spec:
        out["flexible"] = versions(spec["flexibleVersions"])
    out["default"] = _default(ftype, spec.get("default"))
    if is_struct:
        out["struct"] = inner
        sub = spec.get("fields") or common[inner]
        out["fields"] = tuple(field(f, common) for f in sub)
    return out


def message(name: str) -> dict[str, Any]:
    data = load(name)
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    return {"name": data["name"], "valid": versions(data["validVersions"]),
            "flexible": versions(data["flexibleVersions"]),
            "fields": tuple(field(f, common) for f in data["fields"])}


def patch_list_offsets_v0(request: dict[str, Any], response: dict[str, Any]) -> None:
    """Bring back ListOffsets v0 (see the module docstring)."""
    request["valid"] = (0, request["valid"][1])
    response["valid"] = (0, response["valid"][1])
    topics = next(f for f in response["fields"] if f["name"] == "Topics")
    partitions = next(f for f in topics["fields"] if f["name"] == "Partitions")
    names = [f["name"] for f in partitions["fields"]]
    if "OldStyleOffsets" not in names:
        old: dict[str, Any] = {"name": "OldStyleOffsets", "key": "old_style_offsets", "type": "[]int64",
                               "versions": (0, 0), "nullable": None, "default": []}
        fields = list(partitions["fields"])
        fields.insert(names.index("ErrorCode") + 1, old)
        partitions["fields"] = tuple(fields)
    for f in partitions["fields"]:
        if f["name"] in ("Timestamp", "Offset"):
            f["versions"] = (1, VERSION_MAX)


def _emit(value: Any, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict) and "fields" in value and "versions" not in value:  # a message
        head = ", ".join(f"{k!r}: {v!r}" for k, v in value.items() if k != "fields")
        return "{" + head + ", 'fields': " + _emit(value["fields"], indent) + "}"
    if isinstance(value, tuple) and value and isinstance(value[0], dict):
        inner = "".join(f"{pad}    {_emit(v, indent + 4)},\n" for v in value)
        return "(\n" + inner + pad + ")"
    if isinstance(value, dict):
        head = ", ".join(f"{k!r}: {v!r}" for k, v in value.items() if k != "fields")
        if "fields" in value:
            return "{" + head + ", 'fields': " + _emit(value["fields"], indent) + "}"
        return "{" + head + "}"
    return repr(value)


HEADER = '''"""Apache Kafka's message schemas as tables. GENERATED by `python -m wire.kafka.gen_schemas`: do not edit.

Generated from Apache Kafka's JSON message schemas (clients/src/main/resources/common/message/*.json, as
shipped in kafka-python {kp_version}), Copyright The Apache Software Foundation, licensed under the
Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0). The format of these tables
and the ListOffsets v0 patch are described in wire/kafka/gen_schemas.py.
"""
# ruff: noqa: E501

from typing import Any

VERSION_MAX = {vmax}

API_NAMES: dict[int, str] = {api_names!r}

'''


def render() -> str:
    kp_version = importlib.metadata.version("kafka-python")
    parts = [HEADER.format(kp_version=kp_version, vmax=VERSION_MAX, api_names=dict(sorted(APIS.items())))]
    for kind in ("Request", "Response"):
        parts.append(f"{kind.upper()}_HEADER: dict[str, Any] = {_emit(message(kind + 'Header'), 0)}\n\n")
    messages = {key: (message(name + "Request"), message(name + "Response")) for key, name in sorted(APIS.items())}
    patch_list_offsets_v0(*messages[2])
    for index, kind in enumerate(("REQUESTS", "RESPONSES")):
        parts.append(f"{kind}: dict[int, dict[str, Any]] = {{\n")
        for key, pair in messages.items():
            parts.append(f"    {key}: {_emit(pair[index], 4)},\n")
        parts.append("}\n\n")
    return "".join(parts).rstrip() + "\n"


def main() -> None:
    target = Path(__file__).with_name("schemas.py")
    target.write_text(render())
    sys.stdout.write(f"wrote {target}\n")


if __name__ == "__main__":
    main()

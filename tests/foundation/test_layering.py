"""Imports run one way (docs/architecture.md): broker -> cursor -> ledger -> bookie client -> proto, everything
-> metadata and common; offload sits beside ledger (ledger reads it only through `ledger.cold`,
so ledger never imports offload); `entries` (Pulsar's stored entry format) serves broker and
offload; `analytics` (Spark source and sink) uses offload, ledger and the bookie client, never
broker; nothing imports broker except cli and perf. `chaos` (`strata chaos`: a
fault soak of a real cluster) drives processes like perf does, and never imports broker.
`launch` (the processes Strata starts: bookie,
broker, standalone, cluster, PostgreSQL, SeaweedFS) sits above the product packages and below
cli, perf, chaos and bench, which use it; no product package imports it. `admin_client` (the one client
of the admin REST API) sits on common and auth and serves cli, perf, analytics and bench; nothing
below them imports it.
No product package imports `tests` (it is not installed: `strata` must run without the source
tree), also not through importlib."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["common", "proto", "auth", "admin_client", "entries", "wire", "metadata", "bookie", "ledger", "offload",
            "cursor", "broker", "analytics", "launch", "cli", "perf", "chaos", "bench"]

ALLOWED = {
    "common": {"common"},
    "proto": {"proto"},
    "auth": {"common", "auth"},
    "admin_client": {"common", "auth", "admin_client"},
    "entries": {"common", "proto", "entries"},
    "wire": {"common", "proto", "entries", "wire"},
    "metadata": {"common", "metadata"},
    "bookie": {"common", "metadata", "proto", "auth", "bookie"},
    "offload": {"common", "metadata", "proto", "entries", "offload", "ledger"},
    "ledger": {"common", "metadata", "proto", "bookie", "ledger"},
    "cursor": {"common", "metadata", "ledger", "cursor"},
    "broker": {"common", "metadata", "proto", "auth", "entries", "wire", "bookie", "ledger", "offload", "cursor",
               "broker"},
    "analytics": {"common", "metadata", "proto", "auth", "admin_client", "entries", "bookie", "ledger", "offload",
                  "analytics"},
    "launch": {"common", "auth", "metadata", "offload", "launch"},
    "cli": set(PACKAGES),
    "perf": set(PACKAGES) - {"cli", "bench", "chaos"},
    "chaos": set(PACKAGES) - {"cli", "bench", "perf", "broker"},
    "bench": set(PACKAGES) - {"cli"},
}


# Top-level names no product package may import (not in any ALLOWED set).
FORBIDDEN = {"tests"}


def _dynamic_import(node: ast.AST) -> str | None:
    """The module named by `importlib.import_module("x")` / `__import__("x")`, if constant."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    arg = node.args[0]
    if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) \
            and isinstance(arg.value, str):
        return arg.value
    return None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif (module := _dynamic_import(node)) is not None:
            found.add(module.split(".")[0])
    return found & (set(PACKAGES) | FORBIDDEN)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_run_one_way(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        for imported in _imports(path) - ALLOWED[package]:
            bad.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not bad, "layering violations:\n" + "\n".join(bad)



def test_the_check_sees_imports_of_tests(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import importlib\n"
                      "def f():\n"
                      "    from tests.support.x import y\n"
                      "    importlib.import_module('tests.support.z')\n")
    assert _imports(source) == {"tests"}
    assert all("tests" not in allowed for allowed in ALLOWED.values())


# --- inside broker/: concept packages in layers ---------------------------------------------------
# A package may import only packages of a lower layer (and itself); packages on one layer never
# import each other. TYPE_CHECKING imports and imports inside functions count too: a type-only
# edge that points up is still a dependency (the object is handed in and used).
BROKER_LAYERS: list[set[str]] = [
    {"server"},                    # the process: the composition root
    {"protocol", "kafka", "admin"},   # front ends (Pulsar binary protocol, Kafka protocol, admin REST)
    {"service"},                   # the topics this broker serves
    {"stats", "explain"},          # read-only views
    {"cluster", "retention"},      # broker-wide machinery over loaded topics
    {"nonpersistent"},
    {"topics"},                    # persistent topics, with topics/dispatch/
    {"limits"},                    # multi-tenant policies: what they are, their values, limiters
    {"compaction"},
    {"schemas", "security"},
    {"records"},
    {"context", "memdebug", "__init__"},   # the narrow things passed down; process-level debugging
]
BROKER_RANK = {unit: len(BROKER_LAYERS) - i for i, layer in enumerate(BROKER_LAYERS) for unit in layer}
# Pure algorithms: they import nothing from broker/ at all.
BROKER_LEAVES = {"broker/topics/dispatch/key_selector.py", "broker/topics/dispatch/delayed.py",
                 "broker/topics/dispatch/delayed_overflow.py"}
# Edges that still point up while the cuts are under way; each must go, and this set with it.
BROKER_KNOWN_UP: set[str] = set()


def _broker_unit(module: str) -> str:
    """broker.topics.dispatch.base -> topics; broker.service -> service; broker -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _broker_imports(path: Path) -> set[str]:
    """Every broker module `path` imports, type-only and function-local ones included, with
    `from broker.x import name` resolved to broker.x.name when that is a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "broker")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "broker":
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                as_path = ROOT / Path(*candidate.split("."))
                is_module = as_path.with_suffix(".py").exists() or (as_path / "__init__.py").exists()
                found.add(candidate if is_module else node.module)
    return found


def _broker_violations() -> set[str]:
    bad = set()
    for path in sorted((ROOT / "broker").rglob("*.py")):
        importer = _module_of(path)
        unit = _broker_unit(importer)
        rel = str(path.relative_to(ROOT))
        for imported in _broker_imports(path):
            if rel in BROKER_LEAVES:
                bad.add(f"{rel} imports {imported} (a leaf imports nothing from broker)")
                continue
            target = _broker_unit(imported)
            if target == unit and target != "__init__":
                continue
            if imported == "broker" or BROKER_RANK[target] < BROKER_RANK[unit]:
                continue
            bad.add(f"{rel} imports {imported} ({unit} may not import {target})")
    return bad


def test_every_broker_package_has_a_layer():
    units = {_broker_unit(_module_of(p)) for p in (ROOT / "broker").rglob("*.py")}
    assert units <= set(BROKER_RANK), f"broker packages without a layer: {sorted(units - set(BROKER_RANK))}"


def test_broker_packages_import_only_lower_layers():
    found = _broker_violations()
    new = sorted(found - BROKER_KNOWN_UP)
    gone = sorted(BROKER_KNOWN_UP - found)
    assert not new, "imports that point up or sideways inside broker/:\n" + "\n".join(new)
    assert not gone, "cut already; take them out of BROKER_KNOWN_UP:\n" + "\n".join(gone)


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """Product modules `path` imports when it is imported (not under TYPE_CHECKING, not inside
    a function), resolving `from a.b import c` to a.b.c when that is a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    candidate = f"{node.module}.{alias.name}"
                    found.add(candidate if candidate in modules else node.module)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, part, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])
    visit(tree.body)
    return found & modules


def test_no_runtime_import_cycle():
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")
             if not p.name.endswith(("_pb2.py", "_pb2_grpc.py"))]
    modules = {_module_of(p): p for p in paths}
    graph = {m: _runtime_imports(p, set(modules)) - {m} for m, p in modules.items()}
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert not cycles, "run-time import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_broker_check_sees_type_only_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n"
                      "    from broker.service import BrokerService\n")
    assert _broker_imports(source) == {"broker.service"}
    assert _runtime_imports(source, {"broker.service"}) == set()


# The core below the front ends knows no wire protocol: no `wire` codec, no protocol messages.
# One exception: compaction writes entries in Pulsar's stored entry format (MessageMetadata and
# SingleMessageMetadata are the bytes a topic stores, not commands).
BROKER_FRONT_ENDS = {"server", "protocol", "kafka", "admin"}
BROKER_STORED_FORMAT = {"broker/compaction/format.py"}


def test_the_broker_core_speaks_no_protocol():
    bad = []
    for path in sorted((ROOT / "broker").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if _broker_unit(_module_of(path)) in BROKER_FRONT_ENDS:
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] == "wire" or (name.startswith("proto.pulsar_api_pb2")
                                                    and rel not in BROKER_STORED_FORMAT):
                    bad.append(f"{rel} imports {name}")
    assert not bad, "the core imports a wire protocol:\n" + "\n".join(sorted(set(bad)))


# The packages that use the launchers; every other package is below `launch` and never imports it.
LAUNCH_USERS = {"cli", "perf", "chaos", "bench"}


def test_no_product_package_imports_launch():
    below = [p for p in PACKAGES if p not in LAUNCH_USERS | {"launch"}]
    assert [p for p in below if "launch" in ALLOWED[p]] == []
    assert all("launch" in ALLOWED[p] for p in LAUNCH_USERS)
    assert not ALLOWED["launch"] & (LAUNCH_USERS | FORBIDDEN)

"""Imports run one way (docs/architecture.md): broker -> cursor -> ledger -> bookie client -> proto, everything
-> metadata and common; offload sits beside ledger (ledger reads it only through `ledger.cold`,
so ledger never imports offload); `entries` (Pulsar's stored entry format) serves broker and
offload; `analytics` (Spark source and sink) uses offload, ledger and the bookie client, never
broker; nothing imports broker except cli and perf. `launch` (the processes Strata starts: bookie,
broker, standalone, cluster, PostgreSQL, SeaweedFS) sits above the product packages and below
cli, perf and bench, which use it; no product package imports it.
No product package imports `tests` (it is not installed: `strata` must run without the source
tree), also not through importlib."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["common", "proto", "auth", "entries", "wire", "metadata", "bookie", "ledger", "offload", "cursor",
            "broker", "analytics", "launch", "cli", "perf", "bench"]

ALLOWED = {
    "common": {"common"},
    "proto": {"proto"},
    "auth": {"common", "auth"},
    "entries": {"common", "proto", "entries"},
    "wire": {"common", "proto", "entries", "wire"},
    "metadata": {"common", "metadata"},
    "bookie": {"common", "metadata", "proto", "auth", "bookie"},
    "offload": {"common", "metadata", "proto", "entries", "offload", "ledger"},
    "ledger": {"common", "metadata", "proto", "bookie", "ledger"},
    "cursor": {"common", "metadata", "ledger", "cursor"},
    "broker": {"common", "metadata", "proto", "auth", "entries", "wire", "bookie", "ledger", "offload", "cursor",
               "broker"},
    "analytics": {"common", "metadata", "proto", "auth", "entries", "bookie", "ledger", "offload", "analytics"},
    "launch": {"common", "auth", "metadata", "offload", "launch"},
    "cli": set(PACKAGES),
    "perf": set(PACKAGES) - {"cli", "bench"},
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


# The packages that use the launchers; every other package is below `launch` and never imports it.
LAUNCH_USERS = {"cli", "perf", "bench"}


def test_no_product_package_imports_launch():
    below = [p for p in PACKAGES if p not in LAUNCH_USERS | {"launch"}]
    assert [p for p in below if "launch" in ALLOWED[p]] == []
    assert all("launch" in ALLOWED[p] for p in LAUNCH_USERS)
    assert not ALLOWED["launch"] & (LAUNCH_USERS | FORBIDDEN)

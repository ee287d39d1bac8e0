"""Imports run one way (DESIGN.md): broker -> cursor -> ledger -> bookie client -> proto, everything
-> metadata and common; offload sits beside ledger; nothing imports broker except cli."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["common", "proto", "metadata", "bookie", "ledger", "offload", "cursor", "broker", "cli"]

ALLOWED = {
    "common": {"common"},
    "proto": {"proto"},
    "metadata": {"common", "metadata"},
    "bookie": {"common", "metadata", "proto", "bookie"},
    "offload": {"common", "metadata", "proto", "offload", "ledger"},
    "ledger": {"common", "metadata", "proto", "bookie", "offload", "ledger"},
    "cursor": {"common", "metadata", "ledger", "cursor"},
    "broker": {"common", "metadata", "proto", "bookie", "ledger", "offload", "cursor", "broker"},
    "cli": set(PACKAGES),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_run_one_way(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        for imported in _imports(path) - ALLOWED[package]:
            bad.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not bad, "layering violations:\n" + "\n".join(bad)


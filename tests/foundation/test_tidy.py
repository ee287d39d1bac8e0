"""Small functions: no function in the product is longer than FUNCTION_LINES_MAX lines.

A function past it is doing several things; split it along what it does. (TigerBeetle's
`tidy.zig` fails its build the same way.) Tests are not held to it. Generated protobuf modules
are skipped.
"""

import ast
from pathlib import Path

from tests.foundation.test_layering import PACKAGES, ROOT

FUNCTION_LINES_MAX = 70


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > FUNCTION_LINES_MAX:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} is {lines} lines")
    return found


def test_no_product_function_is_longer_than_the_cap():
    long = [entry for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            if not path.name.endswith(("_pb2.py", "_pb2_grpc.py")) for entry in _long_functions(path)]
    assert not long, f"functions over {FUNCTION_LINES_MAX} lines:\n" + "\n".join(long)


def test_the_check_sees_a_long_function(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES_MAX)
    assert _long_functions(source, tmp_path) == [f"m.py:1 f is {FUNCTION_LINES_MAX + 1} lines"]

"""The compiled cursor modules (scripts/compile_hot.py) and their pure-Python fallback.

`make test` runs this file twice: in the compiled build, where each listed module must be the
extension whenever `make setup` built one, and with STRATA_PURE_PYTHON=1, where each must be its
.py. An extension older than its source is never run (common.compiled)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

from common.compiled import is_compiled, pure_python, stale_extensions

ROOT = Path(__file__).resolve().parents[2]


def _compiled_list() -> list[str]:
    text = (ROOT / "scripts" / "compile_hot.py").read_text()
    match = re.search(r"^COMPILED = \((.*?)\)$", text, re.M)
    assert match, "COMPILED not found in scripts/compile_hot.py"
    return re.findall(r'"([^"]+)"', match.group(1))


def _module(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _built(path: str) -> bool:
    source = ROOT / path
    return any(source.parent.glob(f"{source.stem}.*.so"))


def test_the_makefile_rebuilds_on_the_compiled_sources() -> None:
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^COMPILED_SRC\s*:=\s*([^#\n]*)", makefile, re.M)
    assert listed and listed.group(1).split() == _compiled_list()


def test_each_module_runs_compiled_unless_pure() -> None:
    for path in _compiled_list():
        module = importlib.import_module(_module(path))
        if pure_python():
            assert not is_compiled(module), module.__file__
        elif _built(path) and not stale_extensions(str((ROOT / path).parent)):
            assert is_compiled(module), module.__file__


def test_pure_switch_loads_the_source_in_a_fresh_process() -> None:
    names = [_module(p) for p in _compiled_list()]
    code = f"import importlib; print([importlib.import_module(n).__file__ for n in {names!r}])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "STRATA_PURE_PYTHON": "1"}, timeout=60).stdout
    assert out.count(".py'") == len(names) and ".so" not in out, out

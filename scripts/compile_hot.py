"""Compile the hot pure modules that pay for it to C extensions with mypyc (run by `make setup`).

Only modules that measured a gain of 15% or more in `strata perf` are listed in `COMPILED`
(docs/benchmarks.md, "Compiled hot modules", has the figures and the candidates that did not
pay). Each extension is built in place next to its source (`cursor/managed_cursor.*.so`), where
Python's import system prefers it to the .py; with STRATA_PURE_PYTHON=1 the package loads the .py
instead (common.compiled), and CI runs the same tests both ways (`make test`).

The build is idempotent: `make setup` runs it only when a listed source or this file changed,
and it rebuilds every listed module at once (mypyc compiles one group into one shared library,
`cursor/compiled__mypyc.*.so`). The C sources go to build/mypyc/; every product is gitignored.
Run it by hand with `.venv/bin/python scripts/compile_hot.py`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Modules compiled, as paths from the repository root; all in one package (one shared library).
COMPILED = ("cursor/managed_cursor.py", "cursor/ack_state.py")
GROUP = "cursor.compiled"   # the shared library: cursor/compiled__mypyc.*.so
# mypy flags for mypyc on top of pyproject.toml's [tool.mypy]: that table names untyped libraries
# this build never imports, which warn_unused_configs would make an error.
MYPY_FLAGS = ("--no-warn-unused-configs",)


def main() -> int:
    from mypyc.build import mypycify
    from setuptools import setup

    os.chdir(ROOT)
    extensions = mypycify([*MYPY_FLAGS, *COMPILED], group_name=GROUP, target_dir="build/mypyc")
    sys.argv = [sys.argv[0], "-q", "build_ext", "--inplace", "--build-temp", "build/mypyc/temp",
                "--build-lib", "build/mypyc/lib"]
    setup(name="strata-compiled", ext_modules=extensions, script_args=sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which hot modules run compiled, and the switch back to pure Python (STRATA_PURE_PYTHON=1).

`scripts/compile_hot.py` (run by `make setup`) builds a few modules to C extensions with mypyc,
next to their sources; Python's import system prefers an extension to a .py of the same name.
A package with compiled modules calls `load_source_if_pure(__path__)` in its `__init__`: with
STRATA_PURE_PYTHON=1 its submodules are then found by a finder that knows only .py files, so
the same tests run against the pure code (CI does both). Without a build, the .py runs anyway.
An extension older than its .py (a source edited since the last `make setup`) is never run: the
package then loads from source, with a warning, so an edit is never silently shadowed.

What must hold: the switch is read once, when the package is first imported, before any of its
submodules; a process never mixes a compiled and a pure copy of one module.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable
from importlib.machinery import EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder, SourceFileLoader
from pathlib import Path
from types import ModuleType

PURE_PYTHON_ENV = "STRATA_PURE_PYTHON"


def pure_python() -> bool:
    """STRATA_PURE_PYTHON=1: compiled extensions are ignored."""
    return os.environ.get(PURE_PYTHON_ENV, "") == "1"


def stale_extensions(directory: str) -> list[str]:
    """Extensions in `directory` whose .py is newer than they are (the build is out of date)."""
    stale = []
    for suffix in EXTENSION_SUFFIXES:
        for extension in Path(directory).glob(f"*{suffix}"):
            source = extension.with_name(extension.name[:-len(suffix)] + ".py")
            if source.exists() and source.stat().st_mtime > extension.stat().st_mtime:
                stale.append(source.name)
    return stale


def load_source_if_pure(package_path: Iterable[str]) -> None:
    """With STRATA_PURE_PYTHON=1, or an extension older than its source, make the submodules of
    the package at `package_path` load from their .py files even where an extension sits next to them."""
    for directory in package_path:
        stale = [] if pure_python() else stale_extensions(directory)
        if stale:
            warnings.warn(f"{directory}: {', '.join(sorted(stale))} changed since the compiled build; running "
                          "the package from source (`make setup` rebuilds it)", RuntimeWarning, stacklevel=2)
        if pure_python() or stale:
            sys.path_importer_cache[directory] = FileFinder(directory, (SourceFileLoader, SOURCE_SUFFIXES))


def is_compiled(module: ModuleType) -> bool:
    """The module was loaded from a C extension, not from its .py."""
    return not (module.__file__ or "").endswith(".py")

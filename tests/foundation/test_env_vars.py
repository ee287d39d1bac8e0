"""Every `STRATA_*` name in the repository is a setting (common.config) or a row of
common.env_vars, so the settings reference (docs/configuration.md) documents it.

Not counted: a prefix (`STRATA_*`, `STRATA_<NAME>`, `f"STRATA_{name.upper()}"`, `STRATA_OFFLOAD_S3_*`,
anything ending in `_`), and a name that is written `env:STRATA_...` somewhere: that is a variable
the user names in a key source (`token_secret_key = "env:MY_VAR"`), not one Strata reads by itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from common.config import SETTINGS
from common.env_vars import ENV_VARS

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"(?<![A-Za-z0-9_])(env:)?(STRATA_[A-Z0-9_]+)")
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".hypothesis", "data", "build"}


def _files() -> list[Path]:
    """The repository's files: git's list, or (an exported tree) every file outside caches and data."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
        return [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        return [p for p in ROOT.rglob("*") if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts)]


def _names_in_repository() -> tuple[dict[str, set[str]], set[str]]:
    """{name: files naming it}, and the names written as env:NAME somewhere."""
    found: dict[str, set[str]] = {}
    user_named: set[str] = set()
    for path in _files():
        if path.resolve() == Path(__file__).resolve():
            continue                    # the examples of the scan's own test
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue                    # binary files (the PNGs), a file listed but deleted
        for match in NAME.finditer(text):
            name = match[2]
            if name.endswith("_"):
                continue                # a prefix or a pattern, not a name
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
            if match[1]:
                user_named.add(name)
    return found, user_named


def test_every_strata_variable_is_a_setting_or_documented():
    known = {"STRATA_" + s.name.upper() for s in SETTINGS} | {v.name for v in ENV_VARS}
    found, user_named = _names_in_repository()
    unknown = {name: files for name, files in found.items() if name not in known and name not in user_named}
    assert not unknown, (
        "STRATA_* variables in neither the settings table (common/config.py) nor common/env_vars.py; add "
        "each to one and run `python -m common.settings_doc`:\n"
        + "\n".join(f"  {name}: {', '.join(sorted(files))}" for name, files in sorted(unknown.items())))


def test_every_documented_variable_is_used():
    """A row of common.env_vars names a variable something still reads."""
    found, _ = _names_in_repository()
    readers = {name: files - {"common/env_vars.py", "docs/configuration.md"} for name, files in found.items()}
    assert [v.name for v in ENV_VARS if not readers.get(v.name)] == []


def test_the_scan_sees_names_and_skips_prefixes():
    text = 'os.environ["STRATA_X_1"]; f"STRATA_{n}"; STRATA_ADMIN_*; _STRATA_ERROR; env:STRATA_MINE'
    assert [(m[1] or "", m[2]) for m in NAME.finditer(text)] == [
        ("", "STRATA_X_1"), ("", "STRATA_ADMIN_"), ("env:", "STRATA_MINE")]

"""Writes the files generated from the settings table: the typed fields and the reference page.

    python -m common.settings_doc            # rewrite common/settings_fields.py and docs/configuration.md
    python -m common.settings_doc --check    # exit 1, naming the stale files, when either differs

The source of truth is `common.config.TABLE` (the settings, in sections) and
`common.env_vars.ENV_VARS` (the other `STRATA_*` variables), with the Pulsar keys of
`common.pulsar_conf.PULSAR_KEYS`. Both outputs are pure functions of those tables, so a test
(tests/foundation/test_settings_doc.py) compares them with the files in the tree.

What must hold: the output is deterministic (table order, no timestamps), the fields module is
valid Python that ruff accepts, and the page is plain Markdown with one `#` title and no links
(MkDocs builds docs/ in strict mode).
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

from common.config import SECTIONS, SETTINGS, Setting
from common.env_vars import ENV_VARS, SETTINGS_READ_BY_CLIENTS
from common.pulsar_conf import PULSAR_KEYS

ROOT = Path(__file__).resolve().parents[1]
FIELDS_PATH = Path("common/settings_fields.py")
PAGE_PATH = Path("docs/configuration.md")
COMMAND = "python -m common.settings_doc"
LINE_MAX = 120              # ruff's line-length

# name word -> unit, in priority order: broker_stats_rate_window_ms is in ms, not msg/s
_UNIT_WORDS = {"ms": "ms", "bytes": "bytes", "mb": "MB", "minutes": "minutes", "seconds": "seconds",
               "ratio": "ratio", "rate": "msg/s"}
_SETTING_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_NAMES = frozenset(s.name for s in SETTINGS)


# --- how one setting reads --------------------------------------------------------------------------

def unit(setting: Setting) -> str:
    """The unit its name carries (STYLE 11): the first unit word of the name, '' for counts and text."""
    if setting.type not in (int, float):
        return ""
    words = setting.name.split("_")
    return next((name for word, name in _UNIT_WORDS.items() if word in words), "")


def number(value: float, kind: type) -> str:
    return str(int(value)) if kind is int else repr(float(value))


def _duration(ms: float) -> str:
    for size, name in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s")):
        if ms >= size and ms % size == 0:
            return f"{int(ms // size)} {name}"
    return f"{ms / 1000:g} s"


def _size(size_bytes: float) -> str:
    for size, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size_bytes >= size and size_bytes % size == 0:
            return f"{int(size_bytes // size)} {name}"
        if size_bytes >= size:
            return f"{size_bytes / size:.2f} {name}"
    return f"{int(size_bytes)} B"


def default_text(setting: Setting) -> str:
    """The default as it is written in a TOML file or a variable."""
    value = setting.default
    if setting.type is bool:
        return "true" if value else "false"
    if setting.type is str:
        return f'"{value}"'
    return number(value, setting.type)


def default_reading(setting: Setting) -> str:
    """A big default in words: "10 s", "8 MiB" ('' when the number says it)."""
    value = setting.default
    if unit(setting) == "ms" and value >= 1_000:
        return _duration(value)
    if unit(setting) == "bytes" and value >= 1 << 10:
        return _size(value)
    return ""


def bounds_text(setting: Setting) -> str:
    if setting.min is None or setting.max is None:
        return ""
    return f"{number(setting.min, setting.type)} .. {number(setting.max, setting.type)}"


def pulsar_keys() -> dict[str, list[str]]:
    """Setting name -> the keys of Pulsar's broker.conf that set it."""
    out: dict[str, list[str]] = {}
    for key in PULSAR_KEYS:
        for name in key.ours:
            out.setdefault(name, []).append(key.pulsar)
    return out


# --- the typed fields module -------------------------------------------------------------------------

def _docstring(text: str, indent: str) -> list[str]:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    lines = textwrap.wrap(text, LINE_MAX - len(indent) - 6, break_on_hyphens=False)
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}', *(f"{indent}{line}" for line in lines[1:]), f'{indent}"""']


def _field_doc(setting: Setting) -> str:
    reading = f" ({default_reading(setting)})" if default_reading(setting) else ""
    facts = [f"Default {default_text(setting)}{reading}"]
    if bounds_text(setting):
        facts.append(f"bounds {bounds_text(setting)}")
    if unit(setting):
        facts.append(f"unit {unit(setting)}")
    return f"{setting.doc}. {'; '.join(facts)}."


def fields_module() -> str:
    """The text of common/settings_fields.py."""
    out = [
        f'"""Every setting\'s name and type, generated from `common.config.TABLE` by `{COMMAND}`.',
        "",
        "Do not edit: change the table and run the command (a test fails while this file is stale).",
        "`Config` inherits `SettingsFields`, so mypy and editors know each setting: `config.brokr_port` is a",
        "type error, and \"go to definition\" lands on the setting's doc here. `SettingValues` types the",
        "keyword overrides of `load_config`, `default_config` and `Config.replace` (for the type checker",
        "only: import it under `if TYPE_CHECKING:`). Nothing here holds a value: a `Config` keeps its",
        "values in slots.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import TYPE_CHECKING, TypedDict",
        "",
        "",
        "class SettingsFields:",
        '    """Every setting, as an attribute of `Config` (annotations only)."""',
        "",
        "    __slots__ = ()",
    ]
    for section, settings in _by_section():
        out += ["", f"    # --- {section} ---"]
        for setting in settings:
            out.append(f"    {setting.name}: {setting.type.__name__}")
            out += _docstring(_field_doc(setting), "    ")
    out += ["", "", "if TYPE_CHECKING:   # a TypedDict of every setting costs a millisecond at import",
            "    class SettingValues(TypedDict, total=False):",
            '        """Settings given by name: `default_config(broker_port=0)`."""', ""]
    out += [f"        {setting.name}: {setting.type.__name__}" for setting in SETTINGS]
    return "\n".join(out) + "\n"


def _by_section() -> Iterator[tuple[str, list[Setting]]]:
    for section in SECTIONS:
        yield section.title, [s for s in SETTINGS if s.section == section.title]


# --- the reference page ------------------------------------------------------------------------------

def prose(text: str) -> str:
    """Table-cell Markdown of a doc line: setting names as code; outside code spans, the characters
    Markdown would read as HTML, emphasis or a cell border are escaped."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):         # even parts are outside code spans
        words = _SETTING_NAME.split(parts[index])
        names = _SETTING_NAME.findall(parts[index])
        out = [_escape(words[0])]
        for name, after in zip(names, words[1:]):
            out += [f"`{name}`" if name in _NAMES else _escape(name), _escape(after)]
        parts[index] = "".join(out)
    return "`".join(parts)


def _escape(text: str) -> str:
    for char in "\\|*_":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


INTRO = f"""\
# Configuration reference

This page is generated from the settings table in `common/config.py` and the variable table
in `common/env_vars.py` by `{COMMAND}`: change the tables, then run the command.
Do not edit it by hand; a test fails while it differs from the tables.

## How settings are given

`strata broker`, `strata bookie` and `strata standalone` read every setting below, each source
overriding the ones before it:

1. the default;
2. the settings file given with `--config FILE`:
   - TOML, with `name = value` pairs at the top level or under a `[strata]` table;
   - or Pulsar's `broker.conf` / `standalone.conf` format when the file name ends in `.conf`: the
     keys in the Pulsar key column are read, converted to Strata's units (seconds and minutes to
     `_ms`, megabytes to bytes), and other keys are ignored with one warning per file. A blank value
     leaves the default, except a blank port, which is not served (-1).
     `backlogQuotaDefaultLimitGB`, when above 0, wins over `backlogQuotaDefaultLimitBytes`, and
     `basicAuthConf` may come as `-Dpulsar.auth.basic.conf=...` in `PULSAR_EXTRA_OPTS`, as in Pulsar;
3. the environment variable `STRATA_<NAME>`, the setting's name in upper case:
   `STRATA_BROKER_PORT=6651`. A boolean is `true`, `false`, `1`, `0`, `yes`, `no`, `on` or `off`;
4. the command-line flags in the Flags column. `strata standalone --bookies N` sets the three
   ledger quorums from the number of bookies, and `strata cluster up` gives its nodes the quorums
   and the lease of its flags as `STRATA_*` variables.

For example, a TOML file:

```toml
[strata]
broker_port = 6651
managed_ledger_cache_bytes_max = 536870912
authentication_enabled = true
```

Every value is checked at start-up against its type and bounds, and so are the relations between
settings (for example E >= Qw >= Qa for the ledger quorums, and `broker_frame_bytes_max` at least
`broker_max_message_bytes`). A name that is not a setting is an error in a TOML file; an
environment variable that is not a setting is not read.

Names carry their unit: `_ms` milliseconds, `_bytes` bytes, `_mb` megabytes, `_minutes`,
`_seconds`. A number with no unit in the Unit column is a count. Bounds are inclusive.
"""


def _settings_table(settings: list[Setting], keys: dict[str, list[str]]) -> list[str]:
    rows = ["| Setting | Type | Default | Bounds | Unit | Meaning | Pulsar key | Flags |",
            "|---|---|---|---|---|---|---|---|"]
    for s in settings:
        default = _code(default_text(s)) + (f" ({default_reading(s)})" if default_reading(s) else "")
        cells = [_code(s.name), s.type.__name__, default, bounds_text(s), unit(s), prose(s.doc),
                 ", ".join(_code(k) for k in keys.get(s.name, ())), ", ".join(_code(f) for f in s.flags)]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def reference_page() -> str:
    """The text of docs/configuration.md."""
    keys = pulsar_keys()
    out = [INTRO.rstrip("\n"), "", "## Settings", ""]
    out.append(f"{len(SETTINGS)} settings in {len(SECTIONS)} sections.")
    for section in SECTIONS:
        settings = [s for s in SETTINGS if s.section == section.title]
        out += ["", f"### {_capital(section.title)}", "", _capital(prose(section.doc)) + ".", ""]
        out += _settings_table(settings, keys)
    out += ["", "## Other environment variables", "",
            "These `STRATA_*` variables are not settings: clients, tools, debugging switches and the tests",
            "read them themselves.", "",
            "| Variable | Read by | Meaning |", "|---|---|---|"]
    out += [f"| {_code(v.name)} | {prose(v.read_by)} | {prose(v.doc)} |" for v in ENV_VARS]
    out += ["", prose(SETTINGS_READ_BY_CLIENTS)]
    return "\n".join(out) + "\n"


# --- the command ---------------------------------------------------------------------------------------

def outputs() -> dict[Path, str]:
    """Each generated file (relative to the repository) and the text it must hold."""
    return {FIELDS_PATH: fields_module(), PAGE_PATH: reference_page()}


def stale(root: Path = ROOT) -> list[Path]:
    """The generated files that differ from what the tables give (or are missing)."""
    found = []
    for path, text in outputs().items():
        target = root / path
        if not target.exists() or target.read_text() != text:
            found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print(f"usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    if args == ["--check"]:
        behind = stale()
        for path in behind:
            print(f"{path} is stale: run `{COMMAND}`", file=sys.stderr)
        return 1 if behind else 0
    for path, text in outputs().items():
        target = ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
